"""The results log: one JSON record per evaluated item, appended and flushed as it
is produced, so a crash loses at most the item in flight. Every record has a
unique `key`; a resumed run skips keys already present."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

RESULTS = "results.jsonl"
JUDGMENTS = "judgments.jsonl"
LOCK = ".lock"


class RunDirBusy(RuntimeError):
    """Another bench process holds the run directory."""


@contextmanager
def exclusive_run(out: Path) -> Iterator[None]:
    """Hold OUT for one bench process: two runs appending to the same results,
    call log and caches would interleave their records. The lock is an advisory
    flock, so it goes away with the process however that ends."""
    out.mkdir(parents=True, exist_ok=True)
    fh = (out / LOCK).open("a+", encoding="utf-8")
    try:
        try:
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            raise RunDirBusy(
                f"{out} is in use by another bench run (pid {holder}); "
                "wait for it or choose another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(str(os.getpid()))
        fh.flush()
        yield
    finally:
        fh.close()


def read_records(path: Path) -> Iterator[dict[str, Any]]:
    """Records of a results file; a torn last line (crash mid-write) is ignored."""
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(rec, dict):
                yield rec


def judged_records(out: Path) -> list[dict[str, Any]]:
    """A run's records, each with the verdict fields its judges stored for its key
    in OUT/judgments.jsonl (HaluMem's judges write there, not into the records)."""
    judged: dict[str, dict[str, Any]] = {}
    for j in read_records(out / JUDGMENTS):
        judged.setdefault(str(j["key"]), {}).update(j.get("fields", {}))
    return [r | judged.get(str(r.get("key")), {}) for r in read_records(out / RESULTS)]


class ResultLog:
    def __init__(self, path: Path, resume: bool = False) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self.done: set[str] = set()
        if resume:
            self.done = {str(r["key"]) for r in read_records(path) if "key" in r}
            self._drop_torn_tail()
        else:
            path.write_text("", encoding="utf-8")
        self._fh = path.open("a", encoding="utf-8")

    def _drop_torn_tail(self) -> None:
        if not self.path.exists():
            return
        data = self.path.read_bytes()
        if data and not data.endswith(b"\n"):
            self.path.write_bytes(data[: data.rfind(b"\n") + 1])

    def has(self, key: str) -> bool:
        return key in self.done

    def write(self, record: dict[str, Any]) -> None:
        key = str(record["key"])
        if key in self.done:
            return
        self._fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        self._fh.flush()
        os.fsync(self._fh.fileno())
        self.done.add(key)

    def records(self) -> list[dict[str, Any]]:
        return list(read_records(self.path))

    def close(self) -> None:
        self._fh.close()


CALLS = "llm_calls.jsonl"
USAGE = "llm_usage.json"


def log_calls(llm: Any, out: Path) -> None:
    """Append every call `llm` makes to OUT/llm_calls.jsonl (purpose, tokens, KV-cache
    hits, seconds, and the raw reply, or the error): the raw material for what the
    judges cost, how much the prompt prefix cache saved, and what a system's model
    actually answered before any parsing."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / CALLS

    def write(rec: Any) -> None:
        row = {
            "purpose": rec.purpose,
            "model": rec.model,
            "prompt_tokens": rec.prompt_tokens,
            "cached_tokens": rec.cached_tokens,
            "completion_tokens": rec.completion_tokens,
            "seconds": round(rec.seconds, 3),
            "ok": rec.ok,
            "at": rec.at.isoformat(),
            "error": rec.error,
            "reply": rec.reply,
        }
        with path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(row) + "\n")

    llm.on_call(write)


def usage_summary(out: Path) -> dict[str, dict[str, float]]:
    """Per call purpose: calls, prompt / cached / completion tokens, seconds and the
    share of prompt tokens served from the KV cache."""
    groups: dict[str, dict[str, float]] = {}
    for r in read_records(out / CALLS):
        g = groups.setdefault(
            str(r.get("purpose")),
            {
                "calls": 0,
                "prompt_tokens": 0,
                "cached_tokens": 0,
                "completion_tokens": 0,
                "seconds": 0.0,
            },
        )
        g["calls"] += 1
        for k in ("prompt_tokens", "cached_tokens", "completion_tokens", "seconds"):
            g[k] += float(r.get(k) or 0)
    for g in groups.values():
        g["cached_share"] = g["cached_tokens"] / g["prompt_tokens"] if g["prompt_tokens"] else 0.0
        g["seconds_per_call"] = g["seconds"] / g["calls"] if g["calls"] else 0.0
    return groups


def write_usage(out: Path) -> None:
    """OUT/llm_usage.json from OUT/llm_calls.jsonl, when calls were logged."""
    if (out / CALLS).exists():
        (out / USAGE).write_text(json.dumps(usage_summary(out), indent=2), encoding="utf-8")
