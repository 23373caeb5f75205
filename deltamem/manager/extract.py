"""Fact extraction, one user turn at a time (the manager's first step).

A 1.5B model shown a whole session, the known memories and a worked example at
once copies what it was shown (docs/benchmarks.md). Asked about one user message,
with the assistant's message before it as context and nothing else, it writes the
facts that message states. Each call is short, its reply capped (at most six
facts), and its static instructions come first so the KV cache serves them.

Every fact is checked in code before it goes on: it must be in the third person,
name the person, and be grounded in the turn (most of its content words occur in
what was said, and a good part of them in the person's own message), which
refuses invented facts and the assistant's suggestions recast as the person's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, StrictStr

from deltamem.llm.base import LLM, ChatMessage
from deltamem.manager.atomise import first_person, name_subject, split_facts
from deltamem.manager.attribution import (
    dislike_from_request,
    plan_as_done,
    said_of_another,
    spouse_not_named,
)
from deltamem.manager.dates import annotate, dated, relative_dates
from deltamem.manager.render import template
from deltamem.porter import stem
from deltamem.text import shorten, stems_of, terms, words
from deltamem.timeparse import human_date
from deltamem.types import MAX_MEMORY_CHARS, Message, Operation, SessionRecord

MAX_FACTS = 6  # per user turn: the reply's cap, and what ends a repeating reply
GROUNDED = 0.5  # share of a fact's content words that must occur in the turn
# ... and in the person's own message alone, unless it answers the assistant's
# question: a fact made of the assistant's words (its suggestions, its praise) is
# not something the person said of themselves
OWN_WORDS = 0.4
OWN_WORDS_ANSWERING = 0.3
UNNAMED = "The user"

SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_FACTS}},
    "required": ["facts"],
}
_NAME_IS = re.compile(r"\bname is ([A-Z][\w'’-]+(?: [A-Z][\w'’-]+){0,2})")
# a self-introduction in the person's own words: "I'm Priya Raman", "call me Priya";
# "I'm" takes two capitalised words, so "I'm Canadian" names nobody
_INTRODUCED = re.compile(
    r"\b(?:I['’]m|I am) ([A-Z][a-z'’-]+ [A-Z][\w'’-]+)\b"
    r"|\b(?:[Cc]all me|[Mm]y name['’]s) ([A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?)\b"
)
_SYSTEM = template("extract_system.txt").substitute().strip()
_TURN = template("extract_turn.txt")
# words a fact may add to what was said without inventing anything
_FREE = frozenset(
    "user person name named called january february march april may june july august "
    "september october november december week weekend month year day date".split()
)


_FREE_STEMS = frozenset(stem(w) for w in _FREE)
# "<person> is a/an <label>", the label ending where a clause about them begins
_LABEL = re.compile(
    r"^(?P<subject>.+?)\s+(?:is|was)\s+an?\s+(?P<label>.+?)"
    r"(?:(?:,\s*|\s+)(?:who|that)\s+(?P<clause>.+?)|,?\s+and\s+(?P<verb>\w*[^s\W]s)(?P<rest>\s.*?)"
    r"|,.*|\s+and\s+.*)?\.?$"
)
# label words that call the person nothing in particular
_PLAIN_LABEL = frozenset(stem(w) for w in "person individual someone".split())


def person_stems(subject: str) -> set[str]:
    """Stems of the words that name the person ("user" always does)."""
    return {stem(w.lower()) for w in words(subject)} - {"the"} | {"user"}


def content_stems(fact: str, names: set[str]) -> set[str]:
    """A fact's content words, stemmed, less the person's name and the free words."""
    return {stem(t) for t in terms(fact, limit=64)} - names - _FREE_STEMS


class FactsReply(BaseModel):
    facts: list[StrictStr]


@dataclass
class Candidate:
    """A fact the model wrote for one user turn, before deduplication."""

    content: str
    turn: int  # index of the user message it came from


def name_in(texts: list[str]) -> str | None:
    """A name stated as "... name is First Last" in memories or messages."""
    for text in texts:
        m = _NAME_IS.search(text)
        if m:
            return m.group(1)
    return None


def introduced_name(messages: list[str]) -> str | None:
    """A name the person gives for themselves ("Hi, I'm Priya Raman")."""
    for text in messages:
        m = _INTRODUCED.search(text)
        if m:
            return m.group(1) or m.group(2)
    return None


@dataclass(frozen=True)
class TurnPrompt:
    """What the extractor sends for one user turn, and what its checks read."""

    turn: int  # index of the user message in the session
    subject: str  # who the facts are about: the person's name, else UNNAMED
    said: str  # the person's message, relative dates annotated
    before: Message | None  # the assistant's message just before it, if any
    messages: list[ChatMessage]  # system + user message, as sent to the model
    # (expression, date) of each relative time expression of the message
    dates: tuple[tuple[str, str], ...] = ()


def turn_prompt(
    session: SessionRecord, turn: int, name: str | None, *, assistant_words: int = 40
) -> TurnPrompt:
    """The chat messages the extractor sends about user turn `turn` of `session`,
    `name` being the person's name if known. The one place they are built: the
    product's calls and the GRPO training prompts (deltamem/train/grpo) both come
    from here, so training sees exactly what the manager sends."""
    msgs = session.messages
    msg = msgs[turn]
    before = msgs[turn - 1] if turn > 0 and msgs[turn - 1].role != "user" else None
    subject = msg.name or name or UNNAMED
    text = " ".join(msg.content.split())
    dates = tuple(relative_dates(text, msg.timestamp or session.timestamp))
    said = annotate(text, dates)
    context = ""
    if before is not None:
        earlier = shorten(" ".join(before.content.split()), assistant_words)
        context = f"{before.name or before.role.capitalize()} (before): {earlier}"
    who = (
        f'The person\'s name is not known: call them "{UNNAMED}".'
        if subject == UNNAMED
        else f"The person is called {subject}."
    )
    prompt = _TURN.substitute(
        date=human_date(session.timestamp),
        who=who,
        context=context,
        subject=subject,
        message=said,
    )
    return TurnPrompt(
        turn=turn,
        subject=subject,
        said=said,
        before=before,
        dates=dates,
        messages=[
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": prompt},
        ],
    )


def reply_facts(reply: dict[str, Any], subject: str) -> list[str]:
    """The facts of a parsed reply `{"facts": [...]}`: each item split into single
    facts, named after `subject`, repeats dropped, at most MAX_FACTS."""
    facts = reply.get("facts")
    seen: set[str] = set()
    out: list[str] = []
    for item in facts if isinstance(facts, list) else []:
        text = " ".join(str(item).split())
        for piece in split_facts(text) if text else []:
            piece = name_subject(piece, subject)
            key = piece.lower().rstrip(".")
            if key in seen:  # a repeating reply: its first copy is enough
                continue
            seen.add(key)
            out.append(piece)
    return out[:MAX_FACTS]


def check_fact(
    fact: str, subject: str, said: str, before: Message | None
) -> tuple[str, str | None]:
    """The checks a fact written for a turn goes through, as the manager and the
    training reward (deltamem/train/grpo) both apply them: the fact as kept (an
    unsaid label dropped, `unsaid_label`) and why it is refused (None: kept)."""
    own = stems_of(said)
    heard = own | (stems_of(before.content) if before else set())
    kept, why = unsaid_label(fact, subject, heard)
    if kept is None:
        return fact, why
    # an answer to the assistant's question makes the question's words the person's
    # ("How long have you lived in Bergen?" "Five years now."); its suggestions and
    # praise do not
    answered = before is not None and "?" in before.content
    why = _refusal(kept, subject, own, heard, answered)
    if why is None:
        why = (
            said_of_another(kept, subject, said)
            or plan_as_done(kept, subject, said)
            or dislike_from_request(kept, subject, said)
            or spouse_not_named(kept, said)
        )
    return kept, why


def _refusal(fact: str, subject: str, own: set[str], heard: set[str], answered: bool) -> str | None:
    """Why a fact is refused (None: it is kept); `own`: stems of the person's
    message, `heard`: those and the assistant's message before it."""
    if len(fact) > MAX_MEMORY_CHARS:
        return "fact too long"
    if len(fact.split()) < 3:
        return "fragment, not a fact"
    if first_person(fact):
        return "first person: the user's words, not a fact about them"
    names = person_stems(subject)
    if not {stem(w.lower()) for w in words(fact)} & names:
        return "does not name the person"
    content = content_stems(fact, names)
    if not content:
        return "says nothing about the person"
    if len(content & heard) / len(content) < GROUNDED:
        return "not grounded in the conversation"
    if len(content & own) / len(content) < (OWN_WORDS_ANSWERING if answered else OWN_WORDS):
        return "the assistant's words, not the person's"
    return None


