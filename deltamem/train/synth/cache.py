"""The on-disk cache of a synthesis run: one JSONL file per persona, one line per
step (profile, a batch of events, the anchor thread, and per event its
operations, dialogue and questions), kept or dropped. A resumed run replays the
lines it finds and generates only the steps that have none; a line cut short by
a crash is ignored (its step runs again)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Entry:
    """One step's outcome. `value` is the kept reply (after pruning) when `ok`;
    `refusals` are the reasons of the generations the checks refused, `pruned` the
    parts of the kept one that were dropped, `reason` why a dropped step was."""

    key: str
    ok: bool
    value: dict[str, Any] | None = None
    refusals: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    reason: str | None = None
    seconds: float = 0.0

    @property
    def step(self) -> str:
        return self.key.split(":", 1)[0]


class Cache:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._entries: dict[str, Entry] = {}
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if text and not text.endswith("\n"):  # a line torn by a crash: drop it
                text = text[: text.rfind("\n") + 1]
                path.write_text(text, encoding="utf-8")
            for line in text.splitlines():
                try:
                    row = json.loads(line)
                    entry = Entry(**row)
                except (json.JSONDecodeError, TypeError):
                    continue  # unreadable: that step runs again
                self._entries[entry.key] = entry

    def get(self, key: str) -> Entry | None:
        return self._entries.get(key)

    def put(self, entry: Entry) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(asdict(entry), ensure_ascii=False) + "\n")
        self._entries[entry.key] = entry

    def entries(self) -> list[Entry]:
        return list(self._entries.values())
