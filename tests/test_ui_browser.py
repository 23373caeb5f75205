"""The memory inspector in a real browser: Debian's headless Chromium driven by
Playwright for Python (`executable_path`, no browser download), against the app
served by uvicorn on a loopback port. A scripted LLM, the real embedder and SQLite.

The tests click through: log in, search, open a fact, see its source turn
highlighted, edit it and see the new version in its history, delete, retry; a
memory holding ``<script>`` renders as text; another tenant's key sees none of it.

With DELTAMEM_SCREENSHOTS=DIR set, the tests save a screenshot of each view there
(docs/inspector-*.png are made so: see docs/inspector.md). They are skipped, with
the reason, only if Playwright is not installed or the browser cannot be launched.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from ui_helpers import (
    FAST,
    KEY_A,
    KEY_B,
    KEYS,
    MOTTO,
    ROOIBOS,
    RUFUS_TWO,
    TEA,
    fact_id,
    seeded_memory,
)

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.server.app import create_app

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")

CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
SHOTS = os.environ.get("DELTAMEM_SCREENSHOTS")


def chromium_path() -> str | None:
    given = os.environ.get("DELTAMEM_CHROMIUM")
    if given:
        return given
    for path in CANDIDATES:
        if os.path.exists(path):
            return path
    return shutil.which("chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip(f"no Chromium found ({', '.join(CANDIDATES)}); apt-get install chromium")
    with sync_api.sync_playwright() as p:
        try:
            b = p.chromium.launch(executable_path=path, headless=True)
        except Exception as exc:  # the browser is there but cannot start here
            pytest.skip(f"Chromium at {path} cannot be launched: {str(exc).splitlines()[0]}")
        yield b
        b.close()


class Served:
    """An app on a free loopback port, in a thread."""

    def __init__(self, app: Any) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True
        )
        self.thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


@pytest.fixture
def site(tmp_path: Path, embedder: Embedder) -> Iterator[Callable[..., tuple[str, Memory]]]:
    running: list[tuple[Served, Memory]] = []

    def start(local: bool = False) -> tuple[str, Memory]:
        mem, manager = seeded_memory(tmp_path / str(len(running)), embedder)
        manager.flaky = False  # the model is back: a retry succeeds
        served = Served(create_app(mem, KEYS, worker_settings=FAST, ui_local=local))
        running.append((served, mem))
        return served.url, mem

    yield start
    for served, mem in running:
        served.stop()
        mem.close()


@pytest.fixture
def page_of(browser: Any) -> Iterator[Callable[[], Any]]:
    contexts: list[Any] = []

    def new_page() -> Any:
        ctx = browser.new_context(viewport={"width": 1200, "height": 800})
        contexts.append(ctx)
        page = ctx.new_page()
        page.set_default_timeout(15_000)
        return page

    yield new_page
    for ctx in contexts:
        ctx.close()


def shot(page: Any, name: str, full: bool = False, height: int | None = None) -> None:
    """A screenshot of the view into $DELTAMEM_SCREENSHOTS (whole page, or its top)."""
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        clip = {"x": 0, "y": 0, "width": 1200, "height": height} if height else None
        path = str(Path(SHOTS) / f"inspector-{name}.png")
        page.screenshot(path=path, full_page=full, clip=clip)


def log_in(page: Any, url: str, key: str, then: str = "/ui/users") -> None:
    page.goto(f"{url}{then}")
    assert "/ui/login" in page.url  # no key, no page
    page.fill("input[name=key]", key)
    shot(page, "login", height=420)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(re.escape(then) + "$"))


def test_search_open_a_fact_see_its_source_edit_it_see_the_new_version(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    log_in(page, url, KEY_A, "/ui/users/martin")
    expect = sync_api.expect
    expect(page.locator("table.facts tr.fact")).to_have_count(3)
    shot(page, "user", full=True)

    # search: the fused search, each hit labelled with its kind, rank and relevance
    page.fill("input[name=q]", "beagle Rufus")
    page.press("input[name=q]", "Enter")
    page.wait_for_url(re.compile(r"q=beagle"))
    hits = page.locator("table.hits tr.hit")
    expect(hits.first).to_be_visible()
    kinds = set(page.locator("table.hits .badge").all_inner_texts())
    assert kinds == {"fact", "episode"}
    ranks = [int(r) for r in page.locator("td.rank").all_inner_texts()]
    assert ranks == list(range(1, len(ranks) + 1))
    scores = [int(s) for s in page.locator("span.score").all_inner_texts()]  # 0-100
    assert scores == sorted(scores, reverse=True) and 0 < scores[0] <= 100
    shot(page, "search")

    # open the fact: its timeline, with the source turn highlighted in an excerpt
    page.locator("a.fact-link", has_text=RUFUS_TWO).click()
    page.wait_for_url(re.compile(r"/facts/"))
    expect(page.locator("h1.fact-text")).to_have_text(RUFUS_TWO)
    expect(page.locator("ol.timeline > li.version")).to_have_count(2)
    source = page.locator("li.op-add ol.transcript li.turn.hl")
    expect(source).to_contain_text("I adopted a beagle named Rufus last week.")
    fact_url = page.url

    # follow it to the session: the source turn is highlighted in the whole transcript
    page.locator("li.op-add a.source-link").click()
    page.wait_for_url(re.compile(r"/sessions/s1\?hl=0#turn-0$"))
    turn = page.locator("#turn-0")
    expect(turn).to_have_class(re.compile(r"\bhl\b"))
    expect(turn).to_be_in_viewport()
    expect(page.locator("#turn-2")).not_to_have_class(re.compile(r"\bhl\b"))
    reason = page.locator("table.refused td.reason")
    expect(reason).to_have_text("RESTATES_KNOWN add restates a known memory")  # rule, why
    expect(page.locator("table.calls tr.call")).to_have_count(1)
    page.locator("table.calls summary").click()  # the raw reply
    expect(page.locator("table.calls pre")).to_contain_text('"operations"')
    shot(page, "session", full=True)

    # edit it: a new version, by a person, shown in its history
    page.goto(fact_url)
    page.locator("details#edit summary").click()
    page.fill("textarea[name=content]", "Martin's beagle Rufus turned two in March.")
    page.click("#edit-form button[type=submit]")
    page.wait_for_url(re.compile(r"done=edited"))
    expect(page.locator("p.flash")).to_contain_text("edited by a person")
    expect(page.locator("h1.fact-text")).to_have_text("Martin's beagle Rufus turned two in March.")
    versions = page.locator("ol.timeline > li.version")
    expect(versions).to_have_count(3)
    last = versions.nth(2)
    expect(last).to_have_class(re.compile("actor-person"))
    expect(last.locator(".actor")).to_have_text("edited by a person")
    expect(last.locator(".was")).to_contain_text(RUFUS_TWO)
    shot(page, "fact", full=True)
    [*_, edit] = mem.history(fact_id(mem, "a:martin", "Martin's beagle Rufus turned two in March."))
    assert (edit.op, edit.actor, edit.old_content) == ("update", "person", RUFUS_TWO)


def test_delete_after_confirming_and_retry_a_parked_session(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    log_in(page, url, KEY_A, "/ui/users/martin")
    page.locator("a.fact-link", has_text=TEA).click()
    page.locator("details#edit summary").click()
    page.once("dialog", lambda dialog: dialog.dismiss())  # changed their mind
    page.click("button.danger")
    assert mem.get_all(user_id="a:martin", filters={"memory_type": "persona"})
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("button.danger")
    page.wait_for_url(re.compile(r"done=deleted"))
    assert TEA not in [m.content for m in mem.get_all(user_id="a:martin")]
    # the deleted fact stays reachable from the user page, with its history
    expect = sync_api.expect
    deleted = page.locator("#deleted a.history-link", has_text=TEA)
    expect(deleted).to_be_visible()
    deleted.click()
    page.wait_for_url(re.compile(r"/facts/"))
    expect(page.locator("ol.timeline > li.version")).to_have_count(2)
    expect(page.locator("li.op-delete .actor")).to_have_text("edited by a person")

    page.goto(f"{url}/ui/users/martin/sessions/s3")
    sync_api.expect(page.locator("h1 .badge")).to_have_text("parked")
    page.click("#retry-form button")
    page.wait_for_url(re.compile(r"done=retried"))
    deadline = time.monotonic() + 15
    while page.locator("h1 .badge").inner_text() != "applied":
        assert time.monotonic() < deadline, "the retried session was not processed"
        time.sleep(0.2)
        page.reload()


def test_a_memory_holding_a_script_renders_as_text(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    log_in(page, url, KEY_A, "/ui/users/martin")
    mid = fact_id(mem, "a:martin", MOTTO)
    for path in (
        "/ui/users/martin",
        f"/ui/users/martin/facts/{mid}",
        "/ui/users/martin/sessions/s1",
    ):
        page.goto(url + path)
        assert page.get_by_text("<script>window.pwned=1</script>", exact=False).count() >= 1
        assert page.evaluate("() => window.pwned") is None
        assert page.locator("script").count() == 1  # only the inspector's own
    assert errors == []


def test_another_tenants_key_sees_none_of_it(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    log_in(page, url, KEY_B)
    users = page.locator("ul.users li").all_inner_texts()
    assert users == ["bea"]
    mid = fact_id(mem, "a:martin", TEA)
    for path in (
        "/ui/users/martin",
        f"/ui/users/martin/facts/{mid}",
        "/ui/users/martin/sessions/s1",
    ):
        response = page.goto(url + path)
        assert response is not None and response.status == 404, path
        assert "tea" not in page.content().lower()
    # tenant b's own edit form, pointed at tenant a's fact: 404, nothing changed
    bea = mem.get_all(user_id="b:bea")[0].id
    page.goto(f"{url}/ui/users/bea/facts/{bea}")
    page.locator("details#edit summary").click()
    page.evaluate(
        "([action]) => document.getElementById('edit-form').setAttribute('action', action)",
        [f"/ui/users/martin/facts/{mid}/edit"],
    )
    page.fill("textarea[name=content]", ROOIBOS)
    with page.expect_navigation() as nav:
        page.click("#edit-form button[type=submit]")
    assert nav.value is not None and nav.value.status == 404
    assert mem.get(mid) is not None and mem.get(mid).content == TEA  # type: ignore[union-attr]
    assert [h.actor for h in mem.history(mid)] == ["manager"]


def test_deltamem_ui_opens_without_a_key_on_loopback(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, _ = site(local=True)
    page = page_of()
    page.goto(f"{url}/ui/users")
    assert page.url.endswith("/ui/users")  # no login form
    assert page.locator("ul.users li").all_inner_texts() == ["a:martin", "b:bea"]
    shot(page, "users", height=200)


def test_a_very_short_or_unchanged_edit_asks_first(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    log_in(page, url, KEY_A, "/ui/users/martin")
    mid = fact_id(mem, "a:martin", TEA)
    page.goto(f"{url}/ui/users/martin/facts/{mid}")
    page.locator("details#edit summary").click()
    asked: list[str] = []

    def answer(accept: bool) -> Callable[[Any], None]:
        def on(dialog: Any) -> None:
            asked.append(dialog.message)
            dialog.accept() if accept else dialog.dismiss()

        return on

    # unchanged: asked, and saying no sends nothing
    page.once("dialog", answer(False))
    page.click("#edit-form button[type=submit]")
    assert asked and "unchanged" in asked[-1]
    # "x": asked; no keeps the fact, yes saves it as a new version
    page.fill("textarea[name=content]", "x")
    page.once("dialog", answer(False))
    page.click("#edit-form button[type=submit]")
    assert "very short" in asked[-1]
    assert mem.get(mid).content == TEA and len(mem.history(mid)) == 1  # type: ignore[union-attr]
    page.once("dialog", answer(True))
    page.click("#edit-form button[type=submit]")
    page.wait_for_url(re.compile(r"done=edited"))
    assert mem.get(mid).content == "x"  # type: ignore[union-attr]
    assert len(asked) == 3  # the server did not ask again


def test_cancel_a_pending_session_after_confirming(
    site: Callable[..., tuple[str, Memory]], page_of: Callable[[], Any]
) -> None:
    url, mem = site()
    page = page_of()
    log_in(page, url, KEY_A, "/ui/users/martin/sessions/s4")
    sync_api.expect(page.locator("h1 .badge")).to_have_text("deferred")
    page.once("dialog", lambda dialog: dialog.dismiss())
    page.click("#cancel-form button")
    assert mem.session("s4", user_id="a:martin") is not None
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-form button")
    page.wait_for_url(re.compile(r"/ui/users/martin\?done=cancelled$"))
    sync_api.expect(page.locator("p.flash")).to_contain_text("Cancelled")
    assert mem.session("s4", user_id="a:martin") is None
    assert "s4" not in page.locator("table.sessions").inner_text()
