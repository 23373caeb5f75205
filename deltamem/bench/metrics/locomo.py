"""LoCoMo answer metrics, as the benchmark's own evaluation computes them.

Normalisation: lowercase, drop commas and punctuation, drop the words a / an /
the / and, collapse spaces; tokens are Porter-stemmed. Per category:
1 (multi-hop): the answer and the prediction are split on commas; each gold
part takes its best F1 against the prediction parts, and parts are averaged;
3 (open-domain): only the gold text before the first ";" counts;
2, 4: plain token F1;
5 (adversarial): correct when the prediction says the information is not
available ("no information available" / "not mentioned"); reported apart from
the headline numbers.
BLEU-1 is the clipped unigram precision times the brevity penalty over the
same normalised tokens (unstemmed).
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

from deltamem.bench.metrics.common import mean
from deltamem.porter import stem

_ARTICLES = re.compile(r"\b(a|an|the|and)\b")
_PUNCT = str.maketrans("", "", string.punctuation)
ADVERSARIAL_PHRASES = ("no information available", "not mentioned")
HEADLINE_CATEGORIES = (1, 2, 3, 4)


def normalize_answer(text: str) -> str:
    text = str(text).replace(",", "").lower().translate(_PUNCT)
    return " ".join(_ARTICLES.sub(" ", text).split())


def tokens(text: str, stemmed: bool = True) -> list[str]:
    ws = normalize_answer(text).split()
    return [stem(w) for w in ws] if stemmed else ws


def token_f1(prediction: str, gold: str) -> float:
    p, g = tokens(prediction), tokens(gold)
    same = sum((Counter(p) & Counter(g)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def multi_f1(prediction: str, gold: str) -> float:
    """Category 1: mean over comma-separated gold parts of the best part F1."""
    preds = [p.strip() for p in str(prediction).split(",")]
    golds = [g.strip() for g in str(gold).split(",")]
    return sum(max(token_f1(p, g) for p in preds) for g in golds) / len(golds)


def adversarial_correct(prediction: str) -> float:
    low = prediction.lower()
    return 1.0 if any(p in low for p in ADVERSARIAL_PHRASES) else 0.0


def gold_for(category: int, answer: str) -> str:
    return answer.split(";")[0].strip() if category == 3 else answer


def answer_f1(prediction: str, answer: str | None, category: int) -> float:
    """The F1 of one QA under its category's rule."""
    if category == 5:
        return adversarial_correct(prediction)
    gold = gold_for(category, str(answer or ""))
    if category == 1:
        return multi_f1(prediction, gold)
    return token_f1(prediction, gold)


def bleu1(prediction: str, gold: str) -> float:
    p, g = tokens(prediction, stemmed=False), tokens(gold, stemmed=False)
    if not p or not g:
        return 0.0
    clipped = sum((Counter(p) & Counter(g)).values())
    bp = 1.0 if len(p) > len(g) else math.exp(1 - len(g) / len(p))
    return bp * clipped / len(p)


def evidence_recall(evidence: Sequence[str], reached: Iterable[str]) -> float | None:
    """Share of evidence turns among the turns the retrieved memories came from."""
    if not evidence:
        return None
    got = set(reached)
    return sum(e in got for e in evidence) / len(evidence)


def aggregate(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Records carry category, f1, bleu1, judge (bool or None), evidence_recall;
    None marks a number that does not apply or was not computed.

    Headline numbers cover categories 1–4; category 5 appears in by_category."""
    from deltamem.bench.datasets.locomo import CATEGORIES

    def summary(rs: Sequence[dict[str, Any]]) -> dict[str, Any]:
        judged = [float(bool(r["judge"])) for r in rs if r.get("judge") is not None]
        return {
            "n": len(rs),
            "f1": mean(r["f1"] for r in rs if r.get("f1") is not None),
            "bleu1": mean(r["bleu1"] for r in rs if r.get("bleu1") is not None),
            "judge": mean(judged),
            "evidence_recall": mean(
                r["evidence_recall"] for r in rs if r.get("evidence_recall") is not None
            ),
        }

    head = [r for r in records if r["category"] in HEADLINE_CATEGORIES]
    out = summary(head)
    out.pop("n")
    out["n"] = len(head)
    out["by_category"] = {
        CATEGORIES.get(c, str(c)): summary([r for r in records if r["category"] == c])
        for c in sorted({r["category"] for r in records})
    }
    return out
