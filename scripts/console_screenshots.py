"""The console's screenshots in docs/images, taken of a server holding realistic data.

    python scripts/console_screenshots.py [--out docs/images]

It starts a real memoryd (no tokens: loopback, an empty sign-in) with a scripted model (the
chat-completions server the tests use), and stores, over gRPC, what a small deployment holds
after two weeks: four owners of two agents, a few hundred messages spread over 14 days, reviews
that learnt facts and replaced, archived and refused some, a failed review, and a compaction.
Then Debian's headless chromium (`make browser`) opens each page and saves it as
`console-<page>.png`. Nothing here is random: the same data gives the same pictures, up to the
dates they show.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
import tempfile
from pathlib import Path

from google.protobuf import timestamp_pb2
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import memoryd_client as md
from memoryd.testing.configs import review_config
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
HTTP = '\n[memoryd.http]\nlisten = "127.0.0.1:0"\n\n[memoryd.search]\nembeddings = "off"\n'
DAYS = 14

# What each owner talks about: (channel, chat, lines said over the two weeks).
OWNERS: dict[tuple[str, str], list[tuple[str, str, list[str]]]] = {
    ("main", "ada"): [
        (
            "telegram",
            "ada-dm",
            [
                "I live in Lisbon, near the river",
                "Can you remind me what time the ferry leaves on Sundays?",
                "I'm vegetarian, so skip the fish places",
                "Training for the Porto half marathon in March",
                "My knee hurts after long runs, any stretches?",
                "Booked the flight to Berlin for the conference",
                "Please keep answers short, I read them on the bus",
            ],
        ),
        ("slack", "team-planning", ["The release is on Thursday", "I own the migration notes"]),
    ],
    ("main", "bruno"): [
        (
            "discord",
            "bruno-dm",
            [
                "I work night shifts at the hospital",
                "Looking for a sourdough recipe that fits a 6 am oven",
                "I moved from Recife to Curitiba last year",
                "Learning Rust in the evenings",
            ],
        ),
    ],
    ("main", "chen"): [
        (
            "telegram",
            "chen-dm",
            [
                "My daughter starts school in September",
                "We are allergic to peanuts at home",
                "I prefer metric units, always",
            ],
        ),
    ],
    ("support", "dana"): [
        (
            "slack",
            "dana-helpdesk",
            [
                "The VPN drops every hour on my laptop",
                "I'm on the Madrid office network",
                "Ticket 4411 is still open",
            ],
        ),
    ],
}
REPLIES = [
    "Noted.",
    "Here is what I found.",
    "Sure, I'll keep that in mind.",
    "Done: I added it to your list.",
]


def stamp(moment: dt.datetime) -> timestamp_pb2.Timestamp:
    found = timestamp_pb2.Timestamp()
    found.FromDatetime(moment)
    return found


def ops(*operations: dict[str, object]) -> str:
    return json.dumps({"operations": list(operations)})


def seed(server: ServerProcess, model: FakeModel) -> md.Conversation:
    """Two weeks of a small deployment; returns the conversation the pictures look at."""
    now = dt.datetime.now(dt.UTC).replace(minute=0, second=0, microsecond=0)
    first = now - dt.timedelta(days=DAYS)
    with md.connect_sync(server.address) as channel:
        memory = md.SyncStubs(channel)
        compaction = md.SyncStubs(channel)
        chats = {}
        history = []
        for (agent, owner), conversations in OWNERS.items():
            for channel_name, chat, lines in conversations:
                key = md.Conversation(
                    agent_id=agent, owner_id=owner, channel=channel_name, chat_id=chat
                )
                chats[chat] = key
                for day in range(DAYS):
                    for turn in range(4 + (day * 7 + len(chat)) % 9):
                        at = first + dt.timedelta(days=day, hours=8 + turn, minutes=day % 50)
                        said = md.user(
                            owner, lines[(day + turn) % len(lines)], created_at=stamp(at)
                        )
                        reply = md.assistant(
                            "assistant",
                            REPLIES[(day + turn) % len(REPLIES)],
                            created_at=stamp(at + dt.timedelta(minutes=1)),
                        )
                        history += [
                            md.IngestedMessage(conversation=key, message=said),
                            md.IngestedMessage(conversation=key, message=reply),
                        ]
        # The two weeks as a backfill (already reviewed); today's messages are reviewed below,
        # one review each, so each scripted answer goes to the review it was written for.
        memory.conversations.IngestMessages(
            iter(
                md.IngestMessagesRequest(messages=history[start : start + 1000], as_reviewed=True)
                for start in range(0, len(history), 1000)
            )
        )
        for chat, key in chats.items():
            talks = OWNERS[(key.agent_id, key.owner_id)]
            lines = next(lines for _, name, lines in talks if name == chat)
            memory.conversations.AppendMessages(
                md.AppendMessagesRequest(
                    conversation=key, messages=[md.user(key.owner_id, line) for line in lines[:3]]
                )
            )
        ada = chats["ada-dm"]
        model.reply(
            ops(
                {
                    "action": "add",
                    "target": "user",
                    "category": "identity",
                    "value": "Lives in Lisbon",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "preference",
                    "value": "Is vegetarian",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "goal",
                    "value": "Training for the Porto half marathon in March",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "preference",
                    "value": "Wants short answers, read on the bus",
                },
                {"action": "replace", "id": 999999, "value": "Lives on the moon"},
            )
        )
        memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=ada))
        rows = memory.memory.ListMemories(
            md.ListMemoriesRequest(owner=md.OwnerScope(agent_id="main", owner_id="ada"))
        )
        by_value = {item.memory.value: item.memory.id for item in rows.memories}
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=ada,
                messages=[
                    md.user("ada", "We moved to Porto last weekend!"),
                    md.user("ada", "I stopped the marathon training, the knee needs rest"),
                ],
            )
        )
        model.reply(
            ops(
                {"action": "replace", "id": by_value["Lives in Lisbon"], "value": "Lives in Porto"},
                {
                    "action": "archive",
                    "id": by_value["Training for the Porto half marathon in March"],
                    "reason": "stopped training: knee injury",
                },
                {
                    "action": "add",
                    "target": "user",
                    "category": "fact",
                    "value": "Shared the whole moving plan: "
                    + "the van on Friday at 8, the keys from the landlord, the piano movers, " * 4,
                },
            )
        )
        memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=ada))
        for chat, answer in (
            (
                "bruno-dm",
                ops(
                    {
                        "action": "add",
                        "target": "user",
                        "category": "identity",
                        "value": "Works night shifts at a hospital",
                    },
                    {
                        "action": "add",
                        "target": "user",
                        "category": "interest",
                        "value": "Learning Rust",
                    },
                ),
            ),
            (
                "chen-dm",
                ops(
                    {
                        "action": "add",
                        "target": "user",
                        "category": "preference",
                        "value": "Prefers metric units",
                    },
                    {
                        "action": "add",
                        "target": "user",
                        "category": "context",
                        "value": "Peanut allergy at home",
                    },
                ),
            ),
            (
                "dana-helpdesk",
                ops(
                    {
                        "action": "add",
                        "target": "user",
                        "category": "context",
                        "value": "Works from the Madrid office",
                    }
                ),
            ),
        ):
            model.reply(answer)
            memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=chats[chat]))
        model.fail(401)
        memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=chats["team-planning"]))
        model.reply(
            "Ada lives in Lisbon (now Porto), is vegetarian and prefers short answers. She asked "
            "about Sunday ferries, knee stretches and booked a flight to Berlin."
        )
        done = compaction.context.Compact(md.CompactRequest(conversation=ada, context_window=1200))
        if done.outcome != md.COMPACTION_OUTCOME_COMPACTED:
            raise SystemExit(f"the compaction did not happen: {done.message}")
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=ada,
                messages=[md.user("ada", "Any vegetarian place near the station?")],
            )
        )
    return ada


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--hide-scrollbars",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))


def shoot(
    chrome: webdriver.Chrome,
    http: str,
    route: str,
    out: Path,
    *,
    height: int = 900,
    section: str | None = None,
) -> None:
    """Open `route`, wait for every section, and save the page `height` pixels tall (from the
    heading `section`, when given)."""
    chrome.get("about:blank")
    chrome.get(f"http://{http}/console/#{route}")
    WebDriverWait(chrome, 30).until(
        lambda found: (
            found.find_elements(By.CSS_SELECTOR, "#main h1")
            and "Loading…" not in found.find_element(By.ID, "main").text
        )
    )
    chrome.set_window_size(1280, height)
    if section is not None:
        heading = chrome.find_element(By.XPATH, f"//main//h2[text()='{section}']")
        chrome.execute_script("arguments[0].scrollIntoView(true)", heading)
    chrome.save_screenshot(str(out))
    print(f"wrote {out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch, FakeModel() as model:
        config = review_config(model, enabled=False, keep_review_exchanges=True) + HTTP
        server = ServerProcess(Path(scratch) / "home", config=config).start()
        try:
            ada = seed(server, model)
            http = str(server.events("serving")[-1]["http"])
            chrome = browser()
            try:
                chrome.get(f"http://{http}/console/")
                chrome.execute_async_script(
                    "const done = arguments[arguments.length - 1];"
                    "fetch('/console/session', {method: 'POST', headers: {'content-type':"
                    " 'application/json'}, body: JSON.stringify({token: ''})})"
                    ".then((r) => r.json())"
                    # The tab keeps the session's CSRF token, as the page's own sign-in does.
                    ".then((s) => { sessionStorage.setItem('memoryd-console-csrf', s.csrf); "
                    "done(); });"
                )
                conversation = f"/{ada.agent_id}/{ada.owner_id}/{ada.channel}/{ada.chat_id}/"
                pages = {
                    "overview": ("/", 1500),
                    "agent": ("/agent/main", 1100),
                    "owner": ("/owner/main/ada", 2200),
                    "conversation": ("/conversation" + conversation, 1800),
                    "context": ("/context" + conversation, 1400),
                    "settings": ("/settings", 1100),
                }
                for name, (route, height) in pages.items():
                    shoot(chrome, http, route, args.out / f"console-{name}.png", height=height)
                shoot(
                    chrome,
                    http,
                    "/conversation" + conversation,
                    args.out / "console-review-runs.png",
                    section="Review runs",
                )
            finally:
                chrome.quit()
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
