"""Does the extractor know when it is wrong? Its own token confidence against the fact audit.

The fact audit (`benchmarks/fact_audit.py`) has two blind readers' labels for 240
stored facts of the eight dev banks. `ask` puts each audited fact's source turns to
the extractor again, exactly as the manager does (`turn_prompt`, the fact rules,
`NOTHING_NEW`), asking for the mean token log-probability of every fact it writes
(`complete_json_many(confidence=True)`); it appends one line a turn to OUT and skips
the turns OUT already holds (`--resume` by default). `report` finds each agreed
audited fact among the facts written again (the same content words, Jaccard >= 0.6:
greedy decoding in another batch may word it a little differently), and gives the
AUC of the confidence for right against wrong facts, by bank group (the banks first
read, the others, HaluMem), and what each floor of LOW_CONFIDENCE would refuse.

    python benchmarks/extract_confidence.py ask --runs runs --out runs/confidence.jsonl
    python benchmarks/extract_confidence.py report runs/confidence.jsonl
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from collections import Counter
from contextlib import closing
from pathlib import Path

from deltamem.llm.factory import make_llm
from deltamem.manager import extract
from deltamem.text import stems_of
from deltamem.types import Message, SessionRecord

ROOT = Path(__file__).resolve().parents[1]
AUDIT = ROOT / "benchmarks" / "data" / "fact_audit"
GROUPS = {
    "LoCoMo conv-26, 30, 41 (read first)": ("lc26", "lc30", "lc41"),
    "LoCoMo conv-42, 43, 44": ("lc42", "lc43", "lc44"),
    "HaluMem users 3, 0": ("hm",),
}
FLOORS = (-0.3, -0.4, -0.5, -0.6, -0.8, -1.0)


def _name(db: sqlite3.Connection) -> str | None:
    """The person's name in a bank of one person (HaluMem): the two words most facts
    open with."""
    rows = [r[0] for r in db.execute("SELECT content FROM memories")]
    top = Counter(" ".join(r.split()[:2]) for r in rows if len(r.split()) > 2).most_common(1)
    return top[0][0].removesuffix("'s") if top and top[0][1] > len(rows) / 4 else None


def _turns(runs: Path, done: set[tuple[str, int]]) -> list[tuple[dict, extract.TurnPrompt, set]]:
    out = []
    for key in map(json.loads, (AUDIT / "key.jsonl").open()):
        path = (runs / key["bank"] / "systems" / "deltamem" / "deltamem.db").resolve()
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
            user, session, turns = db.execute(
                "SELECT user_id, session_id, turns FROM memories WHERE id = ?", (key["memory"],)
            ).fetchone()
            ts, msgs = db.execute(
                "SELECT timestamp, messages FROM sessions WHERE user_id = ? AND session_id = ?",
                (user, session),
            ).fetchone()
            record = SessionRecord(
                user_id=user,
                session_id=session,
                timestamp=ts,
                messages=[Message.model_validate(m) for m in json.loads(msgs)],
                content_hash="-",
            )
            name = None if record.messages[0].name else _name(db)
        for turn in json.loads(turns):
            if record.messages[turn].role != "user" or (key["id"], turn) in done:
                continue
            said_before: set[str] = set()  # as the extractor reads the session, in order
            for earlier in range(turn):
                if record.messages[earlier].role == "user":
                    said_before |= stems_of(extract.turn_prompt(record, earlier, name).said)
            out.append((key, extract.turn_prompt(record, turn, name), said_before))
    return out


def ask(runs: Path, out: Path, llm_spec: str, batch: int) -> None:
    done = set()
    if out.exists():
        done = {(j["id"], j["turn"]) for j in map(json.loads, out.open())}
    todo = _turns(runs, done)
    print(f"{len(todo)} turns to ask ({len(done)} done)", flush=True)
    llm = make_llm(llm_spec)
    with out.open("a") as f:
        for start in range(0, len(todo), batch):
            group = todo[start : start + batch]
            replies = llm.complete_json_many(
                [p.messages for _, p, _ in group],
                extract.SCHEMA,
                purpose="extract",
                max_tokens=240,
                check=extract.FactsReply.model_validate,
                confidence=True,
            )
            for (key, p, said_before), reply in zip(group, replies, strict=True):
                if isinstance(reply, Exception):  # not written: a resumed run asks it again
                    print(f"{key['id']} turn {p.turn}: {reply}", flush=True)
                    continue
                kept = [
                    (read.fact, read.confidence)
                    for read in extract.read_reply(p, reply, said_before)
                    if read.why is None
                ]
                line = {"id": key["id"], "bank": key["bank"], "turn": p.turn, "kept": kept}
                f.write(json.dumps(line) + "\n")
            f.flush()
            print(f"{min(start + batch, len(todo))}/{len(todo)}", flush=True)


def _labels() -> dict[str, str]:
    """The label both readers gave, for the facts they agree on."""
    read = []
    for reader in ("reader_a.tsv", "reader_b.tsv"):
        rows = (line.rstrip("\n").split("\t") for line in (AUDIT / reader).open())
        read.append({r[0]: r[1] for r in rows if len(r) > 1})
    return {i: label for i, label in read[0].items() if read[1].get(i) == label}


def _same(a: str, b: str) -> bool:
    x, y = stems_of(a), stems_of(b)
    return bool(x | y) and len(x & y) / len(x | y) >= 0.6


def auc(right: list[float], wrong: list[float]) -> float:
    """P(a right fact's confidence > a wrong one's), ties half."""
    if not right or not wrong:
        return float("nan")
    wins = sum((r > w) + 0.5 * (r == w) for r in right for w in wrong)
    return wins / (len(right) * len(wrong))


def report(path: Path) -> dict:
    labels = _labels()
    facts = {j["id"]: j["fact"] for j in map(json.loads, (AUDIT / "key.jsonl").open())}
    found: dict[str, tuple[str, str, float]] = {}  # id -> (bank, label, confidence)
    for line in map(json.loads, path.open()):
        i = line["id"]
        if i in found or i not in labels:
            continue
        for fact, sure in line["kept"]:
            if sure is not None and _same(facts[i], fact):
                found[i] = (line["bank"], labels[i], sure)
                break
    out: dict = {"agreed": len(labels), "found": len(found), "groups": {}, "floors": {}}
    for group, banks in {"all": ("",), **GROUPS}.items():
        rows = [v for v in found.values() if v[0].startswith(banks)]
        right = [c for _, lab, c in rows if lab == "right"]
        wrong = [c for _, lab, c in rows if lab == "wrong"]
        out["groups"][group] = {"right": len(right), "wrong": len(wrong), "auc": auc(right, wrong)}
        print(f"{group}: {len(right)} right, {len(wrong)} wrong, AUC {auc(right, wrong):.3f}")
    for floor in FLOORS:
        under = [lab for _, lab, c in found.values() if c < floor]
        refused = {"wrong": under.count("wrong"), "right": under.count("right")}
        out["floors"][str(floor)] = refused
        print(f"floor {floor}: refuses {refused['wrong']} wrong, {refused['right']} right")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("ask")
    a.add_argument("--runs", type=Path, default=Path("runs"))
    a.add_argument("--out", type=Path, required=True)
    a.add_argument("--llm", default="local")
    a.add_argument("--batch", type=int, default=8)
    r = sub.add_parser("report")
    r.add_argument("path", type=Path)
    args = parser.parse_args()
    if args.command == "ask":
        ask(args.runs, args.out, args.llm, args.batch)
    else:
        report(args.path)


if __name__ == "__main__":
    main()
