"""The web console in a real browser: Debian's headless chromium driven through its
chromedriver (Selenium), against a real memoryd with the fake model, on each backend.

Every page is visited and checked with axe-core (WCAG 2 A and AA rules): sign-in, the overview,
an agent's owners, an owner (prompt files, rows, revisions), a conversation (state, checkpoints,
messages, search, review runs, activity) and the settings. The tests archive and restore a row,
roll USER.md back through the diff view, save the review's settings, read a review run's skipped
operation and its reason and the rows it changed, chart the activity by day and by hour,
render hostile messages as text, compact a conversation and start a new session from its page,
and sign in with a guest-capped token. Screenshots of the main pages go to the test's folder
(and to MEMORYD_SCREENSHOTS when set); the documentation's come from
scripts/console_screenshots.py, of realistic data.

`make browser` installs chromium, chromedriver and axe-core; without them these tests skip,
saying so.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import shutil
import threading
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import memoryd_client as md
from memoryd.api import contract
from memoryd.testing.configs import embedding_config, review_config
from memoryd.testing.fake_embeddings import FakeEmbeddings
from memoryd.testing.fake_model import FakeModel
from memoryd.testing.server_process import ServerProcess

# On both backends: the console reads and writes through every storage path it shows.
pytestmark = [pytest.mark.slow, pytest.mark.storage]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
AXE = Path(__file__).resolve().parents[2] / ".tools/npm/node_modules/axe-core/axe.min.js"
ADMIN = "console-admin-token-0123456789abcdef"
ADAPTER = "console-adapter-token-0123456789abcd"
GUEST = "console-guest-token-0123456789abcdef"
TOKENS = f"""
[memoryd.http]
listen = "127.0.0.1:0"

[[memoryd.auth.tokens]]
token = "{ADMIN}"
role = "admin"
agents = ["*"]

[[memoryd.auth.tokens]]
token = "{ADAPTER}"
role = "adapter"
agents = ["main"]

[[memoryd.auth.tokens]]
token = "{GUEST}"
role = "adapter"
agents = ["main"]
max_trust = "guest"
"""
HOSTILE = (
    '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
    "\u202eevil\u202c zero\u200bwidth &amp; <b>bold</b>"
)
BIG = "large " * (256 * 1024 // 6)  # 256 KiB of text in one message
CONVERSATION = md.Conversation(agent_id="main", owner_id="ada", channel="telegram", chat_id="c-1")

webdriver = pytest.importorskip("selenium.webdriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists() and AXE.exists()):
    pytest.skip(
        "the browser tests need chromium, chromedriver and axe-core: `make browser`",
        allow_module_level=True,
    )

from selenium.common.exceptions import StaleElementReferenceException  # noqa: E402
from selenium.webdriver.common.action_chains import ActionChains  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.remote.webdriver import WebDriver  # noqa: E402
from selenium.webdriver.remote.webelement import WebElement  # noqa: E402
from selenium.webdriver.support.ui import Select, WebDriverWait  # noqa: E402


class Console:
    """A memoryd with the console, seeded; and the browser looking at it."""

    def __init__(self, server: ServerProcess, browser: WebDriver, shots: Path) -> None:
        self.server = server
        self.browser = browser
        self.shots = shots
        self.http = str(server.events("serving")[-1]["http"])
        # The id of the seeded memory row the tests archive and restore.
        self.row = 0

    def open(self, route: str = "/") -> None:
        """Load the page afresh at `route` (a URL differing only by its fragment would not
        reload)."""
        self.browser.get("about:blank")
        self.browser.get(f"http://{self.http}/console/#{route}")

    def wait(self, css: str, text: str | None = None, timeout: float = 15) -> WebElement:
        """The first element matching `css` (whose text contains `text`), once it shows."""

        def found(browser: WebDriver) -> WebElement | bool:
            for element in browser.find_elements(By.CSS_SELECTOR, css):
                if text is None or text in element.text:
                    return element
            return False

        # The page re-renders a section when its read answers: an element found may go stale.
        wait = WebDriverWait(
            self.browser, timeout, ignored_exceptions=(StaleElementReferenceException,)
        )
        element = wait.until(found)
        assert isinstance(element, WebElement)  # `found` returns an element once it is truthy
        return element

    def loaded(self) -> None:
        """Every section of the page has been filled (no "Loading…" left)."""
        WebDriverWait(self.browser, 15).until(
            lambda browser: "Loading…" not in browser.find_element(By.ID, "main").text
        )

    def sign_in(self, token: str) -> None:
        """Sign in with `token` (signing out first, when a session is open)."""
        self.open("/")
        if self.wait("#token, #nav:not([hidden])").get_attribute("id") == "nav":
            self.sign_out()
        field = self.wait("#token")
        field.clear()
        field.send_keys(token)
        self.browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
        self.wait("#nav:not([hidden])")

    def sign_out(self) -> None:
        self.browser.find_element(By.ID, "sign-out").click()
        self.wait("#token")

    def confirm(self) -> None:
        self.wait("dialog[open] button.danger").click()

    def accessible(self, page: str) -> None:
        """axe-core finds no WCAG 2 A or AA violation on the page as it is now."""
        self.browser.execute_script(AXE.read_text(encoding="utf-8"))
        found = self.browser.execute_async_script(
            "const done = arguments[arguments.length - 1];"
            "axe.run(document, {runOnly: ['wcag2a', 'wcag2aa']})"
            ".then((r) => done(r.violations.map((v) => ({id: v.id, help: v.help,"
            " nodes: v.nodes.map((n) => n.html).slice(0, 3)}))))"
            ".catch((e) => done([{id: 'axe failed', help: String(e)}]));"
        )
        assert found == [], f"{page}: {json.dumps(found, indent=1)}"

    def screenshot(self, name: str) -> None:
        path = self.shots / f"{name}.png"
        self.browser.set_window_size(1280, 900)
        self.browser.save_screenshot(str(path))
        wanted = os.environ.get("MEMORYD_SCREENSHOTS")
        if wanted:
            Path(wanted).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(wanted) / path.name)


def chromium(folder: Path, *flags: str) -> WebDriver:
    """Headless chromium, with the flags this machine's closed network needs (and `flags`)."""
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={folder / 'profile'}",
        "--window-size=1280,900",
        *flags,
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=str(CHROMEDRIVER))
    browser: WebDriver = webdriver.Chrome(options=options, service=service)
    return browser


