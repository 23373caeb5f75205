"""Graph nodes: recall the user's memories before the model call, save the finished
turns after it.

    builder = StateGraph(MemoryState)
    builder.add_node("recall", RecallMemories(memory))
    builder.add_node("chat", chat)          # reads state["llm_input_messages"]
    builder.add_node("save", SaveTurns(memory, background=True))
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "chat")
    builder.add_edge("chat", "save")
    graph = builder.compile(checkpointer=InMemorySaver())
    graph.invoke({"messages": [...]}, {"configurable": {"user_id": "martin", "thread_id": "1"}})

Both follow LangGraph's conventions for the prebuilt agent, so they also serve as
its hooks: ``create_react_agent(model, tools, pre_model_hook=RecallMemories(memory),
post_model_hook=SaveTurns(memory))``. The recalled memories reach the model as
``llm_input_messages`` (a system message ahead of the conversation), which the
thread's history never keeps: each turn recalls afresh, for its own question.

Each node works in sync and async graphs; given an `AsyncMemory` (or a `Memory`,
wrapped in one) the async path never blocks the event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AnyMessage, BaseMessage, SystemMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.graph import MessagesState

from deltamem.integrations.langgraph.common import (
    MEMORY_HEADER,
    USER_KEY,
    MemoryLike,
    Writer,
    both,
    last_human_text,
    memory_prompt,
    messages_of,
    session_id_for,
    thread_of,
    turns_of,
    user_of,
)
from deltamem.retrieval.hybrid import Tiers
from deltamem.types import SearchHit


class MemoryState(MessagesState):
    """`MessagesState` plus the model's input with the recalled memories, which
    `RecallMemories` writes and the model node reads; it is not part of the
    conversation (each turn overwrites it)."""

    llm_input_messages: list[AnyMessage]


def with_memories(messages: Sequence[BaseMessage], prompt: str | None) -> list[BaseMessage]:
    """The messages with `prompt` as system message ahead of them, merged into the
    conversation's own system prompt when it has one (small models' chat templates
    read one system message, first)."""
    messages = list(messages)
    if prompt is None:
        return messages
    if messages and isinstance(messages[0], SystemMessage) and isinstance(messages[0].content, str):
        first = messages[0]
        merged = SystemMessage(content=f"{first.content}\n\n{prompt}", id=first.id)
        return [merged, *messages[1:]]
    return [SystemMessage(content=prompt), *messages]


class RecallMemories(RunnableLambda):
    """Node: search the user's memory with their last message and put what it finds,
    labelled facts and dated conversation excerpts, in a system message ahead of the
    conversation, as ``{output_key: [system, *messages]}`` (``llm_input_messages``).

    The user is ``config["configurable"][user_key]``; `tiers` ("all", "facts",
    "episodes") and `limit` narrow the search."""

    def __init__(
        self,
        memory: MemoryLike,
        *,
        limit: int = 10,
        tiers: Tiers = "all",
        agent_id: str | None = None,
        user_key: str = USER_KEY,
        header: str = MEMORY_HEADER,
        messages_key: str = "messages",
        output_key: str = "llm_input_messages",
        name: str = "recall_memories",
    ) -> None:
        self.memory, self.amemory = both(memory)
        self.limit = limit
        self.tiers: Tiers = tiers
        self.agent_id = agent_id
        self.user_key = user_key
        self.header = header
        self.messages_key = messages_key
        self.output_key = output_key
        super().__init__(self._recall, afunc=self._arecall, name=name)

    def _update(self, messages: list[BaseMessage], hits: list[SearchHit]) -> dict[str, Any]:
        return {self.output_key: with_memories(messages, memory_prompt(hits, self.header))}

    def _recall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = user_of(config, self.user_key)
        messages = messages_of(state, self.messages_key)
        query = last_human_text(messages)
        hits = (
            self.memory.search(
                query, user_id=user, limit=self.limit, agent_id=self.agent_id, tiers=self.tiers
            )
            if query
            else []
        )
        return self._update(messages, hits)

    async def _arecall(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = user_of(config, self.user_key)
        messages = messages_of(state, self.messages_key)
        query = last_human_text(messages)
        hits = (
            await self.amemory.search(
                query, user_id=user, limit=self.limit, agent_id=self.agent_id, tiers=self.tiers
            )
            if query
            else []
        )
        return self._update(messages, hits)


class SaveTurns(RunnableLambda):
    """Node: hand the conversation's finished turns not yet saved to memory, one
    session per turn (`Memory.add`), then return no state update.

    A turn is a human message and the replies that followed it; it is finished when
    the assistant's last message calls no tool, so in an agent loop the node can run
    after every model call and saves each turn once, when it is done. Its session id
    is ``"{thread_id}:{id of the human message}"``: saving again is a no-op, so the
    node keeps no state of its own; it walks back from the newest turn to the first
    one memory already has (at most `max_turns`).

    `infer`, `background`: see `Writer` (with the embedded model, ``background=True``
    keeps the graph from waiting on the manager; the turn's words are searchable at
    once). `flush()` waits for the background work, `close()` stops it."""

    def __init__(
        self,
        memory: MemoryLike,
        *,
        infer: bool = True,
        background: bool = False,
        agent_id: str | None = None,
        user_key: str = USER_KEY,
        messages_key: str = "messages",
        max_turns: int = 20,
        name: str = "save_turns",
    ) -> None:
        self.writer = Writer(memory, infer=infer, background=background, agent_id=agent_id)
        self.agent_id = agent_id
        self.user_key = user_key
        self.messages_key = messages_key
        self.max_turns = max_turns
        super().__init__(self._save, afunc=self._asave, name=name)

    def unsaved(
        self, messages: Sequence[BaseMessage], user_id: str, thread: str
    ) -> list[tuple[str, list[dict[str, Any]]]]:
        """(session id, messages) of the finished turns memory does not have, oldest
        first."""
        store = self.writer.memory.store
        todo: list[tuple[str, list[dict[str, Any]]]] = []
        for turn in reversed(turns_of(messages)):
            if not turn.finished or not turn.messages:
                continue
            sid = session_id_for(thread, turn.anchor)
            if store.get_session(user_id, sid, self.agent_id) is not None:
                break
            todo.append((sid, turn.messages))
            if len(todo) >= self.max_turns:
                break
        return todo[::-1]

    def _save(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = user_of(config, self.user_key)
        messages = messages_of(state, self.messages_key)
        for sid, session in self.unsaved(messages, user, thread_of(config)):
            self.writer.write(session, user_id=user, session_id=sid)
        return {}

    async def _asave(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        user = user_of(config, self.user_key)
        messages = messages_of(state, self.messages_key)
        todo = await asyncio.to_thread(self.unsaved, messages, user, thread_of(config))
        for sid, session in todo:
            await self.writer.awrite(session, user_id=user, session_id=sid)
        return {}

    def flush(self, timeout: float | None = None) -> bool:
        """Wait for the turns handed to the background thread so far."""
        return self.writer.flush(timeout)

    def close(self) -> None:
        self.writer.close()
