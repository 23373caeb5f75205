"""The LangGraph integration (deltamem[langgraph]): graph nodes, tools, the BaseStore
and the example graph, on a scripted deltamem LLM and a fake chat model."""

from __future__ import annotations

import asyncio
import importlib.util
import warnings
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph", reason="the langgraph extra is not installed")
pytest.importorskip("langchain_core", reason="the langgraph extra is not installed")

from fakes import ScriptedLLM, add, ops
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.store.base import BaseStore, InvalidNamespaceError
from langgraph.store.memory import InMemoryStore
from pydantic import Field

from deltamem.aio import AsyncMemory
from deltamem.integrations.langgraph import (
    DeltamemChatModel,
    DeltamemStore,
    MemoryState,
    MissingUser,
    RecallMemories,
    SaveTurns,
    memory_tools,
)
from deltamem.memory import Memory

MARTIN = {"configurable": {"user_id": "martin", "thread_id": "t1"}}
ALICE = {"configurable": {"user_id": "alice", "thread_id": "t9"}}
OSLO = "Martin lives in Oslo."


def config(user: str, thread: str = "t1") -> Any:
    return {"configurable": {"user_id": user, "thread_id": thread}}


class RecordingChat(GenericFakeChatModel):
    """A fake chat model that keeps what it was shown."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> Any:
        self.seen.append(list(messages))
        return super()._generate(messages, *args, **kwargs)


def chat_model(*replies: str) -> RecordingChat:
    return RecordingChat(messages=iter([AIMessage(r) for r in replies]))


def build(memory: Memory | AsyncMemory, model: RecordingChat, save: SaveTurns) -> Any:
    def chat(state: MemoryState) -> dict[str, Any]:
        return {"messages": [model.invoke(state.get("llm_input_messages") or state["messages"])]}

    async def achat(state: MemoryState) -> dict[str, Any]:
        messages = state.get("llm_input_messages") or state["messages"]
        return {"messages": [await model.ainvoke(messages)]}

    g = StateGraph(MemoryState)
    g.add_node("recall", RecallMemories(memory))
    g.add_node("chat", achat if isinstance(memory, AsyncMemory) else chat)
    g.add_node("save", save)
    g.add_edge(START, "recall")
    g.add_edge("recall", "chat")
    g.add_edge("chat", "save")
    g.add_edge("save", END)
    return g.compile(checkpointer=InMemorySaver())


def system_text(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if isinstance(m, SystemMessage))


# --- the nodes --------------------------------------------------------------------------
def test_a_turn_is_saved_after_the_model_and_recalled_before_it_in_a_new_thread(
    mem: Memory, llm: ScriptedLLM
) -> None:
    model = chat_model("Welcome to Oslo!", "You live in Oslo.", "Sure.")
    graph = build(mem, model, SaveTurns(mem))

    llm.push(ops(add(OSLO)))
    graph.invoke({"messages": [HumanMessage("I moved to Oslo last month.")]}, MARTIN)
    assert system_text(model.seen[0]) == ""  # nothing to recall yet
    assert [m.content for m in mem.get_all(user_id="martin")] == [OSLO]
    [session] = mem.store.list_sessions("martin")
    assert session.session_id.startswith("t1:")
    assert [(m.role, m.content) for m in session.messages] == [
        ("user", "I moved to Oslo last month."),
        ("assistant", "Welcome to Oslo!"),
    ]

    # a new conversation: the memory is recalled ahead of the model call
    llm.push(ops())
    out = graph.invoke({"messages": [HumanMessage("Where do I live?")]}, config("martin", "t2"))
    shown = model.seen[1]
    assert isinstance(shown[0], SystemMessage) and shown[1:] == out["messages"][:1]
    said = f"(said {session.timestamp.day} {session.timestamp:%B %Y})"
    assert f"Facts:\n- {OSLO} {said}" in shown[0].content
    # a dated excerpt, its "last month" written as the month meant on the day it was said
    month = (session.timestamp.replace(day=1) - timedelta(days=1)).strftime("%B %Y")
    assert f"user: I moved to Oslo in {month}. {said}" in shown[0].content
    # ... for the model only: the thread's history has no system message
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage]

    # the first thread goes on: only its new turn is saved
    llm.push(ops())
    graph.invoke({"messages": [HumanMessage("Can you remind me tomorrow?")]}, MARTIN)
    assert len(mem.store.list_sessions("martin")) == 3
    assert len(llm.requests) == 3  # one manager call per turn, none twice


def test_another_users_memory_is_never_recalled(mem: Memory, llm: ScriptedLLM) -> None:
    model = chat_model("Noted.", "I don't know where you live.")
    graph = build(mem, model, SaveTurns(mem, infer=False))
    graph.invoke({"messages": [HumanMessage("I moved to Oslo last month.")]}, MARTIN)
    graph.invoke({"messages": [HumanMessage("Where do I live? Oslo?")]}, ALICE)
    assert system_text(model.seen[1]) == ""
    assert {h.memory.user_id for h in mem.search("Oslo", user_id="alice")} == {"alice"}
    assert llm.requests == []  # infer=False: verbatim, no LLM call


def test_the_nodes_are_the_prebuilt_agents_hooks(mem: Memory, llm: ScriptedLLM) -> None:
    from langgraph.prebuilt import create_react_agent

    class ToolFreeChat(RecordingChat):
        def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
            return self

    model = ToolFreeChat(messages=iter([AIMessage("Welcome!"), AIMessage("Oslo.")]))
    with warnings.catch_warnings():  # moved to langchain.agents in LangGraph 1.0
        warnings.simplefilter("ignore", DeprecationWarning)
        agent = create_react_agent(
            model, [], pre_model_hook=RecallMemories(mem), post_model_hook=SaveTurns(mem)
        )
    llm.push(ops(add(OSLO)), ops())
    agent.invoke({"messages": [HumanMessage("I moved to Oslo.")]}, MARTIN)
    out = agent.invoke({"messages": [HumanMessage("Where do I live?")]}, config("martin", "t2"))
    assert OSLO in system_text(model.seen[1])
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage]


def test_a_run_without_a_user_fails_instead_of_guessing(mem: Memory) -> None:
    graph = build(mem, chat_model("Hi."), SaveTurns(mem))
    with pytest.raises(MissingUser, match="user_id"):
        graph.invoke({"messages": [HumanMessage("Hello")]}, {"configurable": {"thread_id": "x"}})


def test_background_save_is_searchable_at_once_and_facts_follow(
    mem: Memory, llm: ScriptedLLM
) -> None:
    save = SaveTurns(mem, background=True)
    graph = build(mem, chat_model("Welcome!"), save)
    llm.push(ops(add(OSLO)))
    graph.invoke({"messages": [HumanMessage("I moved to Oslo last month.")]}, MARTIN)
    # the turn's words at once (episodes), the facts once the background work is done
    assert [h.kind for h in mem.search("Oslo", user_id="martin", tiers="episodes")]
    assert save.flush(timeout=30)
    assert [m.content for m in mem.get_all(user_id="martin")] == [OSLO]
    [session] = mem.store.list_sessions("martin")
    assert session.status == "applied"
    save.close()


def test_an_unfinished_agent_turn_waits_for_the_final_answer(mem: Memory) -> None:
    save = SaveTurns(mem, infer=False)
    calling = AIMessage("", tool_calls=[{"name": "recall", "args": {"query": "x"}, "id": "c1"}])
    msgs: list[BaseMessage] = [HumanMessage("Where do I live?", id="h1"), calling]
    save.invoke({"messages": msgs}, MARTIN)
    assert mem.store.list_sessions("martin") == []
    msgs += [ToolMessage("Nothing.", tool_call_id="c1"), AIMessage("I don't know yet.")]
    save.invoke({"messages": msgs}, MARTIN)
    save.invoke({"messages": msgs}, MARTIN)  # again: a no-op
    [session] = mem.store.list_sessions("martin")
    assert session.session_id == "t1:h1"
    assert [m.content for m in session.messages] == ["Where do I live?", "I don't know yet."]


def test_async_graph_on_async_memory(mem: Memory, llm: ScriptedLLM) -> None:
    amem = AsyncMemory(memory=mem)
    model = chat_model("Welcome!", "Oslo.")
    graph = build(amem, model, SaveTurns(amem))
    llm.push(ops(add(OSLO)), ops())

    async def run() -> None:
        await graph.ainvoke({"messages": [HumanMessage("I moved to Oslo.")]}, MARTIN)
        await graph.ainvoke(
            {"messages": [HumanMessage("Where do I live?")]}, config("martin", "t2")
        )

    asyncio.run(run())
    assert OSLO in system_text(model.seen[1])


# --- the tools --------------------------------------------------------------------------
def test_tools_take_the_user_from_the_config_never_from_the_model(
    mem: Memory, llm: ScriptedLLM
) -> None:
    remember, recall, answer = memory_tools(mem)
    assert [t.name for t in (remember, recall, answer)] == [
        "remember",
        "recall",
        "answer_from_memory",
    ]
    for tool, arg in ((remember, "content"), (recall, "query"), (answer, "question")):
        assert list(tool.tool_call_schema.model_json_schema()["properties"]) == [arg]

    llm.push(ops(add(OSLO)))
    said = remember.invoke({"content": "I moved to Oslo."}, config=MARTIN)
    assert said == f"Remembered: added {OSLO!r}."
    found = recall.invoke({"query": "Where does Martin live?"}, config=MARTIN)
    assert "[fact] " in found and OSLO in found
    assert "[episode] " in found and "user: I moved to Oslo." in found

    # alice's run cannot reach it, whatever the model writes in the call
    call = {"query": "Where does Martin live?", "user_id": "martin"}
    assert recall.invoke(call, config=ALICE) == "Nothing in memory about that."
    tool_call = {"name": "recall", "args": call, "id": "c1", "type": "tool_call"}
    g = StateGraph(MessagesState)
    g.add_node("tools", ToolNode([recall]))
    g.add_edge(START, "tools")
    out = g.compile().invoke({"messages": [AIMessage("", tool_calls=[tool_call])]}, ALICE)
    assert isinstance(out["messages"][-1], ToolMessage)
    assert out["messages"][-1].content == "Nothing in memory about that."

    llm.push("You live in Oslo.", "I don't know.")
    assert answer.invoke({"question": "Where do I live?"}, config=MARTIN) == "You live in Oslo."
    # what the answerer read: the turn the fact was written from
    assert "user: I moved to Oslo." in llm.requests[-1]["messages"][-1]["content"]
    assert answer.invoke({"question": "Where do I live?"}, config=ALICE) == "I don't know."
    assert "Oslo." not in llm.requests[-1]["messages"][-1]["content"]

    with pytest.raises(MissingUser):
        recall.invoke({"query": "Oslo"})


def test_remember_in_the_background_shares_the_save_nodes_thread(
    mem: Memory, llm: ScriptedLLM
) -> None:
    save = SaveTurns(mem, background=True)
    remember, recall, _ = memory_tools(mem, writer=save.writer)
    llm.push(ops(add(OSLO)))
    said = remember.invoke({"content": "I moved to Oslo."}, config=MARTIN)
    assert said.startswith("Noted: stored verbatim")
    assert "[episode]" in recall.invoke({"query": "Oslo"}, config=MARTIN)
    assert save.flush(timeout=30)
    assert "[fact]" in recall.invoke({"query": "Oslo"}, config=MARTIN)
    save.close()


def test_async_tools(mem: Memory, llm: ScriptedLLM) -> None:
    remember, recall, _ = memory_tools(AsyncMemory(memory=mem), infer=False)

    async def run() -> tuple[str, str, str]:
        said = await remember.ainvoke({"content": "I moved to Oslo."}, config=MARTIN)
        return (
            said,
            await recall.ainvoke({"query": "Oslo"}, config=MARTIN),
            await recall.ainvoke({"query": "Oslo"}, config=ALICE),
        )

    said, mine, theirs = asyncio.run(run())
    assert said.startswith("Noted: stored verbatim")
    assert "[episode]" in mine and theirs == "Nothing in memory about that."
    assert llm.requests == []


# --- the store --------------------------------------------------------------------------
NS = ("memories", "martin")


def test_store_put_get_update_delete(mem: Memory) -> None:
    store = DeltamemStore(mem)
    assert store.get(NS, "home") is None
    store.put(NS, "home", {"content": OSLO})
    item = store.get(NS, "home")
    assert item is not None and item.key == "home" and item.namespace == NS
    assert item.value["content"] == OSLO and item.value["kind"] == "fact"
    # it is a fact of martin's memory, written without an LLM (none is scripted)
    [fact] = mem.get_all(user_id="martin")
    assert fact.content == OSLO

    store.put(NS, "home", {"content": "Martin lives in Bergen."})
    again = store.get(NS, "home")
    assert again is not None and again.value["content"] == "Martin lives in Bergen."
    assert again.created_at == item.created_at and again.updated_at >= item.updated_at
    store.put(NS, "home", again.value)  # a value read back can be put again: no change
    assert [h.op for h in mem.history(fact.id)] == ["add", "update"]

    store.delete(NS, "home")
    assert store.get(NS, "home") is None and mem.get_all(user_id="martin") == []
    store.delete(NS, "home")  # deleting what is not there is fine
    store.put(NS, "home", {"data": OSLO})  # LangGraph's examples' shape
    assert (store.get(NS, "home") or item).value["content"] == OSLO
    with pytest.raises(ValueError, match="stores text"):
        store.put(NS, "x", {"content": "a", "extra": 1})
    with pytest.raises(ValueError, match="limit"):
        store.put(NS, "x", {"content": "a" * 1000})  # a memory is a sentence, not a file


def test_store_search_is_deltamems_search(mem: Memory) -> None:
    store = DeltamemStore(mem)
    mem.add(
        [{"role": "user", "content": "I adopted a beagle named Rufus."}],
        user_id="martin",
        infer=False,
    )
    store.put(NS, "home", {"content": OSLO})
    store.put(NS, "job", {"content": "Martin works as a UX designer."})

    hits = store.search(NS, query="Where does Martin live?")
    assert hits[0].key == "home" and hits[0].value["content"] == OSLO
    assert hits[0].score is not None and hits[0].score > 0
    assert {h.value["kind"] for h in hits} == {"fact", "episode"}
    episode = next(h for h in hits if h.value["kind"] == "episode")
    assert episode.value["speaker"] == "user"
    assert (store.get(NS, episode.key) or hits[0]).value["content"].startswith("I adopted")
    with pytest.raises(ValueError):
        store.delete(NS, episode.key)

    facts = store.search(NS, query="Where does Martin live?", filter={"kind": "fact"})
    assert {h.value["kind"] for h in facts} == {"fact"}
    assert [h.key for h in store.search(NS)] == ["job", "home"]  # no query: newest first
    assert [h.key for h in store.search(NS, limit=1, offset=1)] == ["home"]


def test_store_is_scoped_to_the_namespaces_user(mem: Memory) -> None:
    store = DeltamemStore(mem)
    store.put(NS, "home", {"content": OSLO})
    mid = mem.get_all(user_id="martin")[0].id
    theirs = ("memories", "alice")
    assert store.get(theirs, "home") is None
    assert store.get(theirs, mid) is None  # not even by the memory's id
    assert store.search(theirs, query="Where does Martin live?") == []
    assert store.search(theirs) == []
    store.delete(theirs, "home")
    store.delete(theirs, mid)
    assert store.get(NS, "home") is not None
    with pytest.raises(InvalidNamespaceError, match="one user"):
        store.search(("memories",), query="Oslo")  # across users: refused
    with pytest.raises(InvalidNamespaceError):
        store.put(("notes", "martin"), "k", {"content": "x"})


def test_store_batch_namespaces_and_fallback(mem: Memory) -> None:
    other = InMemoryStore()
    store = DeltamemStore(mem, fallback=other)
    store.put(NS, "home", {"content": OSLO})
    store.put(("memories", "alice"), "pet", {"content": "Alice has a cat."})
    store.put(("settings", "martin"), "theme", {"dark": True})  # not a memory: the fallback's
    assert other.get(("settings", "martin"), "theme") is not None
    assert (store.get(("settings", "martin"), "theme") or object()).value == {"dark": True}

    assert store.list_namespaces(prefix=("memories",)) == [
        ("memories", "alice"),
        ("memories", "martin"),
    ]
    assert store.list_namespaces(max_depth=1) == [("memories",), ("settings",)]
    assert store.list_namespaces(suffix=("martin",)) == [NS, ("settings", "martin")]

    from langgraph.store.base import GetOp, PutOp, SearchOp

    got = store.batch(
        [
            GetOp(NS, "home"),
            PutOp(NS, "job", {"content": "Martin works as a UX designer."}),
            SearchOp(NS, query="What is Martin's job?", limit=1),
            GetOp(("settings", "martin"), "theme"),
        ]
    )
    assert got[0].value["content"] == OSLO and got[1] is None
    assert got[2][0].key == "job" and got[3].value == {"dark": True}

    async def run() -> list[Any]:
        await store.aput(NS, "car", {"content": "Martin drives a red Volvo."})
        return [await store.aget(NS, "car"), await store.asearch(NS, query="car")]

    car, found = asyncio.run(run())
    assert car.value["content"] == "Martin drives a red Volvo." and found[0].key == "car"


def test_store_in_a_graph_as_langgraphs_docs_use_it(mem: Memory) -> None:
    """A node reads the user's memories through `store` (compile(store=...)) with the
    user from the config, as LangGraph's long-term memory guide does."""
    DeltamemStore(mem).put(NS, "home", {"content": OSLO})

    def call_model(
        state: MemoryState, config: RunnableConfig, *, store: BaseStore
    ) -> dict[str, Any]:
        namespace = ("memories", config["configurable"]["user_id"])
        found = store.search(namespace, query=str(state["messages"][-1].content))
        return {"messages": [AIMessage("; ".join(i.value["content"] for i in found) or "-")]}

    g = StateGraph(MemoryState)
    g.add_node("call_model", call_model)
    g.add_edge(START, "call_model")
    graph = g.compile(store=DeltamemStore(mem))
    ask = {"messages": [HumanMessage("Where do I live?")]}
    assert OSLO in graph.invoke(ask, MARTIN)["messages"][-1].content
    assert graph.invoke(ask, ALICE)["messages"][-1].content == "-"


