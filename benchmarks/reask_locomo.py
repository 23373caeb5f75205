"""A finished LoCoMo run made ready to be asked again with today's read path.

    python benchmarks/reask_locomo.py runs/lc43-s6-ans --bank runs/lc43-s6 --out runs/lc43-turns
    DELTAMEM_BESIDE=turns deltamem bench locomo ../shared/data/locomo/locomo10-dev-more.json \
        --conversation conv-43 --sessions 6 --systems deltamem --both-as-user \
        --llm local --judge local --resume --out runs/lc43-turns

Writing the banks is the costly part on a small CPU; a change to what `answer` reads
(`Memory.context`) needs only the questions searched and answered again. OUT gets the
answered run's records and judge cache, and the bank of the run that wrote it
(`--bank`, `OUT/systems`), less the system's questions of the chosen categories and its
"done" mark. `bench locomo --resume` then replays the sessions from the bank's log (no
model call: they were applied) and searches, answers and judges those questions again
with the code as it is. The other systems' answers stay as they were, so `deltamem bench
compare OUT OUT --systems retrieval,deltamem` pairs the new answers with the same
answerer's answers over the raw turns.
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("answered", type=Path, help="a finished LoCoMo run with answers")
    ap.add_argument("--bank", type=Path, help="the run whose OUT/systems hold the banks "
                    "(default: the answered run)")  # fmt: skip
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--system", default="deltamem", help="the system asked again")
    ap.add_argument("--categories", default="1,2,3,4")
    a = ap.parse_args()
    if a.out.exists():
        raise SystemExit(f"{a.out} exists: resume it with bench locomo --resume")
    bank = a.bank or a.answered
    cats = {int(c) for c in a.categories.split(",") if c.strip()}
    a.out.mkdir(parents=True)
    shutil.copytree(bank / "systems" / a.system, a.out / "systems" / a.system)
    if (a.answered / "judge_cache.sqlite").is_file():
        shutil.copy(a.answered / "judge_cache.sqlite", a.out / "judge_cache.sqlite")
    kept, dropped = [], 0
    with open(a.answered / "results.jsonl", encoding="utf-8") as f:
        for line in f:
            rec = json.loads(line)
            again = rec.get("system") == a.system and (
                rec.get("kind") == "user_done"
                or (rec.get("kind") == "question" and rec.get("category") in cats)
            )
            if again:
                dropped += rec.get("kind") == "question"
            else:
                kept.append(line)
    (a.out / "results.jsonl").write_text("".join(kept), encoding="utf-8")
    print(f"{a.out}: {len(kept)} records kept, {dropped} {a.system} questions to ask again")


if __name__ == "__main__":
    main()
