"""The results log: one JSON record per evaluated item, appended and flushed as it
is produced, so a crash loses at most the item in flight. Every record has a
unique `key`; a resumed run skips keys already present."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

RESULTS = "results.jsonl"


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
