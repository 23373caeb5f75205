"""A judge: rubric + item template → schema-constrained verdict, cached."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from pathlib import Path
from string import Template
from typing import Any

from deltamem.llm.base import LLM

PROMPTS = Path(__file__).parent / "prompts"
CACHE = "judge_cache.sqlite"


class JudgeCache:
    """Verdicts by content hash (model, messages, schema) in one SQLite file, so a
    re-run or a resumed run never pays twice for the same judgement."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, check_same_thread=False)
        self._db.execute("CREATE TABLE IF NOT EXISTS verdicts (key TEXT PRIMARY KEY, value TEXT)")
        self._db.commit()
        self._lock = threading.Lock()

    @staticmethod
    def key(model: str, messages: list[dict[str, str]], schema: dict[str, Any]) -> str:
        blob = json.dumps([model, messages, schema], sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock:
            row = self._db.execute("SELECT value FROM verdicts WHERE key=?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, value: dict[str, Any]) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO verdicts (key, value) VALUES (?, ?)",
                (key, json.dumps(value, ensure_ascii=False)),
            )
            self._db.commit()

    def close(self) -> None:
        self._db.close()


def load_template(name: str) -> tuple[str, Template]:
    system = (PROMPTS / f"{name}.system.txt").read_text(encoding="utf-8").strip()
    item = Template((PROMPTS / f"{name}.item.txt").read_text(encoding="utf-8").strip())
    return system, item


def lines(items: list[str]) -> str:
    return "\n".join(f"- {x}" for x in items) if items else "(none)"


class Judge:
    """One rubric. `ask(**fields)` fills the item template and returns the parsed,
    schema-shaped reply (from the cache when the same question was asked before)."""

    def __init__(
        self, name: str, schema: dict[str, Any], llm: LLM, cache: JudgeCache, max_tokens: int = 200
    ) -> None:
        self.name, self.schema, self.llm, self.cache = name, schema, llm, cache
        self.max_tokens = max_tokens
        self.system, self.item = load_template(name)

    def messages(self, **fields: str) -> list[dict[str, str]]:
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.item.substitute(**fields)},
        ]

    def ask(self, **fields: str) -> dict[str, Any]:
        msgs = self.messages(**fields)
        key = JudgeCache.key(self.llm.name, msgs, self.schema)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        reply = self.llm.complete_json(
            msgs, self.schema, purpose=f"judge:{self.name}", max_tokens=self.max_tokens
        )
        self.cache.put(key, reply)
        return reply


def object_schema(**props: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"reason": {"type": "string"}, **props},
        "required": ["reason", *props],
        "additionalProperties": False,
    }


SCORE = {"type": "integer", "enum": [0, 1, 2]}
INTEGRITY = object_schema(score=SCORE)
ACCURACY = object_schema(score=SCORE, included={"type": "boolean"})
UPDATE = object_schema(
    verdict={"type": "string", "enum": ["correct", "hallucination", "omission", "other"]}
)
QA = object_schema(verdict={"type": "string", "enum": ["correct", "hallucination", "omission"]})
LOCOMO = object_schema(label={"type": "string", "enum": ["CORRECT", "WRONG"]})
