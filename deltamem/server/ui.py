"""The memory inspector: server-rendered pages at ``/ui`` over one `Memory`.

    /ui/users                              the users the viewer may see
    /ui/users/{user}                       live facts (newest event first), filters, the
                                           fused search (facts and episodes), sessions
    /ui/users/{user}/facts/{id}            a fact's timeline with its source turns;
                                           edit and delete (by a person)
    /ui/users/{user}/sessions/{id}         transcript, status, operations (applied,
                                           refused with reasons), LLM calls; retry,
                                           cancel (a session not applied yet)

Authentication, tenant scoping and cross-site protection are in `ui_auth`; another
tenant's ids answer 404, exactly as unknown ones. The routes are thin: what a page
shows comes from `Memory` and `ui_views`; templates (Jinja2, autoescaped) are in
``templates/``, the stylesheet and the little script in ``static/``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any
from urllib.parse import parse_qsl, urlencode

from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from jinja2 import Environment, PackageLoader
from pydantic import ValidationError

from deltamem.memory import Memory
from deltamem.provenance import PERSON, InvalidEdit
from deltamem.server import ui_views as views
from deltamem.server.scope import ScopeError, check_id
from deltamem.server.ui_auth import (
    COOKIE,
    SESSION_SECONDS,
    UiAuth,
    Viewer,
    cross_site,
    csrf_ok,
    header_key,
)
from deltamem.server.worker import Worker
from deltamem.store.users import users_of
from deltamem.types import MemoryItem, SearchFilters, SessionRecord

SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; "
    "img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
FLASH = {
    "edited": "Saved: the new text is a new version, edited by a person.",
    "deleted": "Deleted: the deletion is kept in the fact's history.",
    "retried": "Queued again: the worker will process the session.",
    # `deltamem ui --no-worker`: nothing here processes it
    "queued": "Queued, but no worker runs beside this inspector (it was started with "
    "--no-worker): the session is processed when a worker runs on this store "
    "(`deltamem worker`, or `deltamem ui` without --no-worker).",
    "unchanged": "The text is the same: nothing was recorded.",
    "cancelled": "Cancelled: the session was withdrawn from the log, with its turns; "
    "no memory comes of it.",
}
TYPES = ("persona", "event", "relationship")
MAX_HITS = 50
MAX_FACTS = 500
# a hand edit shorter than this (in characters) is saved only once confirmed
SHORT_EDIT = 8


class UiError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoginNeeded(Exception):
    def __init__(self, back_to: str) -> None:
        super().__init__(back_to)
        self.back_to = back_to


def _safe_next(value: str | None) -> str:
    """A place inside the inspector to go back to after login (no open redirect)."""
    if value and value.startswith("/ui/") and "\\" not in value and not value.startswith("//"):
        return value
    return "/ui/users"


def viewer_of(request: Request) -> Viewer:
    """The request's viewer; unauthenticated: the login form (a page) or 401."""
    viewer = request.app.state.ui_auth.viewer(request)
    if viewer is not None:
        return viewer
    if request.method == "GET" and header_key(request) is None:
        back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
        raise LoginNeeded(back)
    raise UiError(401, "An API key is required: log in, or send 'Authorization: Bearer KEY'.")


async def form_of(request: Request) -> dict[str, str]:
    """A url-encoded form (the only kind the inspector's pages send)."""
    body = await request.body()
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if body and media != "application/x-www-form-urlencoded":
        raise UiError(415, "Send the form as application/x-www-form-urlencoded.")
    try:
        return dict(parse_qsl(body.decode("utf-8"), keep_blank_values=True, max_num_fields=20))
    except (UnicodeDecodeError, ValueError) as exc:
        raise UiError(400, "The form could not be read.") from exc


Auth = Annotated[Viewer, Depends(viewer_of)]
Form = Annotated[dict[str, str], Depends(form_of)]


