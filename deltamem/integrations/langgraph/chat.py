"""`DeltamemChatModel`: a LangChain chat model on deltamem's LLM port, so that a
graph can talk through the same embedded model the memory uses (one model loaded,
not two), or through any model deltamem is configured with.

    memory = Memory(llm="local")
    model = DeltamemChatModel(llm=memory.llm)
    model.invoke([HumanMessage("Hello!")])

Text in, text out: it binds no tools (the embedded 1.5B model does not call them
reliably); give it memory through the nodes (`RecallMemories`, `SaveTurns`). Each
call is logged with deltamem's LLM calls (purpose "chat").
"""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pydantic import ConfigDict

from deltamem.integrations.langgraph.common import text_of
from deltamem.llm.base import LLM, ChatMessage


def chat_messages(messages: list[BaseMessage]) -> list[ChatMessage]:
    """LangChain messages as the LLM port's ``{"role", "content"}`` (empty ones left
    out; a tool's answer is shown as the user's)."""
    out: list[ChatMessage] = []
    for m in messages:
        text = text_of(m)
        if not text.strip():
            continue
        if isinstance(m, SystemMessage):
            out.append({"role": "system", "content": text})
        elif isinstance(m, AIMessage):
            out.append({"role": "assistant", "content": text})
        elif isinstance(m, ToolMessage):
            out.append({"role": "user", "content": f"(result of {m.name or 'a tool'}) {text}"})
        elif isinstance(m, HumanMessage):
            out.append({"role": "user", "content": text})
        else:
            out.append({"role": "user", "content": text})
    return out


class DeltamemChatModel(BaseChatModel):
    """A chat model on a deltamem `LLM` (e.g. ``Memory(llm="local").llm``)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    llm: LLM
    max_tokens: int = 512
    temperature: float = 0.7
    purpose: str = "chat"

    @property
    def _llm_type(self) -> str:
        return "deltamem"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model": self.llm.name, "max_tokens": self.max_tokens}

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        text = self.llm.complete(
            chat_messages(messages),
            purpose=self.purpose,
            max_tokens=int(kwargs.get("max_tokens", self.max_tokens)),
            temperature=float(kwargs.get("temperature", self.temperature)),
        )
        for s in stop or []:
            if s in text:
                text = text[: text.index(s)]
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=text.strip()))])
