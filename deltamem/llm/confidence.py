"""How sure the model was of each string it wrote in a JSON reply.

A greedy reply is the model's best guess token by token; where it was unsure, the
chosen tokens had low probability. Averaged over the tokens of one string of the
reply (one fact of an extraction), that is the model's own confidence in the
string: on 180 of the fact audit's facts (those the two readers agree on that the
extractor wrote again), the extractor's mean token log-probability separates right
from wrong facts with an AUC of 0.75 (0.82 on the conversations it was first read
on, 0.77 on the other LoCoMo ones, 0.64 on HaluMem), where asking the same model
whether a fact holds scored 0.60 (docs/rules.md, "The extractor's own confidence").
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

# where `LLM.complete_json_many(confidence=True)` puts {string: mean log-probability}
CONFIDENCE_KEY = "_confidence"


def string_confidence(
    text: str, logprobs: Sequence[float], token_ends: Sequence[int], strings: Sequence[str]
) -> dict[str, float]:
    """The mean log-probability of the reply tokens that overlap each of `strings`
    as it is written in `text` (a JSON string literal, quotes and all, escaped as
    `json.dumps` escapes it), each found after the one before: the strings of a
    JSON reply in their order. A string not found (written with other escapes,
    `\\u00e9` for `é`), or a reply without token log-probabilities, gets no entry."""
    if not logprobs or len(logprobs) != len(token_ends):
        return {}
    raw = text.encode("utf-8", "surrogatepass")
    out: dict[str, float] = {}
    cursor = 0
    for string in strings:
        # the literal with its quotes ("act" is not inside "facts"), and not a key
        literal = json.dumps(string, ensure_ascii=False).encode("utf-8", "surrogatepass")
        at = raw.find(literal, cursor)
        while at >= 0 and raw[at + len(literal) :].lstrip().startswith(b":"):
            at = raw.find(literal, at + len(literal))
        if at < 0:
            continue
        cursor = at + len(literal)
        at, end = at + 1, cursor - 1  # the string's own bytes, between the quotes
        start = 0
        spans = []
        for lp, token_end in zip(logprobs, token_ends, strict=True):
            if token_end > at and start < end:  # the token's bytes overlap the string
                spans.append(lp)
            start = token_end
        if spans:
            out.setdefault(string, sum(spans) / len(spans))
    return out


def json_strings(value: Any) -> list[str]:
    """Every string value of a parsed JSON reply, in the order it was written."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in json_strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in json_strings(v)]
    return []


def reply_confidence(
    text: str, logprobs: Sequence[float], token_ends: Sequence[int], value: dict[str, Any]
) -> dict[str, float]:
    """{string: mean token log-probability} for the string values of `value`, the
    parsed form of the reply `text`; empty where the engine gave no log-probabilities."""
    return string_confidence(text, logprobs, token_ends, json_strings(value))
