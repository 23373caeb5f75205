"""Tools an agent can call: remember, recall, answer from memory.

    tools = memory_tools(memory)
    agent = create_react_agent(model, tools)
    agent.invoke({"messages": [...]}, {"configurable": {"user_id": "martin"}})

Each tool reads the user from the run's config (``config["configurable"]["user_id"]``),
which LangChain passes to a tool's ``config`` parameter and keeps out of the schema
the model sees: the model writes only the text (what to remember, what to look
for), so it cannot reach another user's memory by naming them. A run without a
user in its config fails (`MissingUser`) instead of falling back to anyone.
"""

from __future__ import annotations

from datetime import UTC, datetime

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool

from deltamem.integrations.langgraph.common import (
    USER_KEY,
    MemoryLike,
    Writer,
    both,
    describe,
    hit_line,
    user_of,
)
from deltamem.memory import InvalidSession, SessionFailed
from deltamem.retrieval.hybrid import Tiers
from deltamem.store.base import SessionConflict
from deltamem.types import AddResult, SearchHit

REMEMBER = (
    "Save something the user told you about themselves (their life, plans, "
    "preferences, people) to long-term memory, in the user's own words, first person, "
    "with any date they gave: e.g. 'I moved to Oslo in May.' Later conversations "
    "recall it; a newer statement updates an older one."
)
RECALL = (
    "Search long-term memory about the user. Returns facts ([fact]) and excerpts of "
    "earlier conversations ([episode]), each dated; where they disagree the newer "
    "one is right. Ask in plain words, e.g. 'Where does the user live?'"
)
ANSWER = (
    "Answer a question about the user from long-term memory alone: the memory's own "
    "model reads the relevant facts and conversation excerpts and answers, or says it "
    "does not know."
)


def _remembered(result: AddResult | Exception) -> str:
    if isinstance(result, SessionFailed):
        return f"Kept, but not turned into facts yet: {result}"
    if isinstance(result, Exception):
        return f"Could not remember that: {result}"
    return describe(result)


def remember_tool(
    memory: MemoryLike | Writer,
    *,
    user_key: str = USER_KEY,
    agent_id: str | None = None,
    infer: bool = True,
    background: bool = False,
    name: str = "remember",
) -> BaseTool:
    """A tool that adds what the model passes as a one-message session of the user
    (`Memory.add`: the manager turns it into facts, updating older ones). `infer`,
    `background`: see `Writer` (or pass a `Writer` to share its background thread)."""
    writer = (
        memory
        if isinstance(memory, Writer)
        else Writer(memory, infer=infer, background=background, agent_id=agent_id)
    )

    def remember(content: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        try:
            result: AddResult | Exception = writer.write(
                [{"role": "user", "content": content}], user_id=user, session_id=None
            )
        except (InvalidSession, SessionConflict, SessionFailed) as exc:
            result = exc
        return _remembered(result)

    async def aremember(content: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        try:
            result: AddResult | Exception = await writer.awrite(
                [{"role": "user", "content": content}], user_id=user, session_id=None
            )
        except (InvalidSession, SessionConflict, SessionFailed) as exc:
            result = exc
        return _remembered(result)

    return StructuredTool.from_function(
        func=remember, coroutine=aremember, name=name, description=REMEMBER
    )


def _found(hits: list[SearchHit]) -> str:
    return "\n".join(hit_line(h) for h in hits) if hits else "Nothing in memory about that."


def recall_tool(
    memory: MemoryLike,
    *,
    user_key: str = USER_KEY,
    agent_id: str | None = None,
    limit: int = 10,
    tiers: Tiers = "all",
    name: str = "recall",
) -> BaseTool:
    """A tool that searches the user's memory (facts and episodes, fused, best first)."""
    sync, amem = both(memory)

    def recall(query: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        return _found(sync.search(query, user_id=user, limit=limit, agent_id=agent_id, tiers=tiers))

    async def arecall(query: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        return _found(
            await amem.search(query, user_id=user, limit=limit, agent_id=agent_id, tiers=tiers)
        )

    return StructuredTool.from_function(
        func=recall, coroutine=arecall, name=name, description=RECALL
    )


def answer_tool(
    memory: MemoryLike,
    *,
    user_key: str = USER_KEY,
    agent_id: str | None = None,
    limit: int = 20,
    name: str = "answer_from_memory",
) -> BaseTool:
    """A tool that answers a question from the user's memory (`Memory.answer`, with
    today's date, so "how long ago" questions can be answered)."""
    sync, amem = both(memory)

    def answer_from_memory(question: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        now = datetime.now(UTC)
        return sync.answer(
            question, user_id=user, agent_id=agent_id, limit=limit, asked_at=now
        ).text

    async def aanswer_from_memory(question: str, config: RunnableConfig) -> str:
        user = user_of(config, user_key)
        now = datetime.now(UTC)
        answer = await amem.answer(
            question, user_id=user, agent_id=agent_id, limit=limit, asked_at=now
        )
        return answer.text

    return StructuredTool.from_function(
        func=answer_from_memory, coroutine=aanswer_from_memory, name=name, description=ANSWER
    )


def memory_tools(
    memory: MemoryLike,
    *,
    user_key: str = USER_KEY,
    agent_id: str | None = None,
    limit: int = 10,
    infer: bool = True,
    background: bool = False,
    writer: Writer | None = None,
) -> list[BaseTool]:
    """The three tools, on one memory: ``remember``, ``recall``, ``answer_from_memory``.
    `infer`, `background`: how ``remember`` writes (see `Writer`); or pass the `writer`
    to use (e.g. a `SaveTurns` node's, ``save.writer``, to share its background thread
    and `flush()` both at once)."""
    writer = writer or Writer(memory, infer=infer, background=background, agent_id=agent_id)
    return [
        remember_tool(writer, user_key=user_key),
        recall_tool(memory, user_key=user_key, agent_id=agent_id, limit=limit),
        answer_tool(memory, user_key=user_key, agent_id=agent_id),
    ]