# --- the chat model and the example ----------------------------------------------------
def test_chat_model_on_deltamems_llm(llm: ScriptedLLM) -> None:
    llm.push("Hello Martin.")
    model = DeltamemChatModel(llm=llm, max_tokens=50)
    reply = model.invoke([SystemMessage("Be brief."), HumanMessage("Hi, I'm Martin.")])
    assert isinstance(reply, AIMessage) and reply.content == "Hello Martin."
    [request] = llm.requests
    assert request["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi, I'm Martin."},
    ]
    assert request["max_tokens"] == 50 and llm.usage.by_purpose == {"chat": 1}


@pytest.fixture
def example() -> Iterator[Any]:
    path = Path(__file__).resolve().parents[1] / "examples" / "langgraph_agent.py"
    spec = importlib.util.spec_from_file_location("langgraph_agent", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module


def test_the_example_graph_remembers_across_threads(
    example: Any, make_memory: Callable[..., Memory], llm: ScriptedLLM
) -> None:
    mem = make_memory(llm)
    model = chat_model("Welcome to Oslo, Martin!", "You live in Oslo and work as a UX designer.")
    llm.push(ops(add(OSLO), add("Martin works as a UX designer.")), ops())
    lines: list[str] = []
    replies = example.demo(mem, model, out=lines.append)
    assert replies == ["Welcome to Oslo, Martin!", "You live in Oslo and work as a UX designer."]
    # the second conversation's model call saw the first one's facts
    second = system_text(model.seen[1])
    assert second.startswith(example.SYSTEM) and OSLO in second
    assert "Martin works as a UX designer." in "\n".join(lines)
