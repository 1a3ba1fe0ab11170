"""The console's first view at 1,000,000 messages: how long each page takes to render in a real
browser, from navigation to every section filled.

    python bench/console_first_view.py [--messages 1000000] [--memories 100000] [--loads 15]
                                       [--backend postgres]

The database is bulk-loaded as bench/recall_latency.py loads it (3,000 conversations of 1,765
owners, two agents; ~57 memory rows an owner), and one owner gets rendered prompt files and a
few revisions through the server. The console is served on the HTTP port of a real memoryd
(no tokens: sign-in takes an empty token) and loaded by Debian's headless chromium through
chromedriver (`make browser`). Each page is loaded `--loads` times afresh (about:blank in
between); the figure is the page's `memoryd:view-rendered` mark, which the console sets when its
last section is filled: navigation, the page's files (cached after the first load), every API
call it makes, and the DOM work. The target is a first view under 300 ms.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import backends
from recall_latency import build
from selenium import webdriver

import memoryd_client as md
from memoryd.testing.server_process import ServerProcess

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
# Embeddings off: the bulk-loaded messages have no vectors, and embedding a million of them
# would keep the server's cores busy for an hour; a server that has caught up has an empty queue.
CONFIG = '[memoryd.http]\nlisten = "127.0.0.1:0"\n\n[memoryd.search]\nembeddings = "off"\n'
WAIT_FOR_MARK = """
const done = arguments[arguments.length - 1];
const started = Date.now();
(function look() {
  const mark = performance.getEntriesByName("memoryd:view-rendered")[0];
  const failed = document.querySelector("#main .error");
  if (mark) done({ms: mark.startTime});
  else if (failed) done({error: failed.textContent});
  else if (Date.now() - started > 30000) done({error: "not rendered in 30 s"});
  else setTimeout(look, 2);
})();
"""


def browser() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,900",
    ):
        options.add_argument(flag)
    return webdriver.Chrome(options=options, service=webdriver.ChromeService(CHROMEDRIVER))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=1_000_000)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--loads", type=int, default=15)
    parser.add_argument(
        "--spread-days",
        type=int,
        default=90,
        help="the messages' times run evenly over this many days up to now (the charts' data)",
    )
    parser.add_argument("--backend", default="sqlite", choices=backends.CHOICES)
    args = parser.parse_args()
    rng = random.Random(2028)
    with (
        tempfile.TemporaryDirectory() as scratch,
        backends.started([args.backend], Path(scratch)) as places,
    ):
        home = Path(scratch) / "home"
        started = time.perf_counter()
        built = build(
            places,
            args.backend,
            home,
            (args.messages, args.memories),
            rng,
            spread_days=args.spread_days,
        )
        print(f"loaded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
        server = ServerProcess(home, config=CONFIG, env=places.env(args.backend, home)).start()
        try:
            http = str(server.events("serving")[-1]["http"])
            chat = max(built["chats"], key=lambda c: c.chat_id)
            owner = md.OwnerScope(agent_id=chat.agent_id, owner_id=chat.owner_id)
            with md.connect_sync(server.address) as channel:
                memory = md.SyncStubs(channel)
                for index in range(5):  # rendered prompt files, and revisions to list
                    memory.memory.StoreMemory(
                        md.StoreMemoryRequest(
                            owner=owner,
                            category=md.CATEGORY_PREFERENCE,
                            key=f"bench-{index}",
                            value=f"Prefers answer style {index}",
                        )
                    )
                conversation = md.Conversation(
                    agent_id=chat.agent_id,
                    owner_id=chat.owner_id,
                    channel=chat.channel,
                    chat_id=chat.chat_id,
                    thread_scope=chat.thread_scope,
                )
                found = memory.conversations.GetConversation(
                    md.GetConversationRequest(conversation=conversation)
                )
            pages = {
                "overview": "/",
                "agent (owners)": f"/agent/{chat.agent_id}",
                "owner": f"/owner/{chat.agent_id}/{chat.owner_id}",
                "conversation": f"/conversation/{chat.agent_id}/{chat.owner_id}/{chat.channel}/"
                f"{chat.chat_id}/{chat.thread_scope}",
                "context": f"/context/{chat.agent_id}/{chat.owner_id}/{chat.channel}/"
                f"{chat.chat_id}/{chat.thread_scope}",
            }
            figures = measure(http, pages, args.loads)
        finally:
            server.stop()
    result = {
        "backend": args.backend,
        "messages": args.messages,
        "memories": args.memories,
        "conversation_messages": found.message_count,
        "loads": args.loads,
        "pages": figures,
    }
    print(json.dumps(result, indent=2))
    return 0


def measure(http: str, pages: dict[str, str], loads: int) -> dict[str, dict[str, float]]:
    """Each page's first view in ms: the cold load, then the median and p90 of the rest."""
    chrome = browser()
    try:
        chrome.get(f"http://{http}/console/")
        chrome.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "fetch('/console/session', {method: 'POST', headers: {'content-type':"
            " 'application/json'}, body: JSON.stringify({token: ''})}).then((r) => r.json())"
            # The tab keeps the session's CSRF token, as the page's own sign-in does.
            ".then((s) => { sessionStorage.setItem('memoryd-console-csrf', s.csrf); done(); });"
        )
        figures = {}
        for name, route in pages.items():
            times = []
            for _ in range(loads + 1):
                chrome.get("about:blank")
                chrome.get(f"http://{http}/console/#{route}")
                seen = chrome.execute_async_script(WAIT_FOR_MARK)
                if "error" in seen:
                    raise RuntimeError(f"{name}: {seen['error']}")
                times.append(float(seen["ms"]))
            warm = sorted(times[1:])
            figures[name] = {
                "first_load_ms": round(times[0], 1),
                "p50_ms": round(statistics.median(warm), 1),
                "p90_ms": round(warm[int(len(warm) * 0.9) - 1], 1),
            }
            print(name, figures[name], file=sys.stderr)
        return figures
    finally:
        chrome.quit()


if __name__ == "__main__":
    sys.exit(main())
