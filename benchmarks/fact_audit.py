"""How many stored facts are wrong? Two blind readers on a random draw of the banks.

The rules' labelled cases (`deltamem/rules/cases.jsonl`) were gathered where a rule
was being written: they say how well each rule decides, not how many of the facts a
bank ends up holding are wrong. This audit asks that second question. `draw` takes, from
each run's bank, a seeded random draw of the current facts (neither ended nor
superseded) with the turns each was written from and the message before them; the
readers see the fact, its date and those turns, nothing of the rules, the run or the
other reader (`facts_blind.jsonl`: it quotes the dev data, so only `key.jsonl`, the
facts and where they are, is committed). Each labels every fact right or wrong under the
written policy (`benchmarks/data/fact_audit/POLICY.md`, the rules' label policy made
for stored facts) and names the first point that makes a wrong one wrong. `report` gives their
agreement (Cohen's κ), the share of facts both call wrong and the share either does
(each with a 95% Wilson interval), by bank and by point. No model is called.

    python benchmarks/fact_audit.py draw runs/lc26-s10 runs/hm3-all ... --per-bank 30 --out DIR
    python benchmarks/fact_audit.py report [DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from collections import Counter, defaultdict
from contextlib import closing
from datetime import UTC, datetime
from pathlib import Path

from scipy.stats import binomtest

from deltamem.bench.agreement import cohen_kappa

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "benchmarks" / "data" / "fact_audit"
# the points of POLICY.md, kept in step with it
POINTS = {
    "1": "another's thing (the listener's, a third person's, the assistant's)",
    "2": "a wish, hope or plan stated as done",
    "3": "something added the turns do not support (a label, role, date, number)",
    "4": "not a readable fact (first-person words, garbled, a pleasantry, a maxim)",
    "5": "true in the wider story, not said in these turns",
    "6": "a detail that contradicts the turns",
}


def _turns(db: sqlite3.Connection, user: str, session: str, source: list[int]) -> list[dict]:
    """The turns a fact was written from, and the message just before the first."""
    if not source:
        return []
    first, last = min(source) - 1, max(source)
    out = []
    for t, role, name, text in db.execute(
        "SELECT turn, role, name, content FROM episodes "
        "WHERE user_id = ? AND session_id = ? AND turn BETWEEN ? AND ? ORDER BY turn",
        (user, session, first, last),
    ):
        if t in source or t == first:
            speaker = name or ("the person" if role == "user" else "the assistant")
            out.append({"speaker": speaker, "text": text, "source": t in source})
    return out


def draw(runs: list[Path], per_bank: int, seed: int, out: Path) -> None:
    """`per_bank` current facts of each run's bank. One generator runs through the banks
    in the order given, so the same runs in the same order draw the same facts; the ids
    follow that order (a001-a030 the first bank's), and only the lines the readers get
    are shuffled."""
    rng = random.Random(seed)
    now = datetime.now(UTC).isoformat()
    facts, key = [], []
    for run in runs:
        path = (run / "systems" / "deltamem" / "deltamem.db").resolve()
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            current = db.execute(
                "SELECT id, user_id, content, session_id, turns, timestamp FROM memories "
                "WHERE invalid_at IS NULL AND superseded_by IS NULL "
                "AND (expires_at IS NULL OR expires_at > ?) ORDER BY rowid",
                (now,),
            ).fetchall()
            if len(current) < per_bank:
                raise SystemExit(f"{run}: {len(current)} current facts, fewer than {per_bank}")
            for memory, user, content, session, turns, ts in rng.sample(current, per_bank):
                fid = f"a{len(facts) + 1:03d}"
                shown = _turns(db, user, session, json.loads(turns))
                facts.append({"id": fid, "fact": content, "date": ts[:10], "turns": shown})
                key.append(
                    {"id": fid, "bank": run.name, "memory": memory, "session": session}
                    | {"fact": content}
                )
    rng.shuffle(facts)  # the readers get the banks' facts mixed
    out.mkdir(parents=True, exist_ok=True)
    for name, rows in (("facts_blind.jsonl", facts), ("key.jsonl", key)):
        text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
        (out / name).write_text(text, encoding="utf-8")
    print(f"{len(facts)} facts from {len(runs)} banks -> {out}")


def read_labels(path: Path) -> dict[str, tuple[str, str, str]]:
    """id -> (right/wrong, point, reason) of one reader's TSV: a right fact's point is 0,
    a wrong one's 1-6."""
    out: dict[str, tuple[str, str, str]] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        fid, label, point, *why = [*line.split("\t"), "", ""][:4]
        wrong = label == "wrong" and point in POINTS
        if not (wrong or (label == "right" and point == "0")) or fid in out:
            raise SystemExit(f"{path}:{n}: not 'id, right 0 | wrong 1-6, reason' or a repeat")
        out[fid] = (label, point, why[0] if why else "")
    return out


def share(k: int, n: int) -> str:
    ci = binomtest(k, n).proportion_ci(method="wilson")
    return f"{k}/{n} = {k / n:.3f} ({ci.low:.3f} … {ci.high:.3f})"


def report(audit: Path) -> dict:
    lines = (audit / "key.jsonl").read_text(encoding="utf-8").splitlines()
    key = {r["id"]: r for r in map(json.loads, filter(None, lines))}
    a = read_labels(audit / "reader_a.tsv")
    b = read_labels(audit / "reader_b.tsv")
    ids = sorted(key)
    unread = [i for i in ids if i not in a or i not in b]
    unknown = sorted((set(a) | set(b)) - set(ids))
    if unread or unknown:
        raise SystemExit(f"not read by both: {unread[:5]}; not drawn: {unknown[:5]}")
    la, lb = [a[i][0] for i in ids], [b[i][0] for i in ids]
    both = {i for i in ids if a[i][0] == b[i][0] == "wrong"}
    either = {i for i in ids if "wrong" in (a[i][0], b[i][0])}
    agree = sum(x == y for x, y in zip(la, lb, strict=True))
    print(f"{len(ids)} stored facts, two blind readers: {agree}/{len(ids)} agree,", end=" ")
    kappa = cohen_kappa(la, lb)
    print("κ undefined" if kappa is None else f"κ {kappa:.3f}")
    print(f"wrong by both readers:  {share(len(both), len(ids))}")
    print(f"wrong by either reader: {share(len(either), len(ids))}")
    banks: dict[str, list[str]] = defaultdict(list)
    for i in ids:
        banks[key[i]["bank"]].append(i)
    print("\n| bank | facts | wrong (both) | wrong (either) |\n|---|---|---|---|")
    for bank, xs in banks.items():
        n_both, n_either = sum(i in both for i in xs), sum(i in either for i in xs)
        print(f"| {bank} | {len(xs)} | {n_both} | {n_either} |")
    # the point of a fact both call wrong: reader A's where they differ on it
    points = Counter(a[i][1] for i in both)
    same_point = sum(a[i][1] == b[i][1] for i in both)
    print(f"\nwhy (facts both call wrong; the readers name the same point for {same_point}):")
    for point, n in points.most_common():
        print(f"  {n:3d}  {point}. {POINTS[point]}")
    return {"facts": len(ids), "agree": agree, "both": len(both), "either": len(either)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("draw", help="draw the facts the readers will read")
    d.add_argument("runs", type=Path, nargs="+", help="bench runs whose deltamem bank to draw from")
    d.add_argument("--per-bank", type=int, default=30)
    d.add_argument("--seed", type=int, default=38)
    d.add_argument("--out", type=Path, required=True)
    r = sub.add_parser("report", help="agreement and wrong shares of two readers' labels")
    r.add_argument("audit", type=Path, nargs="?", default=AUDIT)
    args = parser.parse_args()
    if args.command == "draw":
        draw(args.runs, args.per_bank, args.seed, args.out)
    else:
        report(args.audit)


if __name__ == "__main__":
    main()