# Each RPC's memoryd.v2 path, by name.
V2 = {method.name: contract.path(method) for method in contract.methods()}


def rpc(address: str, method: str, body: dict[str, Any], **headers: str) -> tuple[int, Any]:
    """A Connect call with urllib: (HTTP status, the JSON answer)."""
    request = urllib.request.Request(
        f"http://{address}{V2[method]}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", **headers},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
            return response.status, json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def seed(server: ServerProcess, model: FakeModel) -> dict[str, int]:
    """A conversation with hostile and large messages, a review that added a fact and skipped
    an operation, and an owner row to archive."""
    with md.connect_sync(server.address, token=ADMIN) as channel:
        memory = md.SyncStubs(channel)
        memory.conversations.CommitTurn(
            md.CommitTurnRequest(
                conversation=CONVERSATION,
                messages=[
                    md.NewMessage(role=md.ROLE_USER, sender="ada", content="I live in Lisbon"),
                    md.NewMessage(role=md.ROLE_USER, sender="<b>mallory</b>", content=HOSTILE),
                    md.NewMessage(role=md.ROLE_USER, sender="ada", content=BIG),
                ],
            )
        )
        model.reply(
            json.dumps(
                {
                    "operations": [
                        {
                            "action": "add",
                            "target": "user",
                            "category": "identity",
                            "value": "Lives in Lisbon",
                        },
                        {"action": "archive", "id": 987654, "reason": "stale"},
                    ]
                }
            )
        )
        memory.reviews.ReviewNow(md.ReviewNowRequest(conversation=CONVERSATION))
        stored = memory.memory.StoreMemory(
            md.StoreMemoryRequest(
                owner=md.OwnerScope(agent_id="main", owner_id="ada"),
                key="coffee",
                value="Takes coffee black",
                category=md.CATEGORY_PREFERENCE,
            )
        )
    return {"row": stored.memory.id}


@pytest.fixture(scope="module")
def console(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Console]:
    folder = tmp_path_factory.mktemp("console")
    with FakeModel() as model:
        config = review_config(model, enabled=False, keep_review_exchanges=True) + TOKENS
        server = ServerProcess(folder / "home", config=config).start()
        try:
            seeded = seed(server, model)
            browser = chromium(folder)
            try:
                found = Console(server, browser, folder)
                found.row = seeded["row"]
                found.model = model  # type: ignore[attr-defined]
                yield found
            finally:
                browser.quit()
        finally:
            server.stop()


# --- sign-in and the session ------------------------------------------------------------------


