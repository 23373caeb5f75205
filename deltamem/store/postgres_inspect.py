"""What the PostgreSQL store offers people looking at a memory (the inspector): a
hand edit recorded in the memory's history, the users it holds, and the model
calls each session cost. A mixin of `PostgresStore`, which owns the connection."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

import numpy as np
import psycopg
from psycopg.types.json import Jsonb

from deltamem.llm.base import CallRecord
from deltamem.store.common import check_embedding
from deltamem.store.pg_sql import bump_search_version, fold, vector_literal
from deltamem.store.rows import stored_agent
from deltamem.types import Operation, utcnow

Row = dict[str, Any]


def call_of(r: Row) -> CallRecord:
    return CallRecord(
        purpose=r["purpose"],
        model=r["model"],
        prompt_tokens=r["prompt_tokens"],
        completion_tokens=r["completion_tokens"],
        cached_tokens=r["cached_tokens"],
        seconds=r["seconds"],
        ok=bool(r["ok"]),
        error=r["error"],
        at=r["at"],
        reply=r["reply"],
        user_id=r["user_id"],
        session_id=r["session_id"],
        agent_id=r["agent_id"] or None,
    )


class PostgresInspection:
    if TYPE_CHECKING:  # provided by PostgresStore
        dim: int
        _tx: Callable[[], AbstractContextManager[psycopg.Cursor[Row]]]
        _read: Callable[..., list[Row]]
        _log_history: Callable[..., None]

    def edit(
        self,
        memory_id: str,
        content: str,
        embedding: np.ndarray,
        keywords: list[str],
        actor: str = "person",
    ) -> Operation | None:
        check_embedding(embedding, self.dim)
        if "\x00" in memory_id:  # no stored id holds one (see pg_sql.holds_nul)
            return None
        now = utcnow()
        with self._tx() as cur:
            row = cur.execute(
                """SELECT user_id, content, memory_type, turns FROM memories WHERE id=%s
                   FOR UPDATE""",
                (memory_id,),
            ).fetchone()
            if row is None:
                return None
            cur.execute(
                """UPDATE memories SET content=%s, keywords=%s, updated_at=%s,
                   version=version+1, embedding=%s::vector, fts_text=%s WHERE id=%s""",
                (
                    content,
                    Jsonb(keywords),
                    now,
                    vector_literal(embedding),
                    fold(" ".join([content, *keywords])),
                    memory_id,
                ),
            )
            self._log_history(
                cur, memory_id, row["user_id"], "update", row["content"], content, None, actor, now
            )
            bump_search_version(cur, row["user_id"], "memories")
        return Operation(
            op="update",
            memory_id=memory_id,
            content=content,
            old_content=row["content"],
            memory_type=row["memory_type"] or None,
            turns=list(row["turns"]),
            note=f"edited by {actor}",
        )

    def list_users(self, prefix: str = "") -> list[str]:
        # left(), not LIKE: a prefix may hold '_' or '%'
        rows = self._read(
            """SELECT user_id FROM (
                   SELECT user_id FROM sessions WHERE left(user_id, %s) = %s
                   UNION SELECT user_id FROM memories WHERE left(user_id, %s) = %s
               ) AS u ORDER BY user_id COLLATE "C" """,
            (len(prefix), prefix, len(prefix), prefix),
        )
        return [r["user_id"] for r in rows]

    def session_calls(
        self, user_id: str, session_id: str, agent_id: str | None = None
    ) -> list[CallRecord]:
        rows = self._read(
            """SELECT * FROM llm_calls WHERE user_id=%s AND session_id=%s AND agent_id=%s
               ORDER BY id""",
            (user_id, session_id, stored_agent(agent_id)),
        )
        return [call_of(r) for r in rows]
