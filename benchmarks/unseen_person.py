"""A person the dev data never showed: write the sessions, ask the questions.

    python benchmarks/unseen_person.py [--data benchmarks/data/unseen_person.json] [--llm local]

The manager's rules were found on four dev dialogues; this conversation, written for
the purpose, has what they lack (an abbreviation, a time in a sentence without
subject, another person's wedding told in passing, a relative date asked about
months later). It prints each session's operations, the bank, and each answer with
whether it holds an expected phrase (`expect`, and every one of `also`), then the
memories that should never be stored. A smoke check to read, not a figure to tune:
nine questions say nothing about quality in general (docs/journal/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from deltamem.memory import Memory

DATA = Path(__file__).parent / "data" / "unseen_person.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--llm", default="local")
    args = ap.parse_args()
    case = json.loads(args.data.read_text(encoding="utf-8"))
    user = case["user_id"]
    t0 = time.perf_counter()
    mem = Memory(Path(tempfile.mkdtemp(prefix="deltamem-unseen-")) / "unseen.db", llm=args.llm)
    for i, session in enumerate(case["sessions"]):
        t = time.perf_counter()
        res = mem.add(
            session["messages"], user_id=user, session_id=f"s{i}", timestamp=session["timestamp"]
        )
        print(f"session {i} ({time.perf_counter() - t:.0f} s)")
        for op in res.operations:
            print(f"  {op.op:7} {op.content}" + (f"  [{op.note}]" if op.note else ""))
    bank = mem.get_all(user_id=user)
    print("bank")
    for m in bank:
        print(f"  {m.timestamp:%Y-%m-%d} v{m.version} {m.content}")
        if m.version > 1:
            for h in mem.history(m.id)[:-1]:
                print(f"      was ({h.op}): {h.new_content}")
    outdated = [m for m in mem.get_all(user_id=user, filters={"outdated": True}) if m.invalid_at]
    for m in outdated:
        print(f"  outdated {m.invalid_at:%Y-%m-%d} by {m.superseded_by}: {m.content}")
    right = 0
    for q in case["questions"]:
        text = mem.answer(q["question"], user_id=user, asked_at=case["asked_at"]).text
        low = text.lower()
        ok = any(e in low for e in q["expect"]) and all(a in low for a in q.get("also", []))
        right += ok
        print(f"{'ok  ' if ok else 'MISS'} {q['question']}\n     {text}")
    stored = [m.content for m in bank if any(n in m.content.lower() for n in case["never_stored"])]
    print(f"{right} of {len(case['questions'])} answers hold an expected phrase")
    print(f"memories that should not be there: {stored or 'none'}")
    print(f"{time.perf_counter() - t0:.0f} s in all")
    mem.close()


if __name__ == "__main__":
    main()
