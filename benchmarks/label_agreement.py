"""How far do two readers agree on the rules' labelled cases?

The cases (`deltamem/rules/cases.jsonl`) were labelled by the sessions that wrote the
rules. A second reader labelled every case again, blind (the fact, the message and
the message before it; no label, rule or verdict shown), under the written label
policy (docs/rules.md, "Label policy"): `benchmarks/data/rules_second_reader.tsv`
(id, keep/refuse, the policy's point, a short reason). Where the two disagreed, the
case was decided again under the policy; a case whose label changed carries
`relabelled` with the label it had.

This script gives the agreement (share and Cohen's κ) of the second reader with the
first labels (before any change) and with the labels now, and lists the cases the
two readers still differ on. No model is called.

    python benchmarks/label_agreement.py
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from deltamem.bench.agreement import cohen_kappa

ROOT = Path(__file__).resolve().parents[1]
CASES = ROOT / "deltamem" / "rules" / "cases.jsonl"
SECOND = ROOT / "benchmarks" / "data" / "rules_second_reader.tsv"
AUDIT_SOURCE = "fact audit"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", type=Path, default=CASES)
    parser.add_argument("--second", type=Path, default=SECOND)
    args = parser.parse_args()
    cases = [json.loads(line) for line in args.cases.read_text("utf-8").splitlines() if line]
    second: dict[str, tuple[str, str, str]] = {}
    for line in args.second.read_text("utf-8").splitlines():
        if line.strip():
            cid, label, point, *why = line.split("\t")
            second[cid] = (label, point, why[0] if why else "")
    missing = [c["id"] for c in cases if c["id"] not in second]
    if missing:
        raise SystemExit(f"no second label for {len(missing)} cases: {missing[:5]} ...")
    # the fact audit's cases entered only where its two blind readers agreed: counted
    # here they would only raise the agreement; theirs is `fact_audit.py report`'s
    audited = [c for c in cases if c.get("source", "").startswith(AUDIT_SOURCE)]
    cases = [c for c in cases if not c.get("source", "").startswith(AUDIT_SOURCE)]
    if audited:
        print(f"{len(audited)} cases of the fact audit left out (benchmarks/fact_audit.py)")
    reader = [second[c["id"]][0] for c in cases]
    first = [c.get("relabelled", {}).get("was", c["expect"]) for c in cases]
    now = [c["expect"] for c in cases]
    for name, labels in (("first labels", first), ("labels now", now)):
        agree = sum(x == y for x, y in zip(labels, reader, strict=True))
        share, k = agree / len(cases), cohen_kappa(labels, reader) or 0.0
        print(f"second reader against the {name}: {agree}/{len(cases)} agree", end=" ")
        print(f"({share:.3f}), κ {k:.3f}")
    relabelled = [c["id"] for c in cases if "relabelled" in c]
    print(f"relabelled under the policy: {len(relabelled)} ({' '.join(relabelled)})")
    print("still differing (label now / second reader, its point and reason):")
    for c, label in zip(cases, reader, strict=True):
        if c["expect"] != label:
            _, point, why = second[c["id"]]
            print(f"  {c['id']} {c['expect']} / {label} ({point}) {why}: {c['fact'][:80]}")


if __name__ == "__main__":
    main()
