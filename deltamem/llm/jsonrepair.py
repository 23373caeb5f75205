"""Recovering the complete part of a JSON reply cut off by the token limit.

A constrained decoder only ever emits a valid *prefix* of the schema; when it
runs out of tokens the reply is that prefix. We keep every array element and
object member that was finished and close what is still open, so the finished
operations of a long reply are not thrown away with the unfinished last one.

The unfinished part is DROPPED, never completed: a memory cut at "Alice is 3"
(of "Alice is 35") must not be stored. That is why this stays hand-written rather
than calling the `json-repair` package: json-repair completes what is open
(`{"ops": [{"content": "Alice is 3` → `{"ops": [{"content": "Alice is 3"}]}`,
`{"a": 1` → `{"a": 1}`, `{"ops": [{"op": "ad` → `{"ops": [{"op": "ad"}]}`), and a
wrapper cannot drop the right part afterwards without knowing where the last
finished element ended, at whatever depth the cut fell, which is all this
function computes (tests/test_llm.py holds the cases).
"""

from __future__ import annotations

import json
from typing import Any


def close_truncated(text: str) -> Any | None:
    """Parse the longest well-formed cut of `text`, or None if there is none."""
    stack: list[str] = []
    in_string = escaped = False
    cut: tuple[int, list[str]] | None = None  # (end index, open brackets) at last safe point
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                if stack and stack[-1] == "]":  # a string element of an array is done
                    cut = (i + 1, list(stack))
            continue
        if ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            if not stack:
                return None
            stack.pop()
            if not stack:  # the whole value is complete: what follows it is not JSON
                cut = (i + 1, [])
                break
            cut = (i + 1, list(stack))  # an element just closed: a safe place to stop
    if cut is None:
        return None
    end, still_open = cut
    candidate = text[:end] + "".join(reversed(still_open))
    try:
        return json.loads(candidate)
    except json.JSONDecodeError:
        return None
