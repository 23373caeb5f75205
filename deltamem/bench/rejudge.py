"""A finished run's answers judged again, into a new directory.

Judges change (hand labels, new rules); answers need not. `copy_unjudged` copies a
run's records with its question verdicts left out, and its judge cache, so the
judges of today read every answer again and only checks they did not ask before
cost a model call. Extraction and update verdicts are carried over unchanged.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from deltamem.bench.judges.base import CACHE
from deltamem.bench.log import JUDGMENTS, RESULTS, read_records
from deltamem.bench.reanswer import carry_judgments, is_question

# what a LoCoMo question record keeps its verdict in (HaluMem's sit in JUDGMENTS)
_LOCOMO_VERDICT = "judge"


def copy_unjudged(source: Path, out: Path) -> int:
    """Copy `source`'s records into `out` without their question verdicts; returns how
    many questions are left to judge. `out` must not hold records or verdicts yet."""
    for name in (RESULTS, JUDGMENTS):
        if (out / name).exists():
            raise FileExistsError(f"{out / name} exists: judge into a new directory")
    records = list(read_records(source / RESULTS))
    questions = {str(r["key"]) for r in records if is_question(r)}
    out.mkdir(parents=True, exist_ok=True)
    with (out / RESULTS).open("w", encoding="utf-8") as fh:
        for rec in records:
            if str(rec.get("key")) in questions:
                rec.pop(_LOCOMO_VERDICT, None)
            fh.write(json.dumps(rec, ensure_ascii=False) + "\n")
    carry_judgments(source, out, questions)
    if (source / CACHE).is_file():
        shutil.copyfile(source / CACHE, out / CACHE)
    return len(questions)