def test_sign_in_refuses_a_wrong_token_and_opens_a_session_with_a_good_one(
    console: Console,
) -> None:
    console.open("/")
    field = console.wait("#token")
    # Signed out, the header offers nothing to click but the brand (`hidden` beats display: flex).
    assert not console.browser.find_element(By.ID, "nav").is_displayed()
    assert not console.browser.find_element(By.ID, "sign-out").is_displayed()
    assert "leave the field blank" in console.browser.find_element(By.ID, "token-hint").text
    console.accessible("sign-in")
    console.screenshot("sign-in")
    # An empty token is sent, and refused by a server with tokens, saying why.
    console.browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
    assert console.wait("form.signin .error", "token").text
    field.send_keys("not-a-token")
    console.browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
    assert "not valid" in console.wait("form.signin .error", "not valid").text
    console.sign_in(ADMIN)
    cookie = console.browser.get_cookie("memoryd_console")
    assert cookie is not None
    assert (cookie["httpOnly"], cookie["sameSite"], cookie["path"]) == (True, "Strict", "/")
    assert not cookie["secure"]  # no TLS here (tests/security/test_tls.py checks Secure with it)
    # Page scripts cannot read the session cookie.
    assert "memoryd_console" not in console.browser.execute_script("return document.cookie")


