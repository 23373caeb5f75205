"""What the inspector's pages show, built from the library's objects: plain data for
the templates (which escape every string they print), no HTML here."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from urllib.parse import quote, urlencode

from deltamem.llm.base import CallRecord
from deltamem.retrieval.hybrid import RRF_K
from deltamem.server.worker import Worker
from deltamem.types import HistoryEntry, Message, Operation, SessionRecord, Version

ACTORS = {
    "manager": "the memory manager",
    "api": "the application (API)",
    "person": "edited by a person",
}
EXCERPT_CONTEXT = 1  # turns shown around a version's source turns on the fact page


def seg(value: str) -> str:
    """A path segment: every reserved character escaped."""
    return quote(value, safe="")


def user_url(user_id: str) -> str:
    return f"/ui/users/{seg(user_id)}"


def fact_url(user_id: str, memory_id: str) -> str:
    return f"{user_url(user_id)}/facts/{seg(memory_id)}"


def session_url(
    user_id: str, session_id: str, agent_id: str | None = None, turns: list[int] | None = None
) -> str:
    query: dict[str, str] = {}
    if agent_id:
        query["agent"] = agent_id
    if turns:
        query["hl"] = ",".join(str(t) for t in turns)
    url = f"{user_url(user_id)}/sessions/{seg(session_id)}"
    if query:
        url += "?" + urlencode(query)
    return url + (f"#turn-{turns[0]}" if turns else "")


def when(dt: datetime | None) -> str:
    return dt.strftime("%Y-%m-%d %H:%M") if dt is not None else ""


def status_of(rec: SessionRecord, worker: Worker) -> str:
    """pending / running / applied / failed / parked / deferred (the API's words, with
    parked: a failed session whose tries are used up, until someone retries it)."""
    if rec.status == "applied":
        return "applied"
    if worker.job_state((rec.user_id, rec.session_id, rec.agent_id)) == "running":
        return "running"
    if rec.status == "failed":
        return "parked" if rec.attempts >= worker.settings.max_attempts else "failed"
    return rec.status


# a hit's fused score when it is first in both rankings (embedding and keyword)
BEST_SCORE = 2 / (RRF_K + 1)


def relevance(score: float) -> int:
    """A search hit's reciprocal-rank-fusion score as 0-100, as the CLI shows it: 100
    for a hit first in both the embedding and the keyword ranking, 50 for one first
    in one of them only."""
    return max(0, min(100, round(100 * score / BEST_SCORE)))


@dataclass
class DeletedFact:
    memory_id: str
    content: str  # its text when it was deleted
    deleted_at: datetime
    actor: str


def deleted_facts(history: list[HistoryEntry], limit: int = 100) -> list[DeletedFact]:
    """The memories whose history ends with a delete, newest deletion first (a
    user's whole history, oldest first, as `UserData.user_history` gives it)."""
    last: dict[str, HistoryEntry] = {}
    for h in history:
        last[h.memory_id] = h
    gone = [h for h in last.values() if h.op == "delete"]
    gone.sort(key=lambda h: h.at, reverse=True)
    return [
        DeletedFact(h.memory_id, h.old_content or "", h.at, ACTORS.get(h.actor, h.actor))
        for h in gone[:limit]
    ]


@dataclass
class Turn:
    index: int
    speaker: str
    role: str
    content: str
    when: str
    highlighted: bool = False
    gap_before: bool = False  # turns were left out before this one


def transcript(
    messages: list[Message], highlight: set[int], context: int | None = None
) -> list[Turn]:
    """A session's turns, the highlighted ones marked; with `context`, only those
    within `context` turns of a highlighted one (an excerpt)."""
    keep = set(range(len(messages)))
    if context is not None:
        keep = {i for h in highlight for i in range(h - context, h + context + 1)} & keep
    out: list[Turn] = []
    last = -1
    for i, m in enumerate(messages):
        if i not in keep:
            continue
        out.append(
            Turn(
                index=i,
                speaker=m.name or m.role,
                role=m.role,
                content=m.content,
                when=when(m.timestamp),
                highlighted=i in highlight,
                gap_before=context is not None and i != last + 1,
            )
        )
        last = i
    return out


def parse_turns(spec: str | None, limit: int) -> set[int]:
    """Turn indices from ``"0,3"`` (others ignored)."""
    out: set[int] = set()
    for part in (spec or "").split(",")[:100]:
        part = part.strip()
        if part.isdigit() and int(part) < limit:
            out.add(int(part))
    return out


@dataclass
class VersionView:
    version: Version
    actor: str
    content: str
    session_link: str | None = None
    excerpt: list[Turn] = field(default_factory=list)


def version_views(
    versions: list[Version], user_id: str, sessions: dict[tuple[str, str | None], SessionRecord]
) -> list[VersionView]:
    """A fact's timeline for its page: each version with the excerpt of its session
    around the turns it came from (`sessions`: the versions' sessions by key)."""
    out: list[VersionView] = []
    for v in versions:
        view = VersionView(
            version=v,
            actor=ACTORS.get(v.actor, v.actor),
            content=(v.new_content if v.op != "delete" else v.old_content) or "",
        )
        if v.session_id is not None:
            view.session_link = session_url(user_id, v.session_id, v.agent_id, v.turns)
            rec = sessions.get((v.session_id, v.agent_id))
            if rec is not None and v.turns:
                view.excerpt = transcript(rec.messages, set(v.turns), EXCERPT_CONTEXT)
        out.append(view)
    return out


@dataclass
class OpGroups:
    applied: list[Operation]
    refused: list[Operation]  # turned into `none` by validation, with the reason
    unchanged: list[Operation]  # the model's own `none`
    by_rule: list[tuple[str, int]] = field(default_factory=list)  # refusals by rule code


def group_operations(ops: list[Operation]) -> OpGroups:
    refused = [o for o in ops if o.op == "none" and o.note]
    counts = Counter(o.rule for o in refused if o.rule)
    return OpGroups(
        applied=[o for o in ops if o.op in ("add", "update", "delete", "invalidate")],
        refused=refused,
        unchanged=[o for o in ops if o.op == "none" and not o.note],
        by_rule=counts.most_common(),
    )


@dataclass
class CallTotals:
    calls: int
    prompt_tokens: int
    cached_tokens: int
    completion_tokens: int
    seconds: float
    failed: int


def call_totals(calls: list[CallRecord]) -> CallTotals:
    return CallTotals(
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        cached_tokens=sum(c.cached_tokens for c in calls),
        completion_tokens=sum(c.completion_tokens for c in calls),
        seconds=round(sum(c.seconds for c in calls), 2),
        failed=sum(not c.ok for c in calls),
    )
