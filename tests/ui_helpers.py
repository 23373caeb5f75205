"""A memory for the inspector's tests: two tenants, a scripted manager, and sessions
that leave every kind of thing a page shows (an update, a refused operation, a
failed session, a deferred one, a fact holding markup)."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

from fakes import SESSION, ScriptedLLM

from deltamem.embed import Embedder
from deltamem.llm.base import LLMError
from deltamem.memory import Memory, SessionFailed
from deltamem.server.config import WorkerSettings
from deltamem.store.sqlite import SQLiteStore

KEY_A = "key-of-tenant-a-0123456789"
KEY_B = "key-of-tenant-b-0123456789"
KEYS = {KEY_A: "a", KEY_B: "b"}
FAST = WorkerSettings(poll_interval=0.05, max_attempts=1, backoff=0.0)

BEAGLE = "Martin adopted a beagle named Rufus."
RUFUS_TWO = "Martin's beagle Rufus turned two."
TEA = "Martin drinks green tea every morning."
MOTTO = 'Martin\'s motto is <script>window.pwned=1</script> "stay curious".'
ROOIBOS = "Martin drinks rooibos every morning."


def _convo(messages: list[dict[str, str]]) -> str:
    return messages[-1]["content"].split("Conversation", 1)[-1]


class Manager:
    """Scripted manager replies, chosen by what the conversation says. A conversation
    holding "FLAKY" fails while `flaky` is set."""

    def __init__(self) -> None:
        self.flaky = True

    def __call__(self, messages: list[dict[str, str]]) -> Any:
        prompt = messages[-1]["content"]
        convo = _convo(messages)
        ops: list[dict[str, Any]] = []
        if "FLAKY" in convo and self.flaky:
            raise LLMError("the model server is down (scripted)")
        if "beagle named Rufus" in convo:
            ops += [
                {"op": "add", "type": "event", "content": BEAGLE, "turns": [0]},
                {"op": "add", "type": "persona", "content": TEA, "turns": [2]},
                {"op": "add", "type": "persona", "content": TEA, "turns": [2]},  # refused
                {"op": "add", "type": "persona", "content": MOTTO, "turns": [4]},
            ]
        if "turned two" in convo:
            short = re.search(r"(m\d+) \| [^|]+ \| " + re.escape(BEAGLE), prompt)
            assert short is not None, prompt
            ops.append(
                {"op": "update", "id": short.group(1), "type": "event", "content": RUFUS_TWO}
            )
        if "FLAKY" in convo:
            ops.append({"op": "add", "type": "persona", "content": "Martin plays chess."})
        if "secretly like opera" in convo:
            ops.append({"op": "add", "type": "persona", "content": "Bea secretly likes opera."})
        return {"operations": ops}


def turns(*texts: str) -> list[dict[str, str]]:
    roles = ("user", "assistant")
    return [{"role": roles[i % 2], "content": t} for i, t in enumerate(texts)]


S1 = turns(
    "I adopted a beagle named Rufus last week.",
    "Congratulations! Beagles are great company.",
    "I drink green tea every morning.",
    "Good habit.",
    'My motto is <script>window.pwned=1</script> "stay curious".',
    "Nice motto.",
)
S2 = turns("Rufus turned two today!", "Happy birthday, Rufus!")
S3 = turns("FLAKY: I also play chess on Sundays.", "Fun!")
S4 = turns("Just saying hi.", "Hi!")
B1 = turns("I'm Bea and I secretly like opera.", "Lovely.")


def seeded_memory(tmp_path: Path, embedder: Embedder) -> tuple[Memory, Manager]:
    """Tenant a's user martin: s1 (three facts, one refused duplicate), s2 (an update),
    s3 (failed, parked), s4 (stored verbatim, deferred). Tenant b's user bea: b1."""
    manager = Manager()
    store = SQLiteStore(tmp_path / "ui.db", dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(default=manager), embedder=embedder, store=store, config=SESSION)
    mem.add(S1, user_id="a:martin", session_id="s1", timestamp="2029-02-13T10:00:00")
    mem.add(S2, user_id="a:martin", session_id="s2", timestamp="2029-03-01T09:00:00")
    with contextlib.suppress(SessionFailed):  # the model is "down": s3 is parked
        mem.add(S3, user_id="a:martin", session_id="s3", timestamp="2029-03-02T09:00:00")
    mem.add(S4, user_id="a:martin", session_id="s4", timestamp="2029-03-03", infer=False)
    mem.add(B1, user_id="b:bea", session_id="b1", timestamp="2029-02-20T10:00:00")
    return mem, manager


def fact_id(mem: Memory, user: str, text: str) -> str:
    return next(m.id for m in mem.get_all(user_id=user) if m.content == text)
