"""Adapter for the real mem0 (the `mem0ai` package, open-source edition).

mem0 speaks the OpenAI API, so this adapter serves our LLM and embedder on a
loopback OpenAI-compatible endpoint (`deltamem.server.openai_compat`) and points
mem0's ``openai`` LLM and embedder providers at it: mem0 runs on the very model
and embeddings the other systems use, and its calls are counted in the same
usage. Its vector store is a local Qdrant directory, its history a SQLite file,
both under the run's work directory.

What mem0 (2.2.x OSS) does on `add`: one extraction call (a ~7,900-token fixed
system prompt, then the new messages, the user's last messages and the 10 most
similar existing memories), and only ADDs (its open-source write path no longer
updates or deletes). It takes no session timestamp (``timestamp=`` is
platform-only), so its memories carry the time they were written.

Its model gets its own engine with a long context (the prompt does not fit in
8k tokens); the fixed system prompt then stays in that engine's KV cache from one
session to the next. Resume: which sessions were added is kept in
``mem0_sessions.jsonl`` beside mem0's own files, so a resumed run does not add a
session twice (a crash between mem0's write and that record can, once).
"""

from __future__ import annotations

import json
import os
from datetime import datetime
from pathlib import Path
from typing import Any

from deltamem.bench.systems.base import REPORTED_KEYS, MemorySystem, Retrieved
from deltamem.embed import Embedder
from deltamem.llm.base import LLM

MEM0_CONTEXT = 24576  # fixed prompt ~7.9k + long session + 2k of output
ADDED = "mem0_sessions.jsonl"


class Mem0Unavailable(RuntimeError):
    pass


def _telemetry_off() -> None:
    """mem0 reads MEM0_TELEMETRY once, at import: if something imported it before
    the variable was set, switch its flag off too (no event may leave the machine)."""
    import sys

    for name in ("mem0.memory.telemetry", "mem0.memory.main"):
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "MEM0_TELEMETRY"):
            module.__dict__["MEM0_TELEMETRY"] = False


class Mem0System(MemorySystem):
    name = "mem0"

    def __init__(self, llm: LLM, embedder: Embedder, workdir: Path, max_tokens: int = 2000) -> None:
        os.environ.setdefault("MEM0_TELEMETRY", "False")  # nothing leaves the machine
        try:
            from mem0 import Memory as Mem0Memory
        except ImportError as exc:
            raise Mem0Unavailable(
                "the mem0 system needs the mem0ai package: pip install 'deltamem[mem0]'"
            ) from exc
        _telemetry_off()
        from deltamem.server.openai_compat import LoopbackOpenAI

        own = llm.with_context(MEM0_CONTEXT)
        super().__init__(own)
        self._owns_llm = own is not llm
        workdir.mkdir(parents=True, exist_ok=True)
        self.server = LoopbackOpenAI(own, embedder, purpose="mem0")
        url = self.server.base_url
        config = {
            "llm": {
                "provider": "openai",
                "config": {
                    "model": own.name,
                    "openai_base_url": url,
                    "api_key": "loopback",
                    "temperature": 0.0,
                    "max_tokens": max_tokens,
                },
            },
            "embedder": {
                "provider": "openai",
                "config": {
                    "model": embedder.name,
                    "openai_base_url": url,
                    "api_key": "loopback",
                    "embedding_dims": embedder.dim,
                },
            },
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "path": str(workdir / "qdrant"),
                    "collection_name": "bench",
                    "embedding_model_dims": embedder.dim,
                    "on_disk": True,
                },
            },
            "history_db_path": str(workdir / "history.db"),
        }
        try:
            self.mem0 = Mem0Memory.from_config(config)
        except Exception:
            self.server.close()
            raise
        # mem0 builds a stock OpenAI client: 600 s timeout, 2 retries. Its first call
        # (~8k prompt tokens) ran 734 s on two cores, the client gave up and sent it
        # again, and the loopback did the work twice. Wait as long as our LLM may
        # take; don't resend (an LLM failure comes back as a 502 and fails the session).
        client = getattr(self.mem0.llm, "client", None)
        if client is not None and hasattr(client, "with_options"):
            wait = own.timeout * (own.retries + 1) + 60
            self.mem0.llm.client = client.with_options(timeout=wait, max_retries=0)
        self._added_path = workdir / ADDED
        self._added: dict[tuple[str, str], list[str]] = {}
        if self._added_path.exists():
            for line in self._added_path.read_text(encoding="utf-8").splitlines():
                try:
                    row = json.loads(line)
                    self._added[(row["user"], row["session"])] = list(row["memories"])
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last line

    def _reset(self, user: str) -> None:
        self.mem0.delete_all(user_id=user)
        self._added = {k: v for k, v in self._added.items() if k[0] != user}
        self._added_path.write_text(
            "".join(
                json.dumps({"user": u, "session": s, "memories": m}) + "\n"
                for (u, s), m in self._added.items()
            ),
            encoding="utf-8",
        )

    def _add_session(
        self,
        user: str,
        session_id: str,
        messages: list[dict[str, Any]],
        timestamp: datetime | None,
    ) -> dict[str, float] | None:
        if (user, session_id) in self._added:  # added before a resume: nothing spent now
            return {k: 0 for k in REPORTED_KEYS if k != "session_tokens"}
        chat = [
            {"role": m.get("role", "user"), "content": str(m.get("content", ""))}
            for m in messages
            if str(m.get("content", "")).strip()
        ]
        result = self.mem0.add(chat, user_id=user, metadata={"session_id": session_id})
        written = [
            str(r.get("memory", ""))
            for r in (result or {}).get("results", [])
            if r.get("event") in ("ADD", "UPDATE") and r.get("memory")
        ]
        self._added[(user, session_id)] = written
        with self._added_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"user": user, "session": session_id, "memories": written}) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        return {"memories_stored": len(written)}

    def _session_memories(self, user: str, session_id: str) -> list[str]:
        return list(self._added.get((user, session_id), []))

    def _search(self, user: str, query: str, k: int) -> list[Retrieved]:
        # threshold 0: plain top-k, as the other systems are probed
        found = self.mem0.search(query, top_k=k, filters={"user_id": user}, threshold=0.0)
        out = []
        for r in (found or {}).get("results", [])[:k]:
            meta = r.get("metadata") or {}
            out.append(
                Retrieved(
                    text=str(r.get("memory", "")),
                    timestamp=None,
                    session_id=meta.get("session_id"),
                    turns=[],
                    score=float(r.get("score") or 0.0),
                )
            )
        return out

    def close(self) -> None:
        try:
            client = getattr(getattr(self.mem0, "vector_store", None), "client", None)
            if client is not None:
                client.close()  # the local Qdrant holds a lock on its directory
            self.server.close()
        finally:
            if self._owns_llm and hasattr(self.llm, "close"):
                self.llm.close()  # type: ignore[union-attr]