def unsaid_label(fact: str, subject: str, heard: set[str]) -> tuple[str | None, str | None]:
    """A fact that calls the person something ("is a cat lover", "is a fashion
    designer", "is a personal growth advocate") with a word neither they nor the
    assistant used in the turn is the model's summary, and often wrong: the 1.5B
    model turns "my online clothes store" into "a fashion designer" and a liking into
    "an enthusiast". Such a label is dropped: the clause about the person that
    follows it stays ("is a cat lover who enjoys learning about breeds" -> "enjoys
    learning about breeds"); a label alone is refused. `heard`: stems of the turn and
    the assistant's message before it. Returns (fact, None) to keep, possibly
    rewritten, or (None, why) to refuse."""
    m = _LABEL.match(fact)
    if m is None or m.group("subject").lower() != subject.lower():
        return fact, None
    free = heard | _PLAIN_LABEL | person_stems(subject) | _FREE_STEMS
    if all(_said(t, free) for t in terms(m.group("label"), limit=64)):
        return fact, None
    clause = m.group("clause") or (m.group("verb") and m.group("verb") + m.group("rest"))
    if clause:
        return f"{m.group('subject')} {clause.rstrip('.')}", None
    return None, "calls the person something they did not say"


def _said(word: str, heard: set[str]) -> bool:
    """A label word is said when it or the verb it is made from was: "dancer" by
    "dance", "leader" by "lead"."""
    if stem(word) in heard:
        return True
    return (
        word.endswith(("er", "or"))
        and len(word) > 4
        and bool({stem(word[:-2]), stem(word[:-1])} & heard)
    )


