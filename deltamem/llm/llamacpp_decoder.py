"""Decoding on a llama.cpp context of our own: several prompts at once, and a
grammar checked against the chosen token first.

llama-cpp-python's own loop is slow for the manager's short JSON replies on a
2-core CPU (docs/journal/benchmarks.md): it applies the JSON grammar to all 151k
candidate tokens at every step, where checking the greedy choice alone is enough
whenever the grammar accepts it (llama.cpp's own samplers do the same); and it
decodes one sequence at a time, where a step for four sequences costs about twice
a step for one, the weights being read once for all of them.

Each prompt gets a slot (a sequence id in one unified KV cache). A slot keeps the
tokens it last held, so a prompt that shares its start with what any slot holds
(the extractor's static instructions) evaluates only the rest: the cells are
shared with `llama_memory_seq_cp`, not recomputed.
"""

from __future__ import annotations

import contextlib
import ctypes
import math
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

_TOKEN_DATA = np.dtype([("id", np.int32), ("logit", np.float32), ("p", np.float32)])


class DecodeError(Exception):
    """llama.cpp could not decode (no room in the KV cache, a prompt too long)."""


class DeadlineExceeded(Exception):
    pass


@dataclass
class Request:
    tokens: list[int]  # the whole prompt, chat template applied
    max_tokens: int
    temperature: float = 0.0
    grammar: str | None = None  # GBNF, root rule "root"


@dataclass
class Result:
    text: str
    prompt_tokens: int
    completion_tokens: int
    evaluated: int  # prompt tokens evaluated, not served from the KV cache
    # each reply token's log-probability under the model (before any grammar or
    # sampler), and where its bytes end in the UTF-8 reply: how sure the model was
    # of each part of what it wrote (`deltamem.llm.confidence`)
    logprobs: tuple[float, ...] = ()
    token_ends: tuple[int, ...] = ()


@dataclass
class _Run:
    request: Request
    slot: int
    sampler: Any = None  # grammar sampler (greedy) or full chain (sampled)
    logits: np.ndarray | None = None
    index: int = 0  # position in the caller's list
    pending: list[int] = field(default_factory=list)  # prompt tokens still to evaluate
    out: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # one per token of `out`
    evaluated: int = 0
    done: bool = False
    dropped: int = 0  # generated tokens cut off as repeats (`repeated_tail`)


# A reply whose last tokens are one block said this many times over is looping: a 1.5B
# model writing "X is a mother of two children, X is a mother of two children, ..."
# inside one JSON string, where no item cap or repeated-item check can end it, ran
# to its token cap (2 of 421 extraction replies on LoCoMo conv-26). Blocks of
# BLOCK_TOKENS tokens: shorter repeats ("very, very, very") can be meant.
REPEATS = 3
BLOCK_TOKENS = (4, 48)


