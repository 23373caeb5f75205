"""A LangGraph agent that remembers its user from one conversation to the next.

    pip install -e '.[local,langgraph]'
    python examples/langgraph_agent.py              # the embedded model, on the CPU
    python examples/langgraph_agent.py --llm tiny   # a 135M model: seconds, poor replies

Two conversations (two LangGraph threads) with the same user. In the first the
user says where they moved and what they do; the second starts with no history
and asks about it. Around the model call, `RecallMemories` puts what deltamem
recalls for the user's message (labelled facts and dated excerpts) in a system
message, and `SaveTurns` hands each finished turn to memory, where the manager
turns it into facts in a background thread (the turn's words are searchable at
once). The chat model is the memory's own embedded model (`DeltamemChatModel`),
so everything runs offline and the model is loaded once.
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from deltamem import Memory
from deltamem.integrations.langgraph import (
    DeltamemChatModel,
    MemoryState,
    RecallMemories,
    SaveTurns,
)

SYSTEM = "You are a friendly assistant. Answer in one or two sentences."
CONVERSATIONS = [
    ("first", "Hi! I'm Martin. I just moved to Oslo for a new job as a UX designer."),
    ("second", "Remind me: which city do I live in now, and what is my job?"),
]


def build_graph(memory: Memory, model: BaseChatModel, save: SaveTurns) -> Any:
    """recall → chat → save, with the thread's history kept by a checkpointer."""

    def chat(state: MemoryState) -> dict[str, Any]:
        # the conversation with the recalled memories ahead of it (RecallMemories)
        messages = state.get("llm_input_messages") or state["messages"]
        return {"messages": [model.invoke(messages)]}

    builder = StateGraph(MemoryState)
    builder.add_node("recall", RecallMemories(memory, limit=8))
    builder.add_node("chat", chat)
    builder.add_node("save", save)
    builder.add_edge(START, "recall")
    builder.add_edge("recall", "chat")
    builder.add_edge("chat", "save")
    builder.add_edge("save", END)
    return builder.compile(checkpointer=InMemorySaver())


def demo(
    memory: Memory, model: BaseChatModel, user_id: str = "martin", out: Callable[[str], Any] = print
) -> list[str]:
    """Run the two conversations; returns the agent's replies."""
    save = SaveTurns(memory, background=True)
    graph = build_graph(memory, model, save)
    replies = []
    for thread, text in CONVERSATIONS:
        config = {"configurable": {"user_id": user_id, "thread_id": thread}}
        state = graph.invoke({"messages": [SystemMessage(SYSTEM), HumanMessage(text)]}, config)
        reply = str(state["messages"][-1].content)
        replies.append(reply)
        out(f"[{thread} conversation]\n  {user_id}: {text}\n  agent: {reply}")
        recalled = state["llm_input_messages"][0].content
        if "Facts:" in recalled or "Excerpts" in recalled:
            out(
                "  (the model was shown what memory recalled:)\n    "
                + recalled.replace("\n", "\n    ")
            )
        out("  ... turning the turn into facts (the manager, in the background)")
        save.flush()
    save.close()
    out("\nWhat deltamem now knows about " + user_id + ":")
    for fact in memory.get_all(user_id=user_id):
        out(f"  {fact.timestamp:%Y-%m-%d} | {fact.content}")
    return replies


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--db", type=Path, help="memory file (default: a new temporary one)")
    parser.add_argument("--llm", default="local", help="deltamem LLM spec (local, tiny, URL)")
    args = parser.parse_args(argv)
    db = args.db or Path(tempfile.mkdtemp(prefix="deltamem-langgraph-")) / "memory.db"
    with Memory(db, llm=args.llm) as memory:
        model = DeltamemChatModel(llm=memory.llm, max_tokens=160)
        demo(memory, model)
    print(f"\n(memory file: {db})")


if __name__ == "__main__":
    main()