def mount_ui(
    app: FastAPI, memory: Memory, worker: Worker, keys: Mapping[str, str], *, local: bool = False
) -> None:
    """Serve the inspector at /ui on `app`. `local`: loopback clients need no key
    (`deltamem ui`), and see every user of the store."""
    auth = UiAuth(keys, local=local)
    app.state.ui_auth = auth
    env = Environment(
        loader=PackageLoader("deltamem.server", "templates"), autoescape=True, trim_blocks=True
    )
    env.filters.update(seg=views.seg, when=views.when, relevance=views.relevance)
    env.globals.update(
        user_url=views.user_url, fact_url=views.fact_url, session_url=views.session_url
    )
    app.mount("/ui/static", StaticFiles(packages=[("deltamem.server", "static")]), name="ui-static")
    router = APIRouter(prefix="/ui", include_in_schema=False)

    def page(name: str, viewer: Viewer | None, code: int = 200, **ctx: Any) -> HTMLResponse:
        html = env.get_template(name).render(viewer=viewer, **ctx)
        return HTMLResponse(html, status_code=code, headers=SECURITY_HEADERS)

    def redirect(url: str) -> RedirectResponse:
        return RedirectResponse(url, status_code=303, headers=SECURITY_HEADERS)

    async def on_ui_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, UiError)
        return page("error.html", auth.viewer(request), exc.status, message=exc.message)

    async def on_login_needed(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LoginNeeded)
        return redirect("/ui/login?" + urlencode({"next": exc.back_to}))

    app.add_exception_handler(UiError, on_ui_error)
    app.add_exception_handler(LoginNeeded, on_login_needed)

    def guard(request: Request, viewer: Viewer, form: Mapping[str, str]) -> None:
        if not csrf_ok(request, viewer, form.get("csrf", "")):
            raise UiError(403, "This form was not sent from the inspector's own page; reload it.")

    def internal(viewer: Viewer, user_id: str) -> str:
        """The store id of the viewer's user, or 404 (never a hint the id exists)."""
        try:
            return viewer.internal(user_id)
        except ScopeError as exc:
            raise UiError(404, f"No user {user_id!r}.") from exc

    def known_user(viewer: Viewer, user_id: str) -> tuple[str, list[SessionRecord]]:
        uid = internal(viewer, user_id)
        sessions = memory.sessions(uid)
        if not sessions and not memory.store.count(uid):
            raise UiError(404, f"No user {user_id!r}.")
        return uid, sessions

    def owned_fact(viewer: Viewer, user_id: str, memory_id: str) -> MemoryItem:
        """A live fact of the viewer's user, or 404 (another tenant's included)."""
        internal(viewer, user_id)
        try:
            check_id(memory_id, "memory_id")
        except ScopeError as exc:
            raise UiError(404, "No such fact.") from exc
        mem = memory.get(memory_id)
        if mem is None or not viewer.owns(mem.user_id, user_id):
            raise UiError(404, "No such fact.")
        return mem

    # --- login ---------------------------------------------------------------------
    @router.get("/")
    def home() -> RedirectResponse:
        return redirect("/ui/users")

    @router.get("/login")
    def login_form(request: Request, next: str | None = None) -> Response:
        viewer = auth.viewer(request)
        if viewer is not None:
            return redirect(_safe_next(next))
        return page("login.html", None, next=_safe_next(next), local=local)

    @router.post("/login")
    def login(request: Request, form: Form) -> Response:
        back = _safe_next(form.get("next"))
        if cross_site(request):  # no session yet, so no token: the Origin check alone
            raise UiError(403, "This form was not sent from the inspector's own page.")
        token = auth.login(form.get("key", ""))
        if token is None:
            return page("login.html", None, 401, next=back, error="That API key is not valid.")
        resp = redirect(back)
        resp.set_cookie(
            COOKIE,
            token,
            max_age=SESSION_SECONDS,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return resp

    @router.post("/logout")
    def logout(request: Request, viewer: Auth, form: Form) -> Response:
        guard(request, viewer, form)
        auth.logout(request.cookies.get(COOKIE))
        resp = redirect("/ui/login")
        resp.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
        return resp

    # --- pages -------------------------------------------------------------------------
    @router.get("/users")
    def users(viewer: Auth) -> Response:
        ids = [viewer.external(u) for u in memory.users(viewer.prefix)]
        return page("users.html", viewer, users=ids)

    @router.get("/users/{user_id}")
    def user_page(
        viewer: Auth,
        user_id: str,
        q: str = "",
        type: str = "",
        session: str = "",
        since: str = "",
        until: str = "",
        done: str = "",
    ) -> Response:
        uid, sessions = known_user(viewer, user_id)
        asked = {"q": q.strip()[:4000], "type": type, "session": session}
        asked |= {"since": since, "until": until}
        error = None
        filters: SearchFilters | None = None
        try:
            filters = SearchFilters.model_validate(
                {
                    "memory_type": type if type in TYPES else None,
                    "session_id": session or None,
                    "since": since or None,
                    "until": until or None,
                }
            )
        except ValidationError as exc:
            error = "Filter not understood: " + "; ".join(e["msg"] for e in exc.errors()[:3])
        hits, facts = [], []
        if error is None and asked["q"]:
            hits = memory.search(asked["q"], user_id=uid, limit=MAX_HITS, filters=filters)
        elif error is None:
            facts = memory.get_all(user_id=uid, filters=filters)[::-1]  # newest event first
        return page(
            "user.html",
            viewer,
            200 if error is None else 422,
            user_id=user_id,
            asked=asked,
            types=TYPES,
            hits=hits,
            facts=facts[:MAX_FACTS],
            more_facts=max(0, len(facts) - MAX_FACTS),
            total=memory.store.count(uid),
            deleted=views.deleted_facts(users_of(memory.store).user_history(uid)),
            sessions=[(s, views.status_of(s, worker)) for s in sessions][::-1],
            error=error,
            flash=FLASH.get(done),
        )

    @router.get("/users/{user_id}/facts/{memory_id}")
    def fact_page(viewer: Auth, user_id: str, memory_id: str, done: str = "") -> Response:
        return render_fact(viewer, user_id, memory_id, flash=FLASH.get(done))

    def render_fact(
        viewer: Viewer, user_id: str, memory_id: str, code: int = 200, **ctx: Any
    ) -> Response:
        uid = internal(viewer, user_id)
        mem = memory.get(memory_id)
        versions = memory.timeline(memory_id)
        owner = mem.user_id if mem else next((v.user_id for v in versions if v.user_id), None)
        if not viewer.owns(owner, user_id):  # unknown, or not this viewer's: the same 404
            raise UiError(404, "No such fact.")
        keys = {(v.session_id, v.agent_id) for v in versions if v.session_id is not None}
        recs = {
            (sid, agent): rec
            for sid, agent in keys
            if (rec := memory.session(sid, user_id=uid, agent_id=agent)) is not None
        }
        timeline = views.version_views(versions, user_id, recs)
        return page(
            "fact.html",
            viewer,
            code,
            user_id=user_id,
            mem=mem,
            timeline=timeline,
            short_edit=SHORT_EDIT,
            **ctx,
        )

    @router.post("/users/{user_id}/facts/{memory_id}/edit")
    def edit_fact(
        request: Request, viewer: Auth, form: Form, user_id: str, memory_id: str
    ) -> Response:
        guard(request, viewer, form)
        mem = owned_fact(viewer, user_id, memory_id)
        content = form.get("content", "")
        text = content.strip()
        short = 0 < len(text) < SHORT_EDIT and text != mem.content.strip()
        if short and form.get("confirmed") != "1":
            # (the page's script asks first; without it, this page asks)
            return render_fact(viewer, user_id, memory_id, confirm_short=text)
        try:
            edited = memory.edit(memory_id, content, actor=PERSON)
        except InvalidEdit as exc:
            return render_fact(viewer, user_id, memory_id, 422, error=str(exc))
        if edited is None:
            raise UiError(404, "No such fact.")
        done = "unchanged" if edited.version == mem.version else "edited"
        return redirect(views.fact_url(user_id, memory_id) + "?done=" + done)

    @router.post("/users/{user_id}/facts/{memory_id}/delete")
    def delete_fact(
        request: Request, viewer: Auth, form: Form, user_id: str, memory_id: str
    ) -> Response:
        guard(request, viewer, form)
        owned_fact(viewer, user_id, memory_id)
        if not memory.delete(memory_id, actor=PERSON):
            raise UiError(404, "No such fact.")
        return redirect(views.user_url(user_id) + "?done=deleted")

    def owned_session(
        viewer: Viewer, user_id: str, session_id: str, agent: str | None
    ) -> SessionRecord:
        uid = internal(viewer, user_id)
        try:
            check_id(session_id, "session_id")
            if agent:
                check_id(agent, "agent_id")
        except ScopeError as exc:
            raise UiError(404, "No such session.") from exc
        rec = memory.session(session_id, user_id=uid, agent_id=agent or None)
        if rec is None:
            raise UiError(404, "No such session.")
        return rec

    @router.get("/users/{user_id}/sessions/{session_id}")
    def session_page(
        viewer: Auth, user_id: str, session_id: str, agent: str = "", hl: str = "", done: str = ""
    ) -> Response:
        rec = owned_session(viewer, user_id, session_id, agent)
        ops = memory.session_operations(session_id, user_id=rec.user_id, agent_id=rec.agent_id)
        calls = memory.session_calls(session_id, user_id=rec.user_id, agent_id=rec.agent_id)
        return page(
            "session.html",
            viewer,
            user_id=user_id,
            rec=rec,
            status=views.status_of(rec, worker),
            transcript=views.transcript(rec.messages, views.parse_turns(hl, len(rec.messages))),
            ops=views.group_operations(ops),
            calls=calls,
            totals=views.call_totals(calls),
            flash=FLASH.get(done),
            worker_running=worker.running,
        )

    @router.post("/users/{user_id}/sessions/{session_id}/retry")
    def retry_session(
        request: Request, viewer: Auth, form: Form, user_id: str, session_id: str
    ) -> Response:
        guard(request, viewer, form)
        rec = owned_session(viewer, user_id, session_id, form.get("agent"))
        done = ""
        if rec.status in ("failed", "deferred"):
            worker.request_retry((rec.user_id, rec.session_id, rec.agent_id))
            done = "retried" if worker.running else "queued"
        url = views.session_url(user_id, session_id, rec.agent_id)
        return redirect(url + ("&" if "?" in url else "?") + "done=" + done)

    @router.post("/users/{user_id}/sessions/{session_id}/cancel")
    def cancel_session(
        request: Request, viewer: Auth, form: Form, user_id: str, session_id: str
    ) -> Response:
        """Withdraw a session not applied yet (`Worker.cancel`, as DELETE /v1/jobs/{id})."""
        guard(request, viewer, form)
        rec = owned_session(viewer, user_id, session_id, form.get("agent"))
        was = worker.cancel((rec.user_id, rec.session_id, rec.agent_id))
        if was == "applied":
            raise UiError(409, "This session is applied: delete its facts instead.")
        return redirect(views.user_url(user_id) + "?done=cancelled")

    app.include_router(router)