def repeated_tail(tokens: Sequence[int]) -> int:
    """The length of a block that ends `tokens` REPEATS times in a row; 0 if none."""
    shortest, longest = BLOCK_TOKENS
    n = len(tokens)
    for size in range(shortest, min(longest, n // REPEATS) + 1):
        if tokens[n - 1] != tokens[n - 1 - size]:  # cheap test first: runs on every token
            continue
        block = tokens[n - size :]
        if all(tokens[n - (k + 1) * size : n - k * size] == block for k in range(1, REPEATS)):
            return size
    return 0


def shared_prefix(cached: Sequence[int], tokens: Sequence[int]) -> int:
    """How many leading tokens a prompt shares with what the KV cache holds:
    llama.cpp evaluates only the rest."""
    n = 0
    for a, b in zip(cached, tokens, strict=False):
        if a != b:
            break
        n += 1
    return n


class Decoder:
    """Greedy or sampled generation for up to `slots` prompts at a time on one
    llama.cpp context (the model's weights are shared with whoever loaded them)."""

    def __init__(
        self,
        model: Any,  # llama_model_p
        *,
        n_ctx: int,
        n_threads: int,
        slots: int = 4,
        n_batch: int = 512,
        seed: int = 0,
        lora: Any = None,  # llama_adapter_lora_p, already loaded on the model
        like: Any = None,  # llama_context_params to start from (e.g. llama-cpp-python's)
    ) -> None:
        import llama_cpp as lc

        self._lc = lc
        base = like if like is not None else lc.llama_context_default_params()
        params = type(base).from_buffer_copy(base)
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = n_batch
        params.n_seq_max = slots
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.kv_unified = True  # every slot may use the whole context
        self._ctx = lc.llama_init_from_model(model, params)
        if not self._ctx:
            raise DecodeError("llama.cpp could not create a context")
        if lora is not None:
            adapters = (lc.llama_adapter_lora_p_ctypes * 1)(lora)
            scales = (ctypes.c_float * 1)(1.0)
            if lc.llama_set_adapters_lora(self._ctx, adapters, 1, scales):
                lc.llama_free(self._ctx)
                raise DecodeError("llama.cpp could not apply the LoRA adapter")
        self._memory = lc.llama_get_memory(self._ctx)
        self._vocab = lc.llama_model_get_vocab(model)
        self.n_vocab = lc.llama_vocab_n_tokens(self._vocab)
        self.n_ctx = n_ctx
        self.slots = slots
        self._n_batch = n_batch
        self._batch = lc.llama_batch_init(n_batch, 0, slots)
        self._held: list[list[int]] = [[] for _ in range(slots)]
        self._seed = seed
        self._candidates = (lc.llama_token_data * self.n_vocab)()
        self._candidates_np = np.frombuffer(self._candidates, dtype=_TOKEN_DATA)
        self._one = (lc.llama_token_data * 1)()
        self._piece = ctypes.create_string_buffer(256)

    def close(self) -> None:
        if self._ctx:
            self._lc.llama_batch_free(self._batch)
            self._lc.llama_free(self._ctx)
            self._ctx = None

    def __del__(self) -> None:  # pragma: no cover - interpreter shutdown order varies
        with contextlib.suppress(Exception):
            self.close()

    # --- public --------------------------------------------------------------
    def generate(self, requests: list[Request], *, deadline: float | None = None) -> list[Result]:
        """Replies to `requests`, in their order. Up to `slots` are decoded side by
        side; when one ends, the next prompt takes its slot at once, its prompt
        tokens evaluated in the same forward pass as the others' next tokens, so
        the batch stays full however unequal the replies."""
        for r in requests:
            if len(r.tokens) >= self.n_ctx:
                raise DecodeError(
                    f"prompt of {len(r.tokens)} tokens does not fit the context ({self.n_ctx})"
                )
        queue = deque(enumerate(requests))
        results: list[Result | None] = [None] * len(requests)
        active: list[_Run] = []
        free = list(range(self.slots))
        self._room(requests[: self.slots])
        try:
            while queue or active:
                while queue and free and not self._worth_waiting(queue[0][1], active):
                    index, request = queue.popleft()
                    run = _Run(request, free.pop(0), index=index)
                    active.append(run)  # before the sampler: freed however this ends
                    start = self._reuse(run.slot, request.tokens)
                    run.pending = request.tokens[start:]
                    run.evaluated = len(run.pending)
                    run.sampler = self._sampler(request)
                for run in active:
                    if run.logits is not None:
                        self._choose(run)
                        run.logits = None
                for run in [run for run in active if run.done]:
                    results[run.index] = self._result(run)
                    self._release(run)
                    active.remove(run)
                    free.append(run.slot)
                if not active:
                    continue
                _check(deadline)
                self._step(active)
        finally:
            for run in active:
                self._release(run)
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]

    def _result(self, run: _Run) -> Result:
        pieces = [self._bytes(token) for token in run.out]
        ends, end = [], 0
        for piece in pieces:
            end += len(piece)
            ends.append(end)
        return Result(
            b"".join(pieces).decode("utf-8", errors="replace"),
            len(run.request.tokens),
            len(run.out) + run.dropped,
            run.evaluated,
            logprobs=tuple(run.logprobs[: len(run.out)]),
            token_ends=tuple(ends),
        )

    def _worth_waiting(self, request: Request, active: list[_Run]) -> bool:
        """Whether a prompt still being read shares more with `request` than any slot
        holds: then `request` waits a step and takes that prefix from the cache
        (the first prompts of a batch share the static instructions)."""
        want = request.tokens[:-1]
        cached = max(shared_prefix(held, want) for held in self._held)
        return any(
            run.pending and shared_prefix(run.request.tokens, want) > cached for run in active
        )

    def _step(self, active: list[_Run]) -> None:
        """One forward pass: the next token of every run that is generating, then as
        many prompt tokens of the runs still reading theirs as the batch holds."""
        items: list[tuple[int, int]] = []
        wants: list[_Run | None] = []  # the run whose logits each position gives
        for run in active:
            if not run.pending:
                items.append((run.slot, run.out[-1]))
                wants.append(run)
        for run in active:
            room = self._n_batch - len(items)
            if not run.pending or room <= 0:
                continue
            chunk, run.pending = run.pending[:room], run.pending[room:]
            items += [(run.slot, t) for t in chunk]
            wants += [None] * (len(chunk) - 1) + [None if run.pending else run]
        self._decode(items, logits=[w is not None for w in wants])
        for k, owner in enumerate(wants):
            if owner is not None:
                owner.logits = self._logits(k)

    def _release(self, run: _Run) -> None:
        if run.sampler is not None:
            self._lc.llama_sampler_free(run.sampler)
            run.sampler = None

    def next_logits(
        self, tokens: list[int], *, deadline: float | None = None
    ) -> tuple[np.ndarray, int]:
        """The logits of the token after `tokens` and how many prompt tokens were
        evaluated (one forward pass, slot 0, its cache kept)."""
        run = _Run(Request(tokens, 0), 0)
        self._prefill([run], deadline)
        assert run.logits is not None
        return run.logits, run.evaluated

    # --- the KV cache ----------------------------------------------------------
    def _reuse(self, slot: int, tokens: list[int]) -> int:
        """Make `slot` hold the longest prefix of `tokens` any slot holds (but never
        the last token: its logits are needed), and return its length."""
        lc = self._lc
        want = tokens[:-1]
        own = shared_prefix(self._held[slot], want)
        best, source = own, slot
        for other, held in enumerate(self._held):
            if other != slot:
                n = shared_prefix(held, want)
                if n > best:
                    best, source = n, other
        if source == slot:
            lc.llama_memory_seq_rm(self._memory, slot, own, -1)
            del self._held[slot][own:]
        else:
            lc.llama_memory_seq_rm(self._memory, slot, -1, -1)
            lc.llama_memory_seq_cp(self._memory, source, slot, 0, best)
            self._held[slot] = self._held[source][:best]
        return best

    def _room(self, requests: list[Request]) -> None:
        """Forget what the slots hold when it and what these requests need might
        not fit the context together (unified cells are shared: this overcounts)."""
        need = sum(len(r.tokens) + r.max_tokens for r in requests)
        if need + sum(len(h) for h in self._held) > self.n_ctx:
            for slot in range(self.slots):
                self._lc.llama_memory_seq_rm(self._memory, slot, -1, -1)
                self._held[slot] = []

    def _prefill(self, runs: list[_Run], deadline: float | None) -> None:
        """Evaluate each prompt after what its slot can take from the cache. One
        prompt after another: a prompt takes the prefix it shares with those before
        it in the batch (the static instructions) from their slots, and evaluating
        prompt tokens costs the same batched or not."""
        self._room([run.request for run in runs])
        for run in runs:
            tokens = run.request.tokens
            start = self._reuse(run.slot, tokens)
            run.evaluated = len(tokens) - start
            for at in range(start, len(tokens), self._n_batch):
                _check(deadline)
                chunk = tokens[at : at + self._n_batch]
                last = at + len(chunk) == len(tokens)
                self._decode(
                    [(run.slot, t) for t in chunk],
                    logits=[last and k == len(chunk) - 1 for k in range(len(chunk))],
                )
                if last:
                    run.logits = self._logits(len(chunk) - 1)

    def _decode(self, items: list[tuple[int, int]], *, logits: bool | list[bool]) -> None:
        """One llama_decode of (slot, token) pairs, each at its slot's next position."""
        lc, batch = self._lc, self._batch
        batch.n_tokens = len(items)
        for k, (slot, token) in enumerate(items):
            batch.token[k] = token
            batch.pos[k] = len(self._held[slot])
            batch.n_seq_id[k] = 1
            batch.seq_id[k][0] = slot
            batch.logits[k] = logits if isinstance(logits, bool) else logits[k]
            self._held[slot].append(token)
        code = lc.llama_decode(self._ctx, batch)
        if code != 0:
            # what this batch added is not in the cache (or only in part): forget the
            # touched slots entirely rather than guess
            for slot in {slot for slot, _ in items}:
                lc.llama_memory_seq_rm(self._memory, slot, -1, -1)
                self._held[slot] = []
            raise DecodeError(f"llama_decode failed ({code}): no room in the KV cache?")

    def _logits(self, index: int) -> np.ndarray:
        row = self._lc.llama_get_logits_ith(self._ctx, index)
        return np.ctypeslib.as_array(row, shape=(self.n_vocab,)).copy()

    # --- sampling --------------------------------------------------------------
    def _sampler(self, request: Request) -> Any:
        lc = self._lc
        grammar = None
        if request.grammar is not None:
            grammar = lc.llama_sampler_init_grammar(
                self._vocab, request.grammar.encode("utf-8"), b"root"
            )
            if not grammar:
                raise DecodeError("llama.cpp refused the grammar")
        if request.temperature <= 0.0:
            return grammar
        # sampled (a retry): llama-cpp-python's defaults, grammar over all candidates
        chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
        if grammar is not None:
            lc.llama_sampler_chain_add(chain, grammar)
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_k(40))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_top_p(0.95, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_min_p(0.05, 1))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_temp(request.temperature))
        lc.llama_sampler_chain_add(chain, lc.llama_sampler_init_dist(self._seed))
        return chain

    def _apply_all(self, sampler: Any, logits: np.ndarray) -> int:
        """Apply `sampler` to every candidate; the token it selects (or the best)."""
        lc = self._lc
        cand = self._candidates_np
        cand["id"] = np.arange(self.n_vocab, dtype=np.int32)
        cand["logit"] = logits
        cand["p"] = 0.0
        arr = lc.llama_token_data_array(
            data=self._candidates, size=self.n_vocab, selected=-1, sorted=False
        )
        lc.llama_sampler_apply(sampler, ctypes.byref(arr))
        if arr.selected >= 0:
            return int(self._candidates[arr.selected].id)
        size = int(arr.size)
        return int(cand["id"][:size][np.argmax(cand["logit"][:size])])

    def _allowed(self, grammar: Any, token: int, logit: float) -> bool:
        one = self._one
        one[0] = self._lc.llama_token_data(token, logit, 0.0)
        arr = self._lc.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
        self._lc.llama_sampler_apply(grammar, ctypes.byref(arr))
        return bool(np.isfinite(one[0].logit))

    def _choose(self, run: _Run) -> None:
        """Pick `run`'s next token; mark it done at an end token, its cap, or a
        repeating tail (cut back to its first copy)."""
        lc, req = self._lc, run.request
        assert run.logits is not None
        if req.max_tokens <= len(run.out):
            run.done = True
            return
        if req.temperature > 0.0:
            token = self._apply_all(run.sampler, run.logits)
        else:
            token = int(np.argmax(run.logits))
            # greedy: the grammar's best is the overall best whenever it allows it
            if run.sampler is not None and not self._allowed(
                run.sampler, token, float(run.logits[token])
            ):
                token = self._apply_all(run.sampler, run.logits)
        if run.sampler is not None:
            lc.llama_sampler_accept(run.sampler, token)
        if lc.llama_vocab_is_eog(self._vocab, token):
            run.done = True
            return
        run.out.append(token)
        run.logprobs.append(_logprob(run.logits, token))
        size = repeated_tail(run.out)
        # a block that opens and closes a JSON string repeats items, which the
        # schema's item cap ends; one inside a string has no end but the token cap
        if size and '"' not in self._text(run.out[-size:]):  # keep the first copy
            run.dropped = (REPEATS - 1) * size
            del run.out[-run.dropped :]
            del run.logprobs[len(run.out) :]
            run.done = True
        elif len(run.out) >= req.max_tokens:
            run.done = True

    def _bytes(self, token: int) -> bytes:
        n = self._lc.llama_token_to_piece(
            self._vocab, token, self._piece, len(self._piece), 0, False
        )
        return self._piece.raw[: max(0, n)]

    def _text(self, tokens: list[int]) -> str:
        return b"".join(self._bytes(t) for t in tokens).decode("utf-8", errors="replace")


def _logprob(logits: np.ndarray, token: int) -> float:
    """log softmax(logits)[token], computed stably (a few tenths of a millisecond
    over a 150k vocabulary, against seconds a reply)."""
    top = float(logits.max())
    return float(logits[token]) - top - math.log(float(np.exp(logits - top).sum()))


def _check(deadline: float | None) -> None:
    if deadline is not None and time.monotonic() > deadline:
        raise DeadlineExceeded
