"""The memory inspector over HTTP (the browser tests are in test_ui_browser.py): what
each page shows, who may see it, and that another tenant can neither see nor change
anything. A scripted LLM, the real embedder and SQLite."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient
from ui_helpers import (
    BEAGLE,
    FAST,
    KEY_A,
    KEY_B,
    KEYS,
    MOTTO,
    ROOIBOS,
    RUFUS_TWO,
    TEA,
    Manager,
    fact_id,
    seeded_memory,
)

from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.server.app import create_app
from deltamem.server.ui_auth import COOKIE

HA = {"Authorization": f"Bearer {KEY_A}"}
HB = {"Authorization": f"Bearer {KEY_B}"}
Made = tuple[TestClient, Memory, Manager]


@pytest.fixture
def make(tmp_path: Path, embedder: Embedder) -> Iterator[Callable[..., Made]]:
    opened: list[tuple[TestClient, Memory]] = []

    def build(
        local: bool = False,
        client: tuple[str, int] = ("testclient", 50000),
        start_worker: bool = True,
    ) -> Made:
        mem, manager = seeded_memory(tmp_path / str(len(opened)), embedder)
        app = create_app(mem, KEYS, worker_settings=FAST, ui_local=local, start_worker=start_worker)
        base = "http://127.0.0.1:8765" if client[0] == "127.0.0.1" else "http://testserver"
        tc = TestClient(app, base_url=base, client=client, follow_redirects=False)
        tc.__enter__()
        opened.append((tc, mem))
        return tc, mem, manager

    yield build
    for tc, mem in opened:
        tc.__exit__(None, None, None)
        mem.close()


@pytest.fixture
def ui(make: Callable[..., Made]) -> Made:
    return make()


def text_of(html: str) -> str:
    """The visible text of a page, roughly (tags out, entities back)."""
    import html as html_lib

    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([^"]*)"', html)
    assert m is not None, "no CSRF field on the page"
    return m.group(1)


def login(client: TestClient, key: str) -> str:
    """Log in through the form; the CSRF token of the user page after it."""
    r = client.post("/ui/login", data={"key": key, "next": "/ui/users"})
    assert r.status_code == 303, r.text
    page = client.get("/ui/users")
    assert page.status_code == 200
    return csrf_of(page.text)


# --- what the pages show ------------------------------------------------------------------
def test_user_page_lists_live_facts_newest_event_first_and_sessions(ui: Made) -> None:
    client, _, _ = ui
    page = client.get("/ui/users/martin", headers=HA)
    assert page.status_code == 200
    text = text_of(page.text)
    # s2 (March) updated the beagle fact: newest event first
    assert text.index(RUFUS_TWO) < text.index(TEA)
    assert BEAGLE not in text  # the old version is history, not a live fact
    assert "3 live" in text
    statuses = re.findall(r'class="badge status-(\w+)"', page.text)
    # the API's words (applied, not "done"), newest session first
    assert statuses == ["deferred", "parked", "applied", "applied"]


def test_search_is_the_fused_search_with_kinds_ranks_and_relevance(ui: Made) -> None:
    from deltamem.server.ui_views import relevance

    client, mem, _ = ui
    page = client.get("/ui/users/martin", params={"q": "green tea"}, headers=HA)
    assert page.status_code == 200
    rows = re.findall(
        r'<tr class="hit kind-(\w+)">\s*<td class="num rank">(\d+)</td>.*?'
        r'class="num score">(\d+)</span>',
        page.text,
        re.S,
    )
    kinds = {k for k, _, _ in rows}
    assert kinds == {"fact", "episode"}
    api = mem.search("green tea", user_id="a:martin", limit=50)
    assert [k for k, _, _ in rows] == [h.kind for h in api]  # the same ranking as the API
    assert [int(r) for _, r, _ in rows] == list(range(1, len(api) + 1))
    # a relevance of 0-100 a person reads, not the raw fused score (0.0328)
    shown = [int(v) for _, _, v in rows]
    assert shown == [relevance(h.score) for h in api] and shown[0] > 0
    assert all(0 <= v <= 100 for v in shown) and shown == sorted(shown, reverse=True)
    assert not re.search(r"\b0\.0\d{2,}", text_of(page.text))
    # filters narrow the list and the search alike
    only = client.get("/ui/users/martin", params={"type": "event"}, headers=HA)
    assert RUFUS_TWO in text_of(only.text) and TEA not in text_of(only.text)
    bad = client.get("/ui/users/martin", params={"since": "not a date"}, headers=HA)
    assert bad.status_code == 422 and "Filter not understood" in bad.text


def test_fact_page_shows_the_timeline_with_source_turns(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", RUFUS_TWO)
    page = client.get(f"/ui/users/martin/facts/{mid}", headers=HA)
    assert page.status_code == 200
    versions = re.findall(r'<li class="version op-(\w+) actor-(\w+)">', page.text)
    assert versions == [("add", "manager"), ("update", "manager")]
    text = text_of(page.text)
    assert "session s1, turn 0" in text and "session s2" in text
    assert f"was: {BEAGLE}" in text
    # the source turn is in the excerpt, highlighted
    hl = re.findall(r'<li class="turn role-user hl"[^>]*>.*?turn-text">([^<]*)<', page.text, re.S)
    assert "I adopted a beagle named Rufus last week." in hl
    link = re.search(r'class="source-link" href="([^"]+)"', page.text)
    assert link is not None and link.group(1) == "/ui/users/martin/sessions/s1?hl=0#turn-0"


def test_session_page_shows_operations_refusals_calls_and_highlights(ui: Made) -> None:
    client, _, _ = ui
    page = client.get("/ui/users/martin/sessions/s1", params={"hl": "0"}, headers=HA)
    assert page.status_code == 200
    text = text_of(page.text)
    assert text.count("add restates a known memory") == 1  # refused, with its reason
    # ... and the rule that refused it, counted by code (docs/rules.md)
    assert "RESTATES_KNOWN add restates a known memory" in text
    assert "By rule: RESTATES_KNOWN 1" in text
    assert "Operations applied 3" in text
    assert re.search(r'<li class="turn role-user hl" id="turn-0"', page.text)
    assert not re.search(r'class="turn role-user hl" id="turn-2"', page.text)
    # its LLM call: purpose, tokens, KV-cache hits, seconds, the raw reply
    calls = re.findall(
        r'<tr class="call">\s*<td class="num">1</td>.*?<td>manager</td>', page.text, re.S
    )
    assert calls and "raw reply" in text and "&#34;operations&#34;" in page.text
    failed = client.get("/ui/users/martin/sessions/s3", headers=HA)
    ftext = text_of(failed.text)
    assert "parked" in ftext and "the model server is down" in ftext
    assert 'id="retry-form"' in failed.text
    assert "Retry" in ftext and 'class="call failed"' in failed.text
    deferred = client.get("/ui/users/martin/sessions/s4", headers=HA)
    assert "Process now" in deferred.text and "not processed yet" in deferred.text


def test_users_page_lists_only_the_tenants_users(ui: Made) -> None:
    client, _, _ = ui
    assert "martin" in client.get("/ui/users", headers=HA).text
    assert "bea" not in text_of(client.get("/ui/users", headers=HA).text)
    assert "martin" not in text_of(client.get("/ui/users", headers=HB).text)


# --- changes ------------------------------------------------------------------------------
def test_edit_records_a_new_version_by_a_person(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", TEA)
    r = client.post(f"/ui/users/martin/facts/{mid}/edit", data={"content": ROOIBOS}, headers=HA)
    assert r.status_code == 303 and r.headers["location"].endswith("?done=edited")
    item = mem.get(mid)
    assert item is not None and item.content == ROOIBOS and item.version == 2
    hist = mem.history(mid)
    assert [(h.op, h.actor, h.old_content) for h in hist] == [
        ("add", "manager", None),
        ("update", "person", TEA),
    ]
    page = client.get(r.headers["location"], headers=HA)
    assert "edited by a person" in page.text and "Saved" in page.text
    # a bad text is refused and changes nothing
    r = client.post(f"/ui/users/martin/facts/{mid}/edit", data={"content": "  "}, headers=HA)
    assert r.status_code == 422 and "empty" in r.text
    assert len(mem.history(mid)) == 2


def test_delete_keeps_the_fact_in_history(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", TEA)
    r = client.post(f"/ui/users/martin/facts/{mid}/delete", headers=HA)
    assert r.status_code == 303 and mem.get(mid) is None
    assert [(h.op, h.actor) for h in mem.history(mid)][-1] == ("delete", "person")
    page = client.get(f"/ui/users/martin/facts/{mid}", headers=HA)
    assert page.status_code == 200 and "Deleted fact" in page.text


def test_retry_of_a_parked_session(ui: Made) -> None:
    client, mem, manager = ui
    manager.flaky = False  # the model is back
    r = client.post("/ui/users/martin/sessions/s3/retry", headers=HA)
    assert r.status_code == 303
    assert client.app.state.worker.wait_idle(10)  # type: ignore[attr-defined]
    rec = mem.session("s3", user_id="a:martin")
    assert rec is not None and rec.status == "applied"
    page = client.get("/ui/users/martin/sessions/s3", headers=HA)
    assert "Martin plays chess." in page.text and "status-applied" in page.text


def test_a_deleted_fact_is_listed_on_the_user_page_with_its_history(ui: Made) -> None:
    client, mem, _ = ui
    assert 'id="deleted"' not in client.get("/ui/users/martin", headers=HA).text
    mid = fact_id(mem, "a:martin", TEA)
    assert client.post(f"/ui/users/martin/facts/{mid}/delete", headers=HA).status_code == 303
    page = client.get("/ui/users/martin", headers=HA)
    section = page.text.split('id="deleted"', 1)[1].split("</section>", 1)[0]
    link = re.search(r'class="history-link" href="([^"]+)"><del>([^<]*)</del>', section)
    assert link is not None and link.groups() == (f"/ui/users/martin/facts/{mid}", TEA)
    assert "edited by a person" in text_of(section)  # who deleted it
    history = client.get(link.group(1), headers=HA)
    assert history.status_code == 200 and "Deleted fact" in history.text
    assert re.findall(r'<li class="version op-(\w+)', history.text) == ["add", "delete"]


def test_a_very_short_hand_edit_is_saved_only_once_confirmed(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", TEA)
    url = f"/ui/users/martin/facts/{mid}/edit"
    asked = client.post(url, data={"content": "x"}, headers=HA)
    assert asked.status_code == 200 and 'id="confirm-edit"' in asked.text
    assert "very short for a fact" in text_of(asked.text)
    assert mem.get(mid).content == TEA and len(mem.history(mid)) == 1  # type: ignore[union-attr]
    # the page's form says yes
    form = asked.text.split('id="confirm-edit"', 1)[1].split("</form>", 1)[0]
    fields = dict(re.findall(r'name="(\w+)" value="([^"]*)"', form))
    assert fields["content"] == "x" and fields["confirmed"] == "1"
    r = client.post(url, data=fields, headers=HA)
    assert r.status_code == 303 and r.headers["location"].endswith("?done=edited")
    assert mem.get(mid).content == "x"  # type: ignore[union-attr]
    # an ordinary edit is not asked about
    r = client.post(url, data={"content": ROOIBOS}, headers=HA)
    assert r.status_code == 303 and mem.get(mid).content == ROOIBOS  # type: ignore[union-attr]


def test_cancel_a_pending_session(ui: Made) -> None:
    client, mem, _ = ui
    page = client.get("/ui/users/martin/sessions/s4", headers=HA)  # deferred: not applied
    assert 'id="cancel-form"' in page.text and "Cancel" in text_of(page.text)
    applied = client.get("/ui/users/martin/sessions/s1", headers=HA)
    assert 'id="cancel-form"' not in applied.text
    r = client.post("/ui/users/martin/sessions/s4/cancel", headers=HA)
    assert r.status_code == 303 and r.headers["location"] == "/ui/users/martin?done=cancelled"
    assert mem.session("s4", user_id="a:martin") is None
    assert "Cancelled" in client.get(r.headers["location"], headers=HA).text
    assert client.get("/ui/users/martin/sessions/s4", headers=HA).status_code == 404
    # an applied session is not cancelled
    r = client.post("/ui/users/martin/sessions/s1/cancel", headers=HA)
    assert r.status_code == 409 and mem.session("s1", user_id="a:martin") is not None


def test_without_a_worker_the_inspector_says_nothing_processes_the_session(
    make: Callable[..., Made],
) -> None:
    """`deltamem ui --no-worker`: "Process now" would be a promise nobody keeps."""
    client, mem, _ = make(start_worker=False)
    page = client.get("/ui/users/martin/sessions/s4", headers=HA)
    text = text_of(page.text)
    assert "Process now" not in text and "Queue for a worker" in text
    assert "No worker runs beside this inspector" in text
    r = client.post("/ui/users/martin/sessions/s4/retry", headers=HA)
    assert r.status_code == 303 and r.headers["location"].endswith("done=queued")
    after = text_of(client.get(r.headers["location"], headers=HA).text)
    assert "no worker runs beside this inspector" in after and "will process" not in after
    rec = mem.session("s4", user_id="a:martin")
    assert rec is not None and rec.status == "pending"  # queued, for a worker to come


# --- access -------------------------------------------------------------------------------
def test_no_page_without_a_key(ui: Made) -> None:
    client, _, _ = ui
    r = client.get("/ui/users/martin?q=tea")
    assert r.status_code == 303
    assert r.headers["location"] == "/ui/login?next=%2Fui%2Fusers%2Fmartin%3Fq%3Dtea"
    assert client.get("/ui/users", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert client.post("/ui/users/martin/sessions/s3/retry").status_code == 401
    assert client.get("/ui/login").status_code == 200
    assert client.get("/ui/static/inspector.css").status_code == 200  # no data in it


def test_login_sets_a_strict_httponly_session_cookie(ui: Made) -> None:
    client, _, _ = ui
    bad = client.post("/ui/login", data={"key": "wrong", "next": "/ui/users"})
    assert bad.status_code == 401 and "not valid" in bad.text
    r = client.post("/ui/login", data={"key": KEY_A, "next": "/ui/users/martin"})
    assert r.status_code == 303 and r.headers["location"] == "/ui/users/martin"
    cookie = r.headers["set-cookie"]
    assert cookie.startswith(f"{COOKIE}=") and KEY_A not in cookie
    low = cookie.lower()
    assert "httponly" in low and "samesite=strict" in low and "path=/ui" in low
    token = client.cookies.get(COOKIE)
    page = client.get("/ui/users/martin")
    assert page.status_code == 200 and "Log out" in page.text
    out = client.post("/ui/logout", data={"csrf": csrf_of(page.text)})
    assert out.status_code == 303
    client.cookies.set(COOKIE, token or "", path="/ui")  # the old cookie replayed
    assert client.get("/ui/users").status_code == 303  # logged out on the server


@pytest.mark.parametrize("target", ["//evil.example/x", "https://evil.example/", "/v1/memories"])
def test_login_never_redirects_out_of_the_inspector(ui: Made, target: str) -> None:
    client, _, _ = ui
    r = client.post("/ui/login", data={"key": KEY_A, "next": target})
    assert r.headers["location"] == "/ui/users"


def _routes(mem: Memory) -> dict[str, tuple[str, dict[str, str]]]:
    mid = fact_id(mem, "a:martin", TEA)
    return {
        "edit": (f"/ui/users/martin/facts/{mid}/edit", {"content": "Hijacked."}),
        "delete": (f"/ui/users/martin/facts/{mid}/delete", {}),
        "retry": ("/ui/users/martin/sessions/s3/retry", {}),
        "cancel": ("/ui/users/martin/sessions/s4/cancel", {}),
    }


def _state(mem: Memory) -> Any:
    facts = [(m.id, m.content, m.version) for m in mem.get_all(user_id="a:martin")]
    sessions = [(s.session_id, s.status, s.attempts) for s in mem.sessions("a:martin")]
    return facts, sessions


@pytest.mark.parametrize("route", ["edit", "delete", "retry", "cancel"])
@pytest.mark.parametrize("how", ["bearer", "cookie"])
def test_another_tenant_gets_404_and_changes_nothing(ui: Made, route: str, how: str) -> None:
    client, mem, manager = ui
    manager.flaky = False
    url, data = _routes(mem)[route]
    before = _state(mem)
    if how == "bearer":
        r = client.post(url, data=data, headers=HB)
    else:
        r = client.post(url, data={**data, "csrf": login(client, KEY_B)})
    assert r.status_code == 404, r.text
    assert client.app.state.worker.wait_idle(10)  # type: ignore[attr-defined]
    assert _state(mem) == before
    # and the same request with the owner's key works (the route is right)
    assert client.post(url, data=data, headers=HA).status_code == 303


def test_another_tenant_sees_nothing(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", TEA)
    for url in (
        "/ui/users/martin",
        "/ui/users/martin?q=tea",
        f"/ui/users/martin/facts/{mid}",
        "/ui/users/martin/sessions/s1",
        "/ui/users/a:martin",
    ):
        r = client.get(url, headers=HB)
        assert r.status_code == 404, url
        assert "tea" not in r.text.lower() and "Rufus" not in r.text
    # tenant b's own fact under tenant a's user path is not reachable either
    bea = mem.get_all(user_id="b:bea")[0].id
    assert client.get(f"/ui/users/martin/facts/{bea}", headers=HA).status_code == 404


def _posts(client: TestClient, mem: Memory, **kw: Any) -> httpx.Response:
    url, data = _routes(mem)["edit"]
    return client.post(url, data={"content": ROOIBOS, **data, **kw.pop("form", {})}, **kw)


def test_cross_site_posts_are_refused(ui: Made) -> None:
    """CSRF: a cookie-authenticated post needs the page's token, and a post the
    browser marks as coming from another site is refused even with it."""
    client, mem, _ = ui
    token = login(client, KEY_A)
    url, _ = _routes(mem)["edit"]
    mid = url.split("/")[5]
    assert client.post(url, data={"content": ROOIBOS}).status_code == 403
    assert client.post(url, data={"content": ROOIBOS, "csrf": "forged"}).status_code == 403
    evil = {"Origin": "https://evil.example"}
    r = client.post(url, data={"content": ROOIBOS, "csrf": token}, headers=evil)
    assert r.status_code == 403
    r = client.post(
        url, data={"content": ROOIBOS, "csrf": token}, headers={"Sec-Fetch-Site": "cross-site"}
    )
    assert r.status_code == 403
    assert mem.get(mid).content == TEA  # type: ignore[union-attr]
    same = {"Origin": "http://testserver"}
    assert (
        client.post(url, data={"content": ROOIBOS, "csrf": token}, headers=same).status_code == 303
    )
    assert mem.get(mid).content == ROOIBOS  # type: ignore[union-attr]


def test_stored_markup_is_escaped_and_pages_forbid_inline_script(ui: Made) -> None:
    client, mem, _ = ui
    mid = fact_id(mem, "a:martin", MOTTO)
    for url in (
        "/ui/users/martin",
        "/ui/users/martin?q=motto",
        f"/ui/users/martin/facts/{mid}",
        "/ui/users/martin/sessions/s1",
    ):
        r = client.get(url, headers=HA)
        assert "<script>window" not in r.text, url
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in r.text, url
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store"


# --- deltamem ui: loopback without a key ----------------------------------------------------
def test_local_inspector_lets_loopback_in_without_a_key(make: Callable[..., Made]) -> None:
    client, mem, _ = make(local=True, client=("127.0.0.1", 50000))
    page = client.get("/ui/users")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "a:martin" in text and "b:bea" in text and "local store" in text  # stored ids
    assert client.get("/ui/users/a%3Amartin").status_code == 200
    long_id = "t:" + "x" * 300  # a library user id may be longer than a service's
    mem.add([{"role": "user", "content": "Hi."}], user_id=long_id, session_id="s", infer=False)
    assert client.get(f"/ui/users/{long_id}").status_code == 200
    # a page that rebinds its own domain to 127.0.0.1 is not loopback
    rebound = client.get("/ui/users", headers={"Host": "evil.example:8765"})
    assert rebound.status_code == 303
    # state changes still need the page's token (another site's form cannot post here)
    mid = fact_id(mem, "a:martin", TEA)
    url = f"/ui/users/a%3Amartin/facts/{mid}/edit"
    assert client.post(url, data={"content": ROOIBOS}).status_code == 403
    token = csrf_of(client.get(f"/ui/users/a%3Amartin/facts/{mid}").text)
    r = client.post(url, data={"content": ROOIBOS, "csrf": token})
    assert r.status_code == 303 and mem.get(mid).content == ROOIBOS  # type: ignore[union-attr]


def test_local_inspector_refuses_other_clients(make: Callable[..., Made]) -> None:
    client, _, _ = make(local=True, client=("192.0.2.7", 50000))
    assert client.get("/ui/users").status_code == 303  # the login form
    assert client.get("/ui/users", headers=HA).status_code == 200  # a key still works


def test_serve_inspector_has_no_loopback_bypass(make: Callable[..., Made]) -> None:
    client, _, _ = make(local=False, client=("127.0.0.1", 50000))
    assert client.get("/ui/users").status_code == 303


def test_deltamem_ui_listens_on_loopback_only(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`deltamem ui` builds the local inspector and binds 127.0.0.1 (server not run)."""
    import uvicorn
    from typer.testing import CliRunner

    from deltamem.cli.main import app as cli

    seen: dict[str, Any] = {}
    monkeypatch.setattr(uvicorn, "run", lambda app, **kw: seen.update(app=app, **kw))
    monkeypatch.delenv("DELTAMEM_API_KEYS", raising=False)
    monkeypatch.delenv("DELTAMEM_API_KEYS_FILE", raising=False)
    db = tmp_path / "local.db"
    result = CliRunner().invoke(
        cli, ["--db", str(db), "ui", "--port", "8799", "--no-browser", "--no-worker"]
    )
    assert result.exit_code == 0, result.output
    assert seen["host"] == "127.0.0.1" and seen["port"] == 8799
    assert seen["app"].state.ui_auth.local is True
    assert seen["app"].state.ui_auth.keys == {}  # no key configured: the REST API stays shut


@pytest.mark.parametrize(
    ("host", "name"),
    [
        ("127.0.0.1:8765", "127.0.0.1"),
        ("localhost", "localhost"),
        ("[::1]:8765", "::1"),
        ("LOCALHOST:1", "localhost"),
        ("127.0.0.1.evil.example:8765", "127.0.0.1.evil.example"),
    ],
)
def test_host_names_of_the_loopback_check(host: str, name: str) -> None:
    from deltamem.server.ui_auth import _host_name

    assert _host_name(host) == name
