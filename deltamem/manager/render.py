"""What the manager reads: the session rendered as numbered turns, cut into chunks
that fit the model's context.

Memories come from what the user says, so user turns are kept whole while
assistant turns are shortened to their opening sentences: in dialogue benchmarks
the assistant writes 3-4x more than the user, and its long replies are where
unconfirmed suggestions (distractors) live. This is the main lever on write cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from string import Template

from deltamem.text import shorten
from deltamem.types import MemoryItem, Message

PROMPTS = Path(__file__).parent / "prompts"


def template(name: str) -> Template:
    return Template((PROMPTS / name).read_text(encoding="utf-8"))


@dataclass
class Turn:
    index: int  # position of the message in the session
    line: str
    tokens: int


def speaker(msg: Message) -> str:
    if msg.name:
        return f"{msg.role} ({msg.name})"
    return msg.role


def render_turns(
    messages: list[Message],
    count_tokens: Callable[[str], int],
    *,
    assistant_words: int = 40,
    max_turn_tokens: int = 1500,
) -> list[Turn]:
    turns: list[Turn] = []
    for i, msg in enumerate(messages):
        text = " ".join(msg.content.split())
        if msg.role != "user":
            text = shorten(text, assistant_words)
        pieces = [text]
        if count_tokens(text) > max_turn_tokens:  # one giant message: split it by words
            ws = text.split()
            step = max(1, int(max_turn_tokens * 0.6))  # ~0.75 words a token, with margin
            pieces = [" ".join(ws[j : j + step]) for j in range(0, len(ws), step)]
        for piece in pieces:
            line = f"[{i}] {speaker(msg)}: {piece}"
            turns.append(Turn(i, line, count_tokens(line) + 1))
    return turns


def chunk_turns(turns: list[Turn], budget: int) -> list[list[Turn]]:
    """Consecutive groups of turns of at most `budget` tokens each, in order."""
    chunks: list[list[Turn]] = []
    current: list[Turn] = []
    used = 0
    for t in turns:
        if current and used + t.tokens > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(t)
        used += t.tokens
    if current:
        chunks.append(current)
    return chunks


def memory_lines(items: Sequence[tuple[str, MemoryItem | None, str]]) -> str:
    """(short id, memory or None for one pending in this session, content) → lines."""
    if not items:
        return "(none yet)"
    lines = []
    for short, mem, content in items:
        date = mem.timestamp.strftime("%Y-%m-%d") if mem is not None else "this session"
        lines.append(f"{short} | {date} | {content}")
    return "\n".join(lines)