def news(fact: str, subject: str, said_before: set[str]) -> bool:
    """Whether a fact carries at least one content word (stemmed) the person had not
    used in their earlier messages of the session. Long conversations circle back to
    their topic; a fact made only of words said before ("... is focused on his
    goals", "... is committed to the team") restates what earlier turns gave, in
    vaguer words. Measured by replaying logged runs (docs/benchmarks.md)."""
    content = content_stems(fact, person_stems(subject))
    return not content or bool(content - said_before)


class FactExtractor:
    def __init__(self, llm: LLM, *, assistant_words: int = 40, max_tokens: int = 240) -> None:
        self.llm = llm
        self.assistant_words = assistant_words
        self.max_tokens = max_tokens

    def extract(
        self, session: SessionRecord, name: str | None, noops: list[Operation]
    ) -> list[Candidate]:
        """Facts from each user turn of the session, in order; what the checks
        refuse goes to `noops` with the reason. The turns' calls are independent,
        so they are asked together (an engine that decodes side by side answers
        them in a fraction of the time), except while the person's name is still
        to be learnt from the facts: then one turn at a time, as a fact of one
        turn may name them for the next."""
        out: list[Candidate] = []
        said_before: set[str] = set()  # stems of the person's earlier messages this session
        turns = [i for i, msg in enumerate(session.messages) if msg.role == "user"]
        while turns:
            unnamed = name is None and any(session.messages[i].name is None for i in turns)
            group, turns = (turns[:1], turns[1:]) if unnamed else (turns, [])
            asked = [
                turn_prompt(session, i, name, assistant_words=self.assistant_words) for i in group
            ]
            replies = self.llm.complete_json_many(
                [a.messages for a in asked],
                SCHEMA,
                purpose="extract",
                max_tokens=self.max_tokens,
                check=FactsReply.model_validate,  # another shape is a failed call, not "no facts"
            )
            for prompt, reply in zip(asked, replies, strict=True):
                if isinstance(reply, Exception):
                    raise reply
                said_before = self._read(prompt, reply, said_before, out, noops)
                if name is None and session.messages[prompt.turn].name is None:
                    name = name_in([c.content for c in out]) or name
        return out

    def _read(
        self,
        asked: TurnPrompt,
        reply: dict[str, Any],
        said_before: set[str],
        out: list[Candidate],
        noops: list[Operation],
    ) -> set[str]:
        """The checks on one turn's reply: kept facts go to `out`, refused ones to
        `noops`; returns what the person has said so far."""
        for written in reply_facts(reply, asked.subject):
            fact, reason = check_fact(
                dated(written, asked.dates), asked.subject, asked.said, asked.before
            )
            if reason is None and not news(fact, asked.subject, said_before):
                reason = "says nothing the person had not said earlier in the session"
            if reason is None:
                out.append(Candidate(fact, asked.turn))
            else:
                noops.append(Operation(op="none", content=fact, turns=[asked.turn], note=reason))
        return said_before | stems_of(asked.said)
