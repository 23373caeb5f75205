"""Cost metrics from the per-session records of a run (both runners).

- `write_amplification` = prompt tokens the system's LLM read while adding
  sessions ÷ tokens of those sessions (how many times each dialogue token was
  read; cached prompt tokens count, `write_amplification_uncached` leaves them
  out);
- `qpm` = queries per memory (DeltaMem Table 7): queries the write path sent to
  its own memory search ÷ memories it stored (adds + updates). Mem0's pipeline
  searches once per extracted fact, so its qpm is ≥ 1; a system that never
  searches while writing has 0.
Plus per-session means and a by-session-index series (time and tokens per
session, for the report's plots).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

Record = dict[str, Any]


def _ratio(a: float, b: float) -> float | None:
    return a / b if b else None


def cost_metrics(records: Sequence[Record]) -> dict[str, Any]:
    sessions = [r for r in records if r.get("kind") == "session"]
    reads = [r for r in records if r.get("kind") in ("update", "question")]

    def total(key: str, rs: Sequence[Record] = sessions) -> float:
        return float(sum((r.get("cost") or {}).get(key, 0) or 0 for r in rs))

    n = len(sessions)
    session_tokens = total("session_tokens")
    prompt = total("prompt_tokens")
    cached = total("cached_tokens")
    search_seconds = float(sum(r.get("search_seconds", 0.0) or 0.0 for r in reads))
    by_index: dict[int, list[Record]] = {}
    for r in sessions:
        if isinstance(r.get("session"), int):
            by_index.setdefault(r["session"], []).append(r)
    by_session = [
        {
            "session": i,
            "n": len(rs),
            "add_seconds": total("add_seconds", rs) / len(rs),
            "prompt_tokens": total("prompt_tokens", rs) / len(rs),
            "completion_tokens": total("completion_tokens", rs) / len(rs),
            "session_tokens": total("session_tokens", rs) / len(rs),
            "llm_calls": total("llm_calls", rs) / len(rs),
        }
        for i, rs in sorted(by_index.items())
    ]
    return {
        "sessions": n,
        "session_tokens": session_tokens,
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "completion_tokens": total("completion_tokens"),
        "llm_calls": total("llm_calls"),
        "search_queries": total("search_queries"),
        "memories_stored": total("memories_stored"),
        "llm_calls_per_session": _ratio(total("llm_calls"), n),
        "prompt_tokens_per_session": _ratio(prompt, n),
        "completion_tokens_per_session": _ratio(total("completion_tokens"), n),
        "session_tokens_per_session": _ratio(session_tokens, n),
        "add_seconds_per_session": _ratio(total("add_seconds"), n),
        "write_amplification": _ratio(prompt, session_tokens),
        "write_amplification_uncached": _ratio(prompt - cached, session_tokens),
        "qpm": _ratio(total("search_queries"), total("memories_stored")),
        "add_seconds": total("add_seconds"),
        "llm_seconds": total("llm_seconds"),
        "read_searches": len(reads),
        "search_seconds": search_seconds,
        "seconds_per_search": _ratio(search_seconds, len(reads)),
        "by_session": by_session,
    }
