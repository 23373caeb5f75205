"""Judge-free QA figures that work for facts and raw turns alike.

Evidence coverage: how much of a question's gold evidence the retrieved items
contain, by content words (stemmed, stopwords out, the person's name out, since
facts repeat it and raw turns say "I"). The cosine check at τ 0.75 that suits
extracted facts fails for raw turns, which are long and phrased otherwise.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from deltamem.porter import stem
from deltamem.text import terms


def content_words(text: str, skip: frozenset[str] = frozenset()) -> set[str]:
    return {stem(t) for t in terms(text, limit=10_000)} - skip


def evidence_coverage(
    evidence: Sequence[str], retrieved: Iterable[str], name: str | None = None
) -> float | None:
    """Mean over the evidence items of the share of their content words found in the
    retrieved items; None without evidence."""
    skip = frozenset(stem(t) for t in terms(name or ""))
    found = set().union(*(content_words(r, skip) for r in retrieved))
    shares = []
    for item in evidence:
        want = content_words(item, skip)
        if want:
            shares.append(len(want & found) / len(want))
    return sum(shares) / len(shares) if shares else None
