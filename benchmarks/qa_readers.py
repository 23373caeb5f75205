"""Two blind readers against the HaluMem QA labels and the QA judge.

`bench/labels/qa.jsonl` was labelled by the sessions that built the judge, and its
cut points were tuned on those labels. Two readers (helper sessions) labelled the 123
items again, blind to the label, the judge, the system and each other, from the
question, the reference answer, its key facts and the prediction only, under
`bench/labels/qa_policy.md`: `benchmarks/data/qa_readers.tsv` (id, reader A, reader B,
A's reason). On the items they agree on, this script gives how far the committed
labels and the decomposed judge (its verdicts as committed in
`bench/agreement/decomposed-{tune,test}/agreement_items.jsonl`) agree with them:
three-way (correct / hallucination / omission) and correct-or-not, the figure QA
accuracy is made of. No model is called.

    python benchmarks/qa_readers.py
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from deltamem.bench.agreement import cohen_kappa, load_labels

ROOT = Path(__file__).resolve().parents[1]
LABELS = ROOT / "bench" / "labels"  # its qa.jsonl
READERS = ROOT / "benchmarks" / "data" / "qa_readers.tsv"
AGREEMENT = ROOT / "bench" / "agreement"
REAL_FROM = 84  # qa-084 … qa-123 are answers the embedded answerer gave


def _right(label: str) -> bool:
    return label == "correct"


def _right_or_not(labels: list[str]) -> list[str]:
    return ["correct" if _right(x) else "not" for x in labels]


def _kappa(x: list[str], y: list[str]) -> str:
    k = cohen_kappa(x, y)
    return "n/a" if k is None else f"{k:.3f}"


def compare(name: str, ids: list[str], readers: dict[str, str], other: dict[str, str]) -> None:
    r, o = [readers[i] for i in ids], [other[i] for i in ids]
    agree = sum(a == b for a, b in zip(r, o, strict=True))
    rb, ob = _right_or_not(r), _right_or_not(o)
    called_right = sum(1 for a, b in zip(r, o, strict=True) if not _right(a) and _right(b))
    called_wrong = sum(1 for a, b in zip(r, o, strict=True) if _right(a) and not _right(b))
    print(
        f"  {name}: three-way {agree}/{len(ids)}, κ {_kappa(r, o)}; correct-or-not κ "
        f"{_kappa(rb, ob)}: {called_right} of {rb.count('not')} not correct called correct, "
        f"{called_wrong} of {rb.count('correct')} correct called not; correct share "
        f"{ob.count('correct') / len(ids):.3f} (readers {rb.count('correct') / len(ids):.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--labels", type=Path, default=LABELS)
    parser.add_argument("--readers", type=Path, default=READERS)
    parser.add_argument("--agreement", type=Path, default=AGREEMENT)
    args = parser.parse_args()
    labels = {r["id"]: r for r in load_labels(args.labels, ["qa"]).get("qa", [])}
    a: dict[str, str] = {}
    b: dict[str, str] = {}
    for line in args.readers.read_text("utf-8").splitlines():
        if line.strip():
            qid, la, lb, *_ = line.split("\t")
            a[qid], b[qid] = la, lb
    if set(a) != set(labels):
        raise SystemExit(
            f"the readers' file does not hold every label: {sorted(set(labels) ^ set(a))}"
        )
    judge: dict[str, str] = {}
    for half in ("tune", "test"):
        items = args.agreement / f"decomposed-{half}" / "agreement_items.jsonl"
        for r in map(json.loads, items.read_text("utf-8").splitlines()):
            if r["id"].startswith("qa-"):
                judge[r["id"]] = r["judge"]
    ids = sorted(labels)
    agree = [i for i in ids if a[i] == b[i]]
    both = _kappa([a[i] for i in ids], [b[i] for i in ids])
    print(
        f"the two readers: {len(agree)}/{len(ids)} agree, κ {both}"
        f"; correct-or-not {sum(_right(a[i]) == _right(b[i]) for i in ids)}/{len(ids)}"
    )
    committed = {i: labels[i]["label"] for i in ids}
    subsets = {
        "all agreed items": agree,
        "test half": [i for i in agree if labels[i]["split"] == "test"],
        f"the embedded answerer's answers (qa-{REAL_FROM:03d} on)": [
            i for i in agree if int(i.split("-")[1]) >= REAL_FROM
        ],
    }
    for name, sub in subsets.items():
        print(f"{name} ({len(sub)}):")
        compare("committed labels", sub, a, committed)
        compare("judge", sub, a, judge)
        split = Counter((a[i], judge[i]) for i in sub if a[i] != judge[i])
        print(
            "  judge differs (readers → judge): "
            + ", ".join(f"{x}→{y} {n}" for (x, y), n in split.most_common())
        )
    print("items where the committed label is not the readers':")
    for i in agree:
        if committed[i] != a[i]:
            print(
                f"  {i} {committed[i]} / readers {a[i]}: {labels[i]['inputs']['prediction'][:90]}"
            )


if __name__ == "__main__":
    main()
