"""`deltamem demo`: three sessions in which facts change, then the memory bank,
each session's operations, the history of an updated memory, and answers."""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path

from rich.console import Console

from deltamem.cli.render import memories_table, ops_table
from deltamem.llm.factory import LLMConfig
from deltamem.memory import Memory

SAMPLE = Path(__file__).parent / "data" / "demo_sessions.json"
QUESTIONS = [
    "Where does Priya live now?",
    "Where does Priya work and what is her job?",
    "Who is Priya engaged to, and where do they plan to marry?",
    "What is Priya's blood type?",  # nothing in memory says: the answer must say so
]


def run_demo(db: str | Path | None, llm: LLMConfig | str | None, out: Console) -> None:
    sessions = json.loads(SAMPLE.read_text(encoding="utf-8"))
    path = db or Path(tempfile.mkdtemp(prefix="deltamem-demo-")) / "demo.db"
    out.rule("deltamem demo")
    out.print(f"store: {path}")
    t0 = time.perf_counter()
    mem = Memory(path, llm=llm)
    mem.reset("priya")
    for s in sessions:
        out.rule(f"session {s['session_id']} ({s['timestamp'][:10]})")
        for m in s["messages"]:
            out.print(f"[bold]{m['role']}[/bold]: {m['content']}")
        t = time.perf_counter()
        res = mem.add(
            s["messages"],
            user_id=s["user_id"],
            session_id=s["session_id"],
            timestamp=s["timestamp"],
        )
        out.print(ops_table(res.operations, f"operations ({time.perf_counter() - t:.0f} s)"))

    out.rule("memory bank")
    bank = mem.get_all(user_id="priya")
    out.print(memories_table(bank, "memories of priya, with provenance"))

    updated = [m for m in bank if m.version > 1]
    out.rule("history of an updated memory")
    if updated:
        for h in mem.history(updated[0].id):
            text = h.new_content if h.op != "delete" else h.old_content
            out.print(f"{h.op:>6} in {h.session_id}: {text}")
    else:
        out.print("no memory was updated in this run (new facts were added beside the old)")

    out.rule("questions")
    for q in QUESTIONS:
        out.print(f"[bold]Q:[/bold] {q}")
        out.print(f"[bold]A:[/bold] {mem.answer(q, user_id='priya').text}")
    usage = mem.llm.usage
    out.rule()
    out.print(
        f"{usage.calls} LLM calls, {usage.prompt_tokens} prompt tokens "
        f"({usage.cached_tokens} from cache), {usage.completion_tokens} generated, "
        f"{time.perf_counter() - t0:.0f} s in all"
    )
    mem.close()