def test_a_request_without_the_csrf_token_is_refused(console: Console) -> None:
    console.sign_in(ADMIN)
    cookie = console.browser.get_cookie("memoryd_console")
    assert cookie is not None
    jar = f"memoryd_console={cookie['value']}"
    status, answer = rpc(console.http, "GetServerInfo", {}, cookie=jar)
    assert (status, answer["code"]) == (403, "permission_denied")
    assert "CSRF" in answer["message"]
    status, answer = rpc(console.http, "GetServerInfo", {}, cookie=jar, **{"x-memoryd-csrf": "x"})
    assert status == 403
    # From the page itself, a fetch without the header is refused as well.
    status = console.browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch('/memoryd.v2.MemoryService/ArchiveMemory', {method: 'POST', credentials:"
        " 'same-origin', headers: {'content-type': 'application/json'}, body: JSON.stringify("
        f"{{owner: {{agentId: 'main', ownerId: 'ada'}}, id: {console.row}}})"
        "}).then((r) => done(r.status));"
    )
    assert status == 403
    # Another origin may not sign in.
    request = urllib.request.Request(
        f"http://{console.http}/console/session",
        data=json.dumps({"token": ADMIN}).encode(),
        headers={"content-type": "application/json", "origin": "https://evil.example"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=30)  # noqa: S310
    assert refused.value.code == 403


# --- the pages --------------------------------------------------------------------------------


def test_the_overview_shows_the_server_agents_and_settings(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/")
    console.wait("h2", "Agents")
    console.loaded()
    text = console.browser.find_element(By.ID, "main").text
    assert "Review backlog" in text
    assert "sqlite" in text or "postgres" in text
    link = console.wait("table a", "main").get_attribute("href") or ""
    assert link.endswith("#/agent/main")
    console.accessible("overview")
    console.screenshot("overview")
    console.open("/settings")
    console.wait("h3", "[memoryd.server]")
    console.loaded()
    tables = console.browser.find_element(By.CSS_SELECTOR, ".settings-tables")
    assert not console.browser.find_elements(By.CSS_SELECTOR, "main pre")
    rows = {
        row.find_element(By.CSS_SELECTOR, "td code").text: row
        for row in tables.find_elements(By.CSS_SELECTOR, "tr")
        if row.find_elements(By.CSS_SELECTOR, "td code")
    }
    assert {"home", "listen", "backend", "tokens"} <= rows.keys()
    assert "admin" in rows["tokens"].text  # each token by fingerprint and role, never itself
    assert ADMIN not in tables.text
    console.accessible("settings")


def test_the_review_settings_are_saved_to_the_config_file(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/settings")
    interval = console.wait("#review-interval")
    interval.clear()
    interval.send_keys("12")
    console.wait("form.settings button", "Save").click()
    console.confirm()
    saved = console.wait("form.settings .ok", "Saved in").text
    assert saved.endswith("and applied.")
    assert "null" not in console.browser.find_element(By.CSS_SELECTOR, "form.settings").text
    console.screenshot("settings")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        info = md.SyncStubs(channel).admin.GetServerInfo(md.GetServerInfoRequest())
    assert info.review_triggers.review_interval_hours == 12
    assert "review_interval_hours = 12\n" in Path(info.config_path).read_text(encoding="utf-8")


def test_an_agent_lists_its_owners(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/agent/main")
    console.wait("table a", "ada").click()
    console.wait("h1", "Owner ada")
    console.loaded()
    console.accessible("owner")


def test_an_owner_row_is_archived_and_restored(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/owner/main/ada")
    selector = f"#memory-{console.row}"
    console.wait(f"{selector} button.danger", "Archive").click()
    console.confirm()
    console.wait(f"{selector} .badge", "archived")
    console.wait(f"{selector} button", "Restore").click()
    console.confirm()
    console.wait(f"{selector} td", "active")
    row = console.wait("tr", "Lives in Lisbon")
    console.loaded()
    console.screenshot("owner")
    text = row.text
    assert "memory reviewer" in text
    assert "review run #1" in text
    assert "model fake-model-0" in text
    # The messages the fact was learnt from open in a dialog, linked to their conversation.
    row.find_element(By.XPATH, ".//button[starts-with(text(), 'message #')]").click()
    dialog = console.wait("dialog[open]", "I live in Lisbon")
    console.accessible("message")
    dialog.find_element(By.LINK_TEXT, "telegram:c-1").click()
    console.wait("h1", "Conversation telegram:c-1")
    console.loaded()


def test_user_md_is_rolled_back_through_the_diff_view(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/owner/main/ada")
    console.wait("#diff-from")
    console.loaded()
    console.wait("form.inline button", "Compare").click()
    console.wait(".diff")
    assert "Takes coffee black" in console.browser.find_element(By.CSS_SELECTOR, ".diff").text
    console.accessible("diff")
    console.screenshot("diff")
    console.wait("button.danger", "Roll back").click()
    console.confirm()
    # The server's notice stays on the page: what the rollback did to the rows behind the file.
    notice = console.wait("p.notice", "Memory rows put back")
    assert notice.text.startswith("Rolled back user_md to the content of revision")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        context = md.SyncStubs(channel).context.GetPromptContext(
            md.GetPromptContextRequest(agent_id="main", owner_id="ada")
        )
    assert "Takes coffee black" not in context.user_md
    assert "Lisbon" in context.user_md


def test_a_conversation_shows_its_messages_as_text_and_its_review_runs(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/conversation/main/ada/telegram/c-1/")
    console.wait("h2", "Review runs")
    console.loaded()
    cell = console.wait("td", "<script>window.__pwned = 1</script>")
    assert "\u200b" in cell.text or "zero" in cell.text
    assert console.browser.execute_script("return window.__pwned") is None
    assert console.browser.find_elements(By.CSS_SELECTOR, "#main script, #main img, #main b") == []
    assert console.wait("td", "<b>mallory</b>")
    big = console.wait("td", "large large")
    assert len(big.text) < 2_100
    big.find_element(By.TAG_NAME, "button").click()
    assert len(console.wait("td", "large large").text) > 250_000
    run = console.wait("ol.timeline li", "Run #1")
    assert "skipped 1" in run.text
    assert "archive: row 987654 was not in the memory shown to the review" in run.text
    # The server keeps exchanges here: the prompt and the answer open in a dialog, as text.
    run.find_element(By.XPATH, ".//button[text()='Prompt and answer']").click()
    dialog = console.wait("dialog[open]", "Lives in Lisbon")
    assert "<script>window.__pwned = 1</script>" in dialog.text
    assert console.browser.execute_script("return window.__pwned") is None
    console.accessible("exchange")
    dialog.find_element(By.XPATH, ".//button[text()='Close']").click()
    # The rows the run changed, each with its value, opening to the row.
    changed = run.find_element(By.CSS_SELECTOR, "ul.applied li")
    assert "operation 0 (add)" in changed.text
    assert "added: Lives in Lisbon" in changed.text
    changed.find_element(By.XPATH, ".//button[starts-with(text(), 'row #')]").click()
    row = console.wait("dialog[open]", "Memory row #")
    assert "Lives in Lisbon" in row.find_element(By.TAG_NAME, "pre").text
    assert "identity" in row.text
    console.accessible("memory row")
    row.find_element(By.XPATH, ".//button[text()='Close']").click()
    console.accessible("conversation")
    console.screenshot("conversation")


def test_activity_is_charted_by_day_and_by_hour_for_the_server_an_owner_and_a_conversation(
    console: Console,
) -> None:
    def total(scope: dict[str, Any], bucket: str, field: str) -> int:
        status, answer = rpc(
            console.http,
            "GetActivity",
            {**scope, "bucket": f"ACTIVITY_BUCKET_{bucket}"},
            authorization=f"Bearer {ADMIN}",
        )
        assert status == 200, answer
        return int(answer.get("total", {}).get(field, 0))

    def chart(title: str, text: str) -> WebElement:
        return console.wait(f"figure.chart[data-chart='{title}'] svg[aria-label*='{text}']")

    console.sign_in(ADMIN)
    console.open("/")
    messages = total({}, "DAY", "messages")
    assert messages >= 3
    figure = chart("Messages stored", f"Messages {messages:,}")
    assert "by day, 30 days" in (figure.get_attribute("aria-label") or "")
    assert figure.find_elements(By.CSS_SELECTOR, "path.s-messages")
    facts = chart("Facts", "Added")
    assert f"Added {total({}, 'DAY', 'factsAdded'):,}" in (facts.get_attribute("aria-label") or "")
    assert f"Refused {total({}, 'DAY', 'factsRefused'):,}" in (
        facts.get_attribute("aria-label") or ""
    )
    # Pointing at the latest bucket (the right edge) reads its numbers out.
    ActionChains(console.browser).move_to_element_with_offset(
        figure, figure.size["width"] // 2 - 2, 0
    ).perform()
    readout = console.wait("figure.chart[data-chart='Messages stored'] p.readout", "Messages")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d: Messages [\d,]+", readout.text), readout.text
    console.loaded()
    console.accessible("overview with activity")
    # By the hour: 48 of them, the same messages (all sent within the hour or so).
    Select(console.wait("select[name=bucket]")).select_by_value("HOUR")
    hourly = chart("Messages stored", "by hour, 48 hours")
    assert f"Messages {total({}, 'HOUR', 'messages'):,}" in (
        hourly.get_attribute("aria-label") or ""
    )
    Select(console.wait("select[name=span]")).select_by_value("168")
    chart("Messages stored", "by hour, 168 hours")
    numbers = console.wait("details.numbers")
    numbers.find_element(By.TAG_NAME, "summary").click()
    assert console.wait("details.numbers[open] td")
    console.accessible("activity by hour")
    console.screenshot("activity")

    owner = {"owner": {"agentId": "main", "ownerId": "ada"}}
    console.open("/owner/main/ada")
    chart("Messages stored", f"Messages {total(owner, 'DAY', 'messages'):,}")
    conversation = {
        "conversation": {
            "agentId": "main",
            "ownerId": "ada",
            "channel": "telegram",
            "chatId": "c-1",
        }
    }
    console.open("/conversation/main/ada/telegram/c-1/")
    succeeded = total(conversation, "DAY", "reviewRuns") - total(
        conversation, "DAY", "reviewFailures"
    )
    chart("Review runs", f"Succeeded {succeeded:,}")
    console.loaded()
    console.accessible("conversation with activity")


def test_a_conversation_is_searched(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/conversation/main/ada/telegram/c-1/")
    console.loaded()
    console.wait("#search-query").send_keys("Lisbon")
    console.browser.find_element(
        By.CSS_SELECTOR, "#search-mode option[value=SEARCH_MODE_LEXICAL]"
    ).click()
    console.wait("form[role=search] button").click()
    hit = console.wait("#search-results tr", "I live in Lisbon").text
    assert "word" in hit
    # Every hit says how relevant it is, and what that is made of.
    relevance = console.wait("#search-results [data-relevance]")
    assert float(relevance.get_attribute("data-relevance") or "nan") >= 0.5
    assert "words held 1.00" in hit
    # A question about nothing held: nothing, and the answer says what was too weak.
    query = console.wait("#search-query")
    query.clear()
    query.send_keys("What is the capital of Mongolia?")
    console.browser.find_element(
        By.CSS_SELECTOR, "#search-mode option[value=SEARCH_MODE_HYBRID]"
    ).click()
    console.wait("form[role=search] button").click()
    console.wait("#search-results td", "None.")
    console.accessible("conversation searched")


def test_a_guest_token_sees_the_guest_context_only(console: Console) -> None:
    console.sign_in(GUEST)
    console.wait("h1", "Guest view")
    console.open("/agent/main")
    console.wait("h1", "Guest view")
    console.wait("form.inline button", "Show").click()
    console.wait("h2", "What a guest's prompt holds")
    assert "Lisbon" not in console.browser.find_element(By.ID, "main").text
    console.accessible("guest")
    cookie = console.browser.get_cookie("memoryd_console")
    assert cookie is not None
    csrf = console.browser.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "done(sessionStorage.getItem('memoryd-console-csrf'));"
    )
    status, answer = rpc(
        console.http,
        "ListOwners",
        {"agentId": "main"},
        cookie=f"memoryd_console={cookie['value']}",
        **{"x-memoryd-csrf": csrf},
    )
    assert (status, answer["code"]) == (403, "permission_denied")
    console.sign_out()


def test_an_adapter_token_sees_its_agents_but_not_the_server(console: Console) -> None:
    console.sign_in(ADAPTER)
    console.wait("table a", "main")
    console.open("/settings")
    console.wait("p", "shown to an admin token")
    console.sign_out()
    console.open("/")
    console.wait("#token")


def test_the_context_view_shows_what_the_model_will_see_and_follows_new_messages(
    console: Console,
) -> None:
    talk = md.Conversation(agent_id="main", owner_id="ada", channel="telegram", chat_id="ctx")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        md.SyncStubs(channel).conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=talk,
                messages=[
                    md.NewMessage(
                        role=md.ROLE_USER, sender="ada", content=f"note {n}: " + "word " * 40
                    )
                    for n in range(12)
                ],
            )
        )
    console.sign_in(ADMIN)
    console.open("/conversation/main/ada/telegram/ctx/")
    console.wait("a", "What the model will see").click()
    console.wait("h1", "What the model will see: telegram:ctx")
    console.loaded()
    # The whole window fits the provider's window: nothing is left out.
    assert "Nothing: every message" in console.wait("#context-omitted").text
    blocks = {
        row.get_attribute("data-kind"): row.text
        for row in console.browser.find_elements(By.CSS_SELECTOR, "#context-view tr[data-kind]")
    }
    parts = console.wait("ol.parts", "Memory (USER.md, MEMORY.md)")
    assert "Lisbon" in (parts.get_attribute("textContent") or "")
    assert blocks["CONTEXT_PART_KIND_MESSAGE"].startswith("Window messages 12 ")
    # A 400-token window holds fewer: the oldest are left out, and listed.
    field = console.wait("#context-window")
    field.clear()
    field.send_keys("400")
    console.wait("form.inline button", "Compose").click()
    omitted = console.wait("#context-omitted", "left out to stay within the limit")
    assert "automatic compaction" in omitted.text
    assert console.wait("#context-view table", "note 0:")
    assert console.browser.find_element(By.CSS_SELECTOR, ".context-bar svg[role=img]")
    swatch = console.browser.find_element(By.CSS_SELECTOR, "#context-view tr[data-kind] svg rect")
    assert swatch.rect["width"] > 0  # drawn: an SVG element, not an unknown HTML one
    console.accessible("context")
    console.screenshot("context")
    # A message stored elsewhere shows within one refresh.
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        md.SyncStubs(channel).conversations.AppendMessages(
            md.AppendMessagesRequest(
                conversation=talk,
                messages=[
                    md.NewMessage(role=md.ROLE_USER, sender="ada", content="sailing on Sunday")
                ],
            )
        )
    # The view is drawn again at each refresh: a list found just before may be gone (stale).
    WebDriverWait(console.browser, 15, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda browser: (
            "sailing on Sunday"
            in (
                browser.find_element(By.CSS_SELECTOR, "ol.parts").get_attribute("textContent") or ""
            )
        )
    )


GRACE = md.Conversation(agent_id="main", owner_id="grace", channel="discord", chat_id="g-1")


def test_an_owners_rows_are_filtered_searched_added_and_deleted(console: Console) -> None:
    owner = md.OwnerScope(agent_id="main", owner_id="grace")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        memory = md.SyncStubs(channel)
        memory.conversations.AppendMessages(
            md.AppendMessagesRequest(conversation=GRACE, messages=[md.user("grace", "hello")])
        )
        for key, value, category in (
            ("city", "Lives in Nairobi", md.CATEGORY_IDENTITY),
            ("tea", "Drinks rooibos tea in the evening", md.CATEGORY_PREFERENCE),
            ("kite", "Flies kites on the beach", md.CATEGORY_INTEREST),
        ):
            memory.memory.StoreMemory(
                md.StoreMemoryRequest(owner=owner, key=key, value=value, category=category)
            )
    console.sign_in(ADMIN)
    console.open("/owner/main/grace")
    console.loaded()
    console.wait("#rows tr", "Flies kites")
    # By category: only the preference.
    console.browser.find_element(By.CSS_SELECTOR, "#rows-category option[value=preference]").click()
    console.wait("form[aria-label='Filter the rows'] button").click()
    console.wait("#rows caption", "match")
    rows = console.browser.find_element(By.ID, "rows").text
    assert "rooibos" in rows
    assert "Nairobi" not in rows
    assert "kites" not in rows
    # By words, whatever the category.
    console.browser.find_element(By.CSS_SELECTOR, "#rows-category option[value='']").click()
    console.wait("#rows-words").send_keys("beach kites")
    console.wait("form[aria-label='Filter the rows'] button").click()
    console.wait("#rows caption", "best matches")
    assert "Flies kites" in console.browser.find_element(By.ID, "rows").text
    relevance = console.wait("#rows [data-relevance]").get_attribute("data-relevance")
    assert float(relevance or "nan") >= 0.5
    assert "rooibos" not in console.browser.find_element(By.ID, "rows").text
    console.accessible("owner rows found")
    # A fact added without a key gets one read off the fact.
    console.wait("details.add-fact summary").click()
    console.browser.find_element(By.CSS_SELECTOR, "#fact-category option[value=goal]").click()
    console.wait("#fact-value").send_keys("Wants to run a marathon")
    console.wait("details.add-fact button", "Add").click()
    stored = console.wait("details.add-fact .ok", "Stored as row #").text
    assert "(wants-to-run-a-marathon-" in stored
    console.accessible("fact added")
    # A row deleted behind a confirmation that names it; it is gone from the server.
    console.wait("#rows-words").clear()
    console.wait("form[aria-label='Filter the rows'] button").click()
    row = console.wait("#rows tr", "Lives in Nairobi")
    row.find_element(By.XPATH, ".//button[text()='Delete']").click()
    assert "Lives in Nairobi" in console.wait("dialog[open]").text
    console.confirm()
    console.wait("#status", "Deleted row #")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        listed = md.SyncStubs(channel).memory.ListMemories(
            md.ListMemoriesRequest(owner=owner, archived=md.ARCHIVED_FILTER_ALL)
        )
    values = {item.memory.value for item in listed.memories}
    assert "Lives in Nairobi" not in values
    assert "Wants to run a marathon" in values


def test_review_now_then_erase_a_conversation_and_an_owner(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/conversation/main/grace/discord/g-1/")
    console.loaded()
    console.model.reply(  # type: ignore[attr-defined]
        json.dumps(
            {
                "operations": [
                    {
                        "action": "add",
                        "target": "user",
                        "category": "interest",
                        "value": "Collects old maps",
                    }
                ]
            }
        )
    )
    console.wait("button", "Review now").click()
    outcome = console.wait("div[role=status] tr", "discord:g-1")
    assert "ok" in outcome.text
    assert "added 1" in outcome.text
    assert "run #" in outcome.text
    console.accessible("reviewed")
    # The conversation erased: the receipt counts what went.
    console.wait("button.danger", "Erase the conversation").click()
    assert "discord:g-1" in console.wait("dialog[open]").text
    console.confirm()
    console.wait("h1", "Conversation discord:g-1 erased")
    erased = console.wait("section.receipt", "Messages removed")
    assert "Messages removed\n1" in erased.text
    console.accessible("conversation erased")
    console.screenshot("erased")
    # The owner erased from its page: the receipt counts its rows.
    grace = md.OwnerScope(agent_id="main", owner_id="grace")
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        rows = md.SyncStubs(channel).memory.ListMemories(
            md.ListMemoriesRequest(owner=grace, archived=md.ARCHIVED_FILTER_ALL)
        )
    assert rows.memories
    console.open("/owner/main/grace")
    console.loaded()
    console.wait("button.danger", "Erase the owner").click()
    assert "grace" in console.wait("dialog[open]").text
    console.confirm()
    console.wait("h1", "Owner grace erased")
    receipt = console.wait("section.receipt", "memories removed")
    assert f"memories removed\n{len(rows.memories)}" in receipt.text
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        left = md.SyncStubs(channel).memory.ListMemories(
            md.ListMemoriesRequest(owner=grace, archived=md.ARCHIVED_FILTER_ALL)
        )
    assert list(left.memories) == []


# Last: these move the conversation's window.
def test_compact_now_and_a_new_session_from_the_conversation_page(console: Console) -> None:
    console.sign_in(ADMIN)
    console.open("/conversation/main/ada/telegram/c-1/")
    console.loaded()
    console.model.reply("Summary: Ada lives in Lisbon and takes her coffee black.")  # type: ignore[attr-defined]
    console.wait("button", "Compact now").click()
    console.confirm()
    console.wait("#status", "Compacted.")
    summary = console.wait("tr", "Summary: Ada lives in Lisbon")
    assert "messages #1 to #" in summary.text
    console.wait("p", "Summarises messages #1 to #")
    console.accessible("compacted conversation")
    console.wait("button.danger", "New session").click()
    console.confirm()
    console.wait("#status", "New session started.")
    console.loaded()
    with md.connect_sync(console.server.address, token=ADMIN) as channel:
        found = md.SyncStubs(channel).conversations.GetConversation(
            md.GetConversationRequest(conversation=CONVERSATION)
        )
    assert found.window_message_count == 0
    assert found.message_count >= 4  # the history is kept: the messages and the summary


# --- DNS rebinding ------------------------------------------------------------------------------

ATTACKER = "rebind.attacker.example"
ATTACK_PAGE = b"""<!doctype html><title>cute cats</title><p>cats</p>"""
STEAL = """
const done = arguments[arguments.length - 1];
fetch('/memoryd.v2.ConversationService/SearchHistory', {
  method: 'POST', headers: {'content-type': 'application/json'},
  body: JSON.stringify({owner: {ownerId: 'ada'}, query: 'vault code'}),
}).then(async (r) => done({status: r.status, text: await r.text()}))
  .catch((e) => done({status: 0, text: String(e)}));
"""


def test_a_page_that_rebinds_its_name_to_memoryd_reads_nothing(tmp_path: Path) -> None:
    """The attack as a browser lives it: a page served by attacker.example, whose name then
    resolves to 127.0.0.1 where memoryd listens (without tokens, its default), calls the API
    as its own origin. memoryd answers 421 to the page's Host; with the name allowed (the
    control), the same page reads the owner's messages."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("connection", "close")
            self.end_headers()
            self.wfile.write(ATTACK_PAGE)

        def log_message(self, *_args: object) -> None:
            pass

    attacker = http.server.HTTPServer(("127.0.0.1", 0), Page)
    port = attacker.server_address[1]
    serving = threading.Thread(target=attacker.serve_forever, daemon=True)
    serving.start()
    browser = chromium(tmp_path, f"--host-resolver-rules=MAP {ATTACKER} 127.0.0.1")
    try:
        browser.get(f"http://{ATTACKER}:{port}/")
        assert browser.title == "cute cats"
        attacker.shutdown()
        attacker.server_close()
        # The name now leads to memoryd, on the port the page came from.
        for allowed, expected in (("", 421), (ATTACKER, 200)):
            config = f'[memoryd.http]\nlisten = "127.0.0.1:{port}"\nallowed_hosts = "{allowed}"\n'
            server = ServerProcess(tmp_path / "home", config=config).start()
            try:
                with md.connect_sync(server.address) as channel:
                    md.SyncStubs(channel).conversations.AppendMessages(
                        md.AppendMessagesRequest(
                            conversation=md.Conversation(
                                owner_id="ada", channel="telegram", chat_id="v"
                            ),
                            messages=[
                                md.NewMessage(role=md.ROLE_USER, content="the vault code is 4711")
                            ],
                        )
                    )
                stolen = browser.execute_async_script(STEAL)
                assert stolen["status"] == expected, stolen
                assert ("4711" in stolen["text"]) is (expected == 200), stolen
                if expected == 421:
                    browser.get(f"http://{ATTACKER}:{port}/console/")
                    assert "not a name this server answers to" in browser.page_source
                    browser.get(f"http://{ATTACKER}:{port}/")  # back on the page's origin
            finally:
                assert server.stop() == 0, server.output
    finally:
        browser.quit()


def test_a_server_without_tokens_is_signed_in_with_an_empty_token(tmp_path: Path) -> None:
    config = '[memoryd.http]\nlisten = "127.0.0.1:0"\n'
    server = ServerProcess(tmp_path / "home", config=config).start()
    browser = chromium(tmp_path)
    try:
        console = Console(server, browser, tmp_path)
        console.open("/")
        console.wait("#token")
        console.browser.find_element(By.CSS_SELECTOR, "form.signin button").click()
        console.wait("#nav:not([hidden])")
        assert "no tokens configured" in console.browser.find_element(By.ID, "who").text
    finally:
        browser.quit()
        assert server.stop() == 0, server.output


def test_the_overview_follows_a_bulk_loads_embedding(tmp_path: Path) -> None:
    """While vectors are being made, the overview's embedding queue says what waits, in which
    queue, and the rate, and says so once every message has its vector."""
    with FakeEmbeddings() as endpoint:
        server = ServerProcess(
            tmp_path / "home", config=TOKENS + embedding_config(endpoint)
        ).start()
        try:
            endpoint.hold("loaded")
            with md.connect_sync(server.address, token=ADMIN) as channel:
                md.SyncStubs(channel).conversations.AppendMessages(
                    md.AppendMessagesRequest(
                        conversation=CONVERSATION,
                        messages=[
                            md.NewMessage(role=md.ROLE_USER, content=f"bulk loaded message {n}")
                            for n in range(3)
                        ],
                    )
                )
            browser = chromium(tmp_path)
            try:
                console = Console(server, browser, tmp_path)
                console.sign_in(ADMIN)
                console.open("/")
                # A second report has a rate; three messages of one call are a chat's: live.
                waiting = console.wait("[data-embedding-queue='3']", "/s")
                assert waiting.text.startswith("3 waiting (3 live, 0 in the backlog)")
                endpoint.recover()
                done = console.wait("[data-embedding-queue='0']", timeout=60)
                assert done.text == "0 waiting: every message and row has its vector"
            finally:
                browser.quit()
        finally:
            assert server.stop() == 0, server.output
