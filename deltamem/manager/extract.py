"""Fact extraction, one user turn at a time (the manager's first step).

A 1.5B model shown a whole session, the known memories and a worked example at
once copies what it was shown (docs/journal/benchmarks.md). Asked about one user message,
with the message before it as context (the assistant's, or the other person's
in a chat between two people) and nothing else, it writes the
facts that message states. Each call is short, its reply capped (at most six
facts), and its static instructions come first so the KV cache serves them.

Every fact then goes through the fact rules (`deltamem.rules`: in the third
person, names the person, grounded in the turn, the person's own, not a wish
written as done, ...); what they refuse goes on as a `none` operation carrying the
rule's code.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from pydantic import BaseModel, StrictStr

from deltamem.llm.base import LLM, ChatMessage
from deltamem.llm.confidence import CONFIDENCE_KEY
from deltamem.manager.atomise import name_subject, split_facts
from deltamem.manager.dates import annotate, dated, relative_dates
from deltamem.manager.render import template
from deltamem.rules import DEFAULT, RuleSettings, Verdict, check
from deltamem.rules.grounding import content_stems, person_stems
from deltamem.rules.language import ENGLISH, language_name, language_of
from deltamem.rules.whose import unsaid_label  # noqa: F401  (tests and the judges read it here)
from deltamem.text import STOPWORDS, shorten, stems_of
from deltamem.timeparse import human_date
from deltamem.types import Message, Operation, SessionRecord

MAX_FACTS = 6  # per user turn: the reply's cap, and what ends a repeating reply
UNNAMED = "The user"

SCHEMA = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_FACTS}},
    "required": ["facts"],
}
_NAME_IS = re.compile(r"\bname is ([A-Z][\w'’-]+(?: [A-Z][\w'’-]+){0,2})")
# a self-introduction in the person's own words: "I'm Priya Raman", "call me Priya",
# "I'm Martin." (one name, then the sentence ends), "Martin here"; "I'm Canadian"
# and "I'm Tired" name nobody (`_a_name`)
_INTRODUCED = re.compile(
    r"\b(?:I['’]m|I am) ([A-Z][a-zà-öø-ÿ'’-]+ [A-Z][\w'’-]+)\b"
    r"|\b(?:[Cc]all me|[Mm]y name['’]s) ([A-Z][\w'’-]+(?: [A-Z][\w'’-]+)?)\b"
    r"|\b(?:I['’]m|I am) ([A-Z][a-zà-öø-ÿ'’-]+)(?=\s*(?:[.!,;]|$|\s(?:and|from|here)\b))"
    r"|^\W*(?:(?:Hi|Hey|Hello)\W+)?([A-Z][a-zà-öø-ÿ'’-]+) here\b"
    # ... and in Spanish, German, French: "soy Ana Ruiz", "me llamo Ana", "ich heiße
    # Lena", "je suis Claire Dubois", "je m'appelle Léa" (the name's words are
    # capitalised, so "soy enfermera" and "je suis pharmacienne" name nobody)
    r"|\b(?:[Ss]oy|[Mm]e llamo|[Ii]ch bin|[Ii]ch hei(?:ß|ss)e|[Jj]e suis|[Jj]e m['’]appelle|"
    r"[Mm]on nom est)\s+([A-ZÁÉÍÓÚÑÄÖÜÀÂÈÊÎÔÛÇ][\w'’-]+(?: [A-ZÁÉÍÓÚÑÄÖÜÀÂÈÊÎÔÛÇ][\w'’-]+)?)"
)
_SYSTEM = template("extract_system.txt").substitute().strip()
_TURN = template("extract_turn.txt")


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
    """A name the person gives for themselves ("Hi, I'm Priya Raman", "I'm
    Martin.", "Martin here")."""
    for text in messages:
        for m in _INTRODUCED.finditer(text):
            name = m.group(1) or m.group(2) or m.group(3) or m.group(4) or m.group(5)
            # one word alone must be a first name ("je suis Française" names nobody)
            if m.group(1) or m.group(2) or (m.group(5) and " " in name) or _a_name(name):
                return name
    return None


def _a_name(word: str) -> bool:
    """A first name a names list knows, not a stopword ("Martin", "Jo"; not
    "Canadian", "Tired" or "Sorry")."""
    if word.lower() in STOPWORDS:
        return False
    # the list spells some names with their accents ("Léa") and some without ("Elodie")
    plain = unicodedata.normalize("NFKD", word).encode("ascii", "ignore").decode()
    return any(_first_names().get_gender(w) != "unknown" for w in {word, plain} if w)


@lru_cache(maxsize=1)
def _first_names() -> Any:
    import gender_guesser.detector  # type: ignore[import-untyped]  # its first-names list

    return gender_guesser.detector.Detector(case_sensitive=False)


@dataclass(frozen=True)
class TurnPrompt:
    """What the extractor sends for one user turn, and what its checks read."""

    turn: int  # index of the user message in the session
    subject: str  # who the facts are about: the person's name, else UNNAMED
    said: str  # the person's message, relative dates annotated
    # the message just before it from someone else: the assistant's, or another
    # person's in a chat between people (both "user", told apart by name)
    before: Message | None
    messages: list[ChatMessage]  # system + user message, as sent to the model
    # (expression, date) of each relative time expression of the message
    dates: tuple[tuple[str, str], ...] = ()
    language: str = ENGLISH  # of the person's message


def _before(msgs: list[Message], turn: int) -> Message | None:
    """The message just before user turn `turn` when someone else sent it. Two
    people both on role "user" (a LoCoMo chat) answer each other: "Seattle, next
    month!" says nothing without "Where's your next game?"."""
    if turn == 0:
        return None
    prev, msg = msgs[turn - 1], msgs[turn]
    if prev.role != "user":
        return prev
    return prev if prev.name and msg.name and prev.name != msg.name else None


def turn_prompt(
    session: SessionRecord, turn: int, name: str | None, *, assistant_words: int = 40
) -> TurnPrompt:
    """The chat messages the extractor sends about user turn `turn` of `session`,
    `name` being the person's name if known. The one place they are built: the
    product's calls and the GRPO training prompts (deltamem/train/grpo) both come
    from here, so training sees exactly what the manager sends."""
    msgs = session.messages
    msg = msgs[turn]
    before = _before(msgs, turn)
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
    language = language_of(text)
    if language != ENGLISH and (named := language_name(language)):
        # English prompts stay as they were; a Spanish turn gets Spanish facts, which
        # the grounding rules can read against its words
        # the 1.5B copies the speaker's first-person verb ("Ana Ruiz trabajo en ...")
        who += (
            f" The message is in {named}: write the facts in {named}, each verb in the"
            f" third person, as said of {subject}, not as {subject} said it."
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
        language=language,
        messages=[
            {"role": "system", "content": _SYSTEM},
            {"role": "user", "content": prompt},
        ],
    )


def reply_facts(reply: dict[str, Any], subject: str) -> list[str]:
    """The facts of a parsed reply `{"facts": [...]}`: each item split into single
    facts, named after `subject`, repeats dropped, at most MAX_FACTS."""
    return [fact for fact, _ in reply_items(reply, subject)]


def reply_items(reply: dict[str, Any], subject: str) -> list[tuple[str, Any]]:
    """`reply_facts`, each fact with the reply item it was cut from."""
    facts = reply.get("facts")
    seen: set[str] = set()
    out: list[tuple[str, Any]] = []
    for item in facts if isinstance(facts, list) else []:
        text = " ".join(str(item).split())
        for piece in split_facts(text) if text else []:
            piece = name_subject(piece, subject)
            key = piece.lower().rstrip(".")
            if key in seen:  # a repeating reply: its first copy is enough
                continue
            seen.add(key)
            out.append((piece, item))
    return out[:MAX_FACTS]


def check_fact(
    fact: str, subject: str, said: str, before: Message | None
) -> tuple[str, str | None]:
    """The fact-stage rules on a fact written for a turn, all on (`check_written`
    with the settings): the fact as kept and why it is refused (None: kept)."""
    verdict = check_written(fact, subject, said, before)
    return verdict.fact, verdict.why


def check_written(
    fact: str,
    subject: str,
    said: str,
    before: Message | None,
    settings: RuleSettings = DEFAULT,
) -> Verdict:
    """`fact`, written for the person's message `said`, through the fact rules
    (`deltamem.rules`): as kept, and the refusal's code and detail if refused."""
    return check(fact, subject, said, before.content if before else None, settings=settings)


def news(fact: str, subject: str, said_before: set[str]) -> bool:
    """Whether a fact carries at least one content word (stemmed) the person had not
    used in their earlier messages of the session. Long conversations circle back to
    their topic; a fact made only of words said before ("... is focused on his
    goals", "... is committed to the team") restates what earlier turns gave, in
    vaguer words. Measured by replaying logged runs (docs/journal/benchmarks.md)."""
    content = content_stems(fact, person_stems(subject))
    return not content or bool(content - said_before)


@dataclass(frozen=True)
class ReadFact:
    """A fact of a reply after the checks: as kept, and the refusal's code and
    detail (None: kept); `confidence`: the model's mean token log-probability."""

    fact: str
    code: str | None
    why: str | None
    confidence: float | None


def read_reply(
    asked: TurnPrompt,
    reply: dict[str, Any],
    said_before: set[str],
    rules: RuleSettings = DEFAULT,
) -> list[ReadFact]:
    """Each fact of one turn's reply through the fact rules and NOTHING_NEW
    (`said_before`: the stems of the person's earlier messages of the session)."""
    sure = reply.get(CONFIDENCE_KEY) or {}
    out = []
    for written, item in reply_items(reply, asked.subject):
        confidence = sure.get(item) if isinstance(item, str) else None
        verdict = check(
            dated(written, asked.dates),
            asked.subject,
            asked.said,
            asked.before.content if asked.before else None,
            settings=rules,
            language=asked.language,
            confidence=confidence,
        )
        fact, refused = verdict.fact, verdict.refused
        code, why = (refused.code, refused.detail) if refused else (None, None)
        if why is None and rules.on("NOTHING_NEW") and not news(fact, asked.subject, said_before):
            code, why = "NOTHING_NEW", "says nothing the person had not said earlier in the session"
        out.append(ReadFact(fact, code, why, confidence))
    return out


class FactExtractor:
    def __init__(
        self,
        llm: LLM,
        *,
        assistant_words: int = 40,
        max_tokens: int = 240,
        rules: RuleSettings = DEFAULT,
    ) -> None:
        self.llm = llm
        self.assistant_words = assistant_words
        self.max_tokens = max_tokens
        self.rules = rules

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
                confidence=True,  # for LOW_CONFIDENCE: the model's own certainty of each fact
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
        for read in read_reply(asked, reply, said_before, self.rules):
            if read.why is None:
                out.append(Candidate(read.fact, asked.turn))
            else:
                noops.append(
                    Operation(
                        op="none",
                        content=read.fact,
                        turns=[asked.turn],
                        note=read.why,
                        rule=read.code,
                    )
                )
        return said_before | stems_of(asked.said)
