"""What the SQLite store offers people looking at a memory (the inspector): a
hand edit recorded in the memory's history, the users it holds, and the model
calls each session cost. A mixin of `SQLiteStore`, which owns the connection."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import TYPE_CHECKING

import numpy as np

from deltamem.llm.base import CallRecord
from deltamem.store.common import check_embedding
from deltamem.store.rows import stored_agent
from deltamem.types import Operation, utcnow


def call_of(r: sqlite3.Row) -> CallRecord:
    return CallRecord(
        purpose=r["purpose"],
        model=r["model"],
        prompt_tokens=r["prompt_tokens"],
        completion_tokens=r["completion_tokens"],
        cached_tokens=r["cached_tokens"],
        seconds=r["seconds"],
        ok=bool(r["ok"]),
        error=r["error"],
        at=datetime.fromisoformat(r["at"]),
        reply=r["reply"],
        user_id=r["user_id"],
        session_id=r["session_id"],
        agent_id=r["agent_id"] or None,
    )


class SQLiteInspection:
    if TYPE_CHECKING:  # provided by SQLiteStore, which owns the connection
        dim: int
        _tx: Callable[[], AbstractContextManager[sqlite3.Connection]]
        _read: Callable[..., list[sqlite3.Row]]
        _bump: Callable[[sqlite3.Connection, str], None]
        _log_history: Callable[..., None]
        _reindex_keywords: Callable[[sqlite3.Connection, int, str, list[str]], None]

    def edit(
        self,
        memory_id: str,
        content: str,
        embedding: np.ndarray,
        keywords: list[str],
        actor: str = "person",
    ) -> Operation | None:
        check_embedding(embedding, self.dim)
        now = utcnow().isoformat()
        with self._tx() as db:
            row = db.execute(
                "SELECT rowid, user_id, content, memory_type, turns FROM memories WHERE id=?",
                (memory_id,),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                """UPDATE memories SET content=?, keywords=?, updated_at=?, version=version+1,
                   embedding=? WHERE rowid=?""",
                (
                    content,
                    json.dumps(keywords),
                    now,
                    np.asarray(embedding, dtype=np.float32).tobytes(),
                    row["rowid"],
                ),
            )
            self._reindex_keywords(db, row["rowid"], content, keywords)
            self._log_history(
                db, memory_id, row["user_id"], "update", row["content"], content, None, actor, now
            )
            self._bump(db, row["user_id"])
        return Operation(
            op="update",
            memory_id=memory_id,
            content=content,
            old_content=row["content"],
            memory_type=row["memory_type"] or None,
            turns=json.loads(row["turns"]),
            note=f"edited by {actor}",
        )

    def list_users(self, prefix: str = "") -> list[str]:
        # substr, not LIKE: a prefix may hold '_' or '%'
        rows = self._read(
            """SELECT user_id FROM sessions WHERE substr(user_id, 1, ?) = ?
               UNION SELECT user_id FROM memories WHERE substr(user_id, 1, ?) = ?
               ORDER BY user_id""",
            (len(prefix), prefix, len(prefix), prefix),
        )
        return [r["user_id"] for r in rows]

    def session_calls(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        rows = self._read(
            """SELECT * FROM llm_calls WHERE user_id=? AND session_id=? AND agent_id=?
               ORDER BY id""",
            (user_id, session_id, stored_agent(agent_id)),
        )
        return [call_of(r) for r in rows]
