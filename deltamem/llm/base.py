"""The LLM port: what the memory core needs from a chat model, and the accounting
every adapter shares (tokens, seconds, purpose of each call, retries)."""

from __future__ import annotations

import contextlib
import json
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from deltamem.llm.confidence import CONFIDENCE_KEY, reply_confidence
from deltamem.llm.jsonrepair import close_truncated

# A schema carrying this `$comment` asks for JSON in any layout (newlines and
# indentation allowed), as OpenAI's JSON modes allow. Our own prompts show
# compact JSON and decode under a compact grammar; prompts written for other
# models often show indented JSON, and a 1.5B model held to one line then takes
# a different, worse path (seen: mem0's extraction prompt answered `{"memory": []}`
# under a compact grammar, five memories without one). Other keywords of JSON
# Schema ignore `$comment`, so remote servers get a plain schema.
FREE_LAYOUT = "deltamem: any JSON layout"


def free_layout(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema`, marked so that the reply may be laid out freely."""
    return {"$comment": FREE_LAYOUT, **schema}


ChatMessage = dict[str, str]


class LLMError(RuntimeError):
    """The model could not give a usable answer."""


class LLMTimeout(LLMError):
    """A call ran past its time limit."""


class LLMOutputError(LLMError):
    """The model answered, but not with what was asked for (bad JSON, wrong shape)."""


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int = 0  # prompt tokens served from a KV / prompt cache
    # each reply token's log-probability and where its bytes end in the reply (the
    # raw bytes, which `text` decodes), where the engine gives them (llama.cpp):
    # see `deltamem.llm.confidence`
    logprobs: tuple[float, ...] = ()
    token_ends: tuple[int, ...] = ()


@dataclass
class CallRecord:
    """One model call, as logged."""

    purpose: str
    model: str
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int
    seconds: float
    ok: bool
    error: str | None = None
    at: datetime = field(default_factory=lambda: datetime.now(UTC))
    reply: str | None = None  # the model's raw text, before any parsing or repair
    # the session the call worked for (see `call_scope`); None outside one (answers)
    user_id: str | None = None
    session_id: str | None = None
    agent_id: str | None = None


@dataclass(frozen=True)
class CallScope:
    user_id: str
    session_id: str | None  # None: a call for the user outside a session (an answer)
    agent_id: str | None = None


_SCOPE: ContextVar[CallScope | None] = ContextVar("deltamem_llm_call_scope", default=None)


@contextlib.contextmanager
def call_scope(user_id: str, session_id: str | None, agent_id: str | None = None) -> Iterator[None]:
    """Label every call made in this thread (context) for the block with the session
    it works for, so that the call log can say which session each call served; with
    no session, the user it works for (an answer), so that the user's calls are
    forgotten with them."""
    token = _SCOPE.set(CallScope(user_id, session_id, agent_id))
    try:
        yield
    finally:
        _SCOPE.reset(token)


@dataclass
class Usage:
    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    seconds: float = 0.0
    by_purpose: dict[str, int] = field(default_factory=dict)

    def add(self, rec: CallRecord) -> None:
        self.calls += 1
        self.prompt_tokens += rec.prompt_tokens
        self.completion_tokens += rec.completion_tokens
        self.cached_tokens += rec.cached_tokens
        self.seconds += rec.seconds
        self.by_purpose[rec.purpose] = self.by_purpose.get(rec.purpose, 0) + 1

    def snapshot(self) -> Usage:
        return Usage(
            self.calls,
            self.prompt_tokens,
            self.completion_tokens,
            self.cached_tokens,
            self.seconds,
            dict(self.by_purpose),
        )

    def since(self, before: Usage) -> Usage:
        return Usage(
            self.calls - before.calls,
            self.prompt_tokens - before.prompt_tokens,
            self.completion_tokens - before.completion_tokens,
            self.cached_tokens - before.cached_tokens,
            self.seconds - before.seconds,
            {k: v - before.by_purpose.get(k, 0) for k, v in self.by_purpose.items()},
        )


class LLM(ABC):
    """A chat model. Adapters implement `_chat`; this class does the rest.

    `complete_json` always returns a dict that parsed: adapters constrain decoding
    to the schema where the engine can, and a reply that still fails to parse is
    retried, then reported as LLMOutputError.
    """

    name: str = "llm"

    def __init__(self, *, timeout: float = 300.0, retries: int = 1) -> None:
        self.timeout = timeout
        self.retries = retries
        self.usage = Usage()
        self._listeners: list[Callable[[CallRecord], None]] = []
        self._lock = threading.Lock()

    # --- what adapters provide -------------------------------------------------
    @abstractmethod
    def _chat(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> Completion: ...

    def _chat_many(
        self,
        prompts: list[list[ChatMessage]],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        timeout: float,
    ) -> list[Completion]:
        """Replies to several independent prompts; engines that can decode them side
        by side override this (one at a time here)."""
        return [
            self._chat(
                m, schema=schema, max_tokens=max_tokens, temperature=temperature, timeout=timeout
            )
            for m in prompts
        ]

    def _options(
        self, messages: list[ChatMessage], options: list[str], *, timeout: float
    ) -> tuple[dict[str, float], Completion]:
        """Log-probabilities of each option as the first word of the reply (and the
        call's token counts); engines that cannot give them raise LLMError."""
        raise LLMError(f"{self.name} cannot score options")

    @property
    def scores_options(self) -> bool:
        """Whether `option_logprobs` works on this model."""
        return type(self)._options is not LLM._options

    def count_tokens(self, text: str) -> int:
        """Tokens in `text` for this model; adapters with a tokenizer override this."""
        return max(1, len(text) // 4)

    @property
    def context_window(self) -> int:
        return 8192

    def with_context(self, n_ctx: int) -> LLM:
        """An LLM on the same model with at least `n_ctx` tokens of context and its
        own prompt cache. Remote models: this one (their context is the server's)."""
        return self

    # --- shared behaviour --------------------------------------------------------
    def on_call(self, listener: Callable[[CallRecord], None]) -> None:
        """Register a callback that receives every CallRecord (used for logging)."""
        self._listeners.append(listener)

    def _record(self, rec: CallRecord) -> None:
        scope = _SCOPE.get()
        if scope is not None and rec.session_id is None:
            rec = replace(
                rec, user_id=scope.user_id, session_id=scope.session_id, agent_id=scope.agent_id
            )
        with self._lock:
            self.usage.add(rec)
        for fn in self._listeners:
            with contextlib.suppress(Exception):  # a broken logger must not break a write
                fn(rec)

    def _call(
        self,
        messages: list[ChatMessage],
        *,
        schema: dict[str, Any] | None,
        max_tokens: int,
        temperature: float,
        purpose: str,
        accept: Callable[[str], object] | None = None,
    ) -> Completion:
        """One call, retried on transport errors. A reply `accept` refuses (LLMOutputError)
        is logged as a failed call with the reason and raised at once, as is a timeout:
        a model that did not answer within `timeout` is not asked the same thing again
        right away (that would multiply the time a hung model holds a session; the
        worker's own attempts, after a backoff, are the retries)."""
        attempts = self.retries + 1
        last: Exception | None = None
        for _ in range(attempts):
            t0 = time.perf_counter()
            try:
                out = self._chat(
                    messages,
                    schema=schema,
                    max_tokens=max_tokens,
                    temperature=temperature,
                    timeout=self.timeout,
                )
            except LLMError as exc:
                last = exc
                self._record_failure(purpose, t0, exc)
                if isinstance(exc, LLMTimeout):
                    raise
                continue
            spent = time.perf_counter() - t0
            try:
                if accept is not None:
                    accept(out.text)
            except LLMOutputError as exc:
                self._record(self._record_of(out, purpose, spent, error=str(exc)))
                raise
            self._record(self._record_of(out, purpose, spent))
            return out
        assert last is not None
        raise last

    def _record_failure(self, purpose: str, started: float, exc: Exception) -> None:
        """Log a call that gave no reply (an engine error, a timeout)."""
        spent = time.perf_counter() - started
        self._record(CallRecord(purpose, self.name, 0, 0, 0, spent, False, str(exc)))

    def _record_of(
        self, out: Completion, purpose: str, seconds: float, error: str | None = None
    ) -> CallRecord:
        return CallRecord(
            purpose,
            self.name,
            out.prompt_tokens,
            out.completion_tokens,
            out.cached_tokens,
            seconds,
            error is None,
            error,
            reply=out.text,
        )

    def option_logprobs(
        self, messages: list[ChatMessage], options: list[str], *, purpose: str
    ) -> dict[str, float]:
        """How likely the model is to begin its reply with each option (natural log
        probabilities): one forward pass, no sampling, so a judge can read how sure
        the model is instead of taking whichever word it leans to."""
        t0 = time.perf_counter()
        try:
            scores, out = self._options(messages, options, timeout=self.timeout)
        except LLMError as exc:
            self._record_failure(purpose, t0, exc)
            raise
        self._record(self._record_of(out, purpose, time.perf_counter() - t0))
        return scores

    def p_yes(self, messages: list[ChatMessage], *, purpose: str) -> float:
        """P("yes" rather than "no" as the reply's first word), from `option_logprobs`:
        the two normalised over each other, so a threshold can take out a small
        model's lean to one word."""
        lp = self.option_logprobs(messages, ["yes", "no"], purpose=purpose)
        top = max(lp["yes"], lp["no"])
        yes, no = (math.exp(lp[o] - top) for o in ("yes", "no"))
        return yes / (yes + no)

    def complete(
        self,
        messages: list[ChatMessage],
        *,
        purpose: str,
        max_tokens: int = 512,
        temperature: float = 0.0,
    ) -> str:
        return self._call(
            messages, schema=None, max_tokens=max_tokens, temperature=temperature, purpose=purpose
        ).text

    def _json_reader(
        self, check: Callable[[dict[str, Any]], object] | None
    ) -> Callable[[str], dict[str, Any]]:
        """How a reply becomes a JSON object, or an LLMOutputError saying why not."""

        def parse(text: str) -> dict[str, Any]:
            try:
                value = json.loads(text)
            except json.JSONDecodeError:
                value = close_truncated(text)  # cut off by max_tokens: keep what finished
            if not isinstance(value, dict):
                raise LLMOutputError(
                    f"{self.name} did not return a JSON object; reply: {text[:200]!r}"
                )
            if check is not None:
                try:
                    check(value)
                except ValueError as exc:
                    raise LLMOutputError(
                        f"{self.name} replied with JSON of the wrong shape ({exc}); "
                        f"reply: {text[:200]!r}"
                    ) from exc
            return value

        return parse

    def _json_attempts(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        purpose: str,
        max_tokens: int,
        temperature: float,
        parse: Callable[[str], dict[str, Any]],
        failed: LLMOutputError | None = None,
    ) -> dict[str, Any]:
        """`failed`: the first attempt was made elsewhere (a batch) and failed so."""
        last = failed
        for attempt in range(0 if failed is None else 1, self.retries + 1):
            try:
                out = self._call(
                    messages,
                    schema=schema,
                    max_tokens=max_tokens,
                    # a greedy retry would repeat the same reply: retries sample instead
                    temperature=temperature if attempt == 0 else max(temperature, 0.7),
                    purpose=purpose,
                    accept=parse,
                )
            except LLMOutputError as exc:
                last = exc
                continue
            return parse(out.text)  # accepted above: parses the same way again
        assert last is not None
        raise last

    def complete_json(
        self,
        messages: list[ChatMessage],
        schema: dict[str, Any],
        *,
        purpose: str,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        check: Callable[[dict[str, Any]], object] | None = None,
    ) -> dict[str, Any]:
        """A JSON object from the model. `check` (raising ValueError, e.g. a pydantic
        ValidationError) says whether the object has the shape asked for: engines
        that do not constrain decoding (or do so loosely) can return JSON of another
        shape, which must count as a failed call, not as an empty answer. A reply
        that does not parse, is not an object or fails `check` is logged with the
        reason and asked again (sampling), then reported as LLMOutputError."""
        return self._json_attempts(
            messages,
            schema,
            purpose=purpose,
            max_tokens=max_tokens,
            temperature=temperature,
            parse=self._json_reader(check),
        )

    def complete_json_many(
        self,
        prompts: list[list[ChatMessage]],
        schema: dict[str, Any],
        *,
        purpose: str,
        max_tokens: int = 1024,
        temperature: float = 0.0,
        check: Callable[[dict[str, Any]], object] | None = None,
        confidence: bool = False,
    ) -> list[dict[str, Any] | LLMOutputError]:
        """`complete_json` for independent prompts, first asked together (an engine
        that decodes side by side answers them in about the time of a few); each
        result is the object or, for a prompt whose reply failed after its own
        retries, the LLMOutputError. Every call is logged on its own, the batch's
        seconds shared among them. `confidence`: each object read from the batch
        also carries, under CONFIDENCE_KEY, the mean token log-probability of each
        of its strings where the engine gives them (`deltamem.llm.confidence`); a
        reply asked again after a failure carries none."""
        if not prompts:
            return []
        parse = self._json_reader(check)
        t0 = time.perf_counter()
        try:
            outs = self._chat_many(
                prompts,
                schema=schema,
                max_tokens=max_tokens,
                temperature=temperature,
                timeout=self.timeout,
            )
        except LLMError as exc:
            self._record_failure(purpose, t0, exc)
            if isinstance(exc, LLMTimeout):
                raise
            outs = None  # a transport error: ask one at a time, with their retries
        spent = (time.perf_counter() - t0) / len(prompts)

        def ask(messages: list[ChatMessage], failed: LLMOutputError | None) -> dict[str, Any]:
            return self._json_attempts(
                messages,
                schema,
                purpose=purpose,
                max_tokens=max_tokens,
                temperature=temperature,
                parse=parse,
                failed=failed,
            )

        results: list[dict[str, Any] | LLMOutputError] = []
        for i, messages in enumerate(prompts):
            try:
                if outs is None:
                    results.append(ask(messages, None))
                    continue
                try:
                    value = parse(outs[i].text)
                except LLMOutputError as exc:
                    self._record(self._record_of(outs[i], purpose, spent, error=str(exc)))
                    results.append(ask(messages, exc))
                    continue
                self._record(self._record_of(outs[i], purpose, spent))
                if confidence and outs[i].logprobs:
                    value[CONFIDENCE_KEY] = reply_confidence(
                        outs[i].text, outs[i].logprobs, outs[i].token_ends, value
                    )
                results.append(value)
            except LLMOutputError as exc:
                results.append(exc)
        return results
