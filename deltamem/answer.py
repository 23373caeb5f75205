"""Answering a question from retrieved memories (SPEC §3): most recent wins, unknown
stays unknown, false premises get corrected. Facts and conversation excerpts
(episodes) are shown apart, each dated, so the newest fact wins and a fact the
manager missed can still be read in the user's own words."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from string import Template
from typing import Literal

from pydantic import BaseModel

from deltamem.llm.base import LLM
from deltamem.manager.dates import dated, day_in_words
from deltamem.porter import stem
from deltamem.rules import DEFAULT, RuleSettings
from deltamem.rules.language import ENGLISH, language_name, language_of
from deltamem.text import clip, stems_of, terms
from deltamem.types import SearchHit
from deltamem.yesno import is_yes_no, opening, without_restated_premise

PROMPTS = Path(__file__).parent / "prompts"
# said after the items when none of them names the thing asked (`unmentioned`)
_UNMENTIONED = Template((PROMPTS / "answer_unmentioned.txt").read_text(encoding="utf-8"))
# said after the items when a "Yes" is not trusted (`Answerer.yes_cut`)
_NOT_YES = (PROMPTS / "answer_not_yes.txt").read_text(encoding="utf-8").strip()


def _in_its_language(question: str) -> str:
    """For a question not in English, a note to answer in its language (the 1.5B
    answered "Quel est le métier de la sœur de Claire ?" in English); English prompts
    stay as they were."""
    language = language_of(question)
    named = language_name(language) if language != ENGLISH else None
    return f"The question is in {named}: answer in {named}." if named else ""


# an excerpt longer than this is cut: a long assistant turn would crowd out the rest
EXCERPT_CHARS = 600
# The 1.5B opens with "Yes" to yes/no questions whose premise its items contradict,
# less surely than to those they support: P("yes" first) 0.51-0.75 against 0.64-0.96
# on the dev questions. Below this a "Yes" is asked again as a "No" (tuned on HaluMem
# user 3 and LoCoMo conv-30, confirmed on user 0 and conv-26: docs/journal/benchmarks.md).
YES_CUT = 0.75


Order = Literal["date", "newest", "relevance"]
ORDERS: tuple[Order, ...] = ("date", "newest", "relevance")
# what the prompt says of the order the items are listed in
ORDER_NOTE = {"date": "oldest first", "newest": "newest first", "relevance": "most relevant first"}


def said_on(when: datetime) -> str:
    """The date an item was said, in words and after the item ("(said 8 May 2023)")."""
    return f"(said {day_in_words(when)})"


def memory_lines(hits: list[SearchHit], order: Order = "date") -> tuple[list[str], list[str]]:
    """Facts ("fact (said date)") and conversation excerpts ("speaker: words (said
    date)"), each tier oldest first ("date": "the most recent" is where the model looks
    last), newest first ("newest": where a small model looks first), or as search
    ranked them ("relevance": the best match first). An excerpt's relative time
    expressions are written as their dates ("yesterday" -> "on 7 May 2023"), as the
    extractor writes a fact, and the date an item was said comes after it: the 1.5B
    answered "When did Caroline go to the support group?" with the date that led the
    line ("2023-05-08 | Caroline: ... yesterday [7 May 2023]"), and copied "last week"
    when it was left as words (docs/journal/benchmarks.md)."""
    ordered = list(hits)
    if order in ("date", "newest"):
        ordered.sort(key=lambda h: h.memory.timestamp, reverse=order == "newest")
    facts = [
        f"{h.memory.content} {said_on(h.memory.timestamp)}" for h in ordered if h.kind == "fact"
    ]
    excerpts = [
        f"{h.speaker or 'user'}: {clip(dated(h.memory.content, h.memory.timestamp), EXCERPT_CHARS)}"
        f" {said_on(h.memory.timestamp)}"
        for h in ordered
        if h.kind == "episode"
    ]
    return facts, excerpts


# "What is Sarah Garcia's middle name as of Sep 06, 2025?": the thing asked of the
# person, between the possessive and what dates or qualifies the question
_ASKED = re.compile(
    r"^(?i:(?:on|as of|in|by)\s+[^?]+?,\s*)?(?i:what|which)\s+(?:is|was|are|were)\s+"
    r"(?P<name_of>the\s+name\s+of\s+)?(?:the\s+title\s+of\s+)?"
    r"(?:(?:[A-Z][\w'’-]*\s+){0,3}?[A-Z][\w-]*['’]s?\s+|(?:his|her|their)\s+)"
    r"(?P<asked>[a-z][\w'’-]*(?:\s+[a-z][\w'’-]*){0,3}?)"
    r"(?:\s+(?:as of|on|in|at|during|by|from|mentioned|who|that|for)\b.*)?\?*$"
)
# words that qualify the question ("exact weight") or name a kind of attribute
# that a memory states without naming it ("is single" is a relationship status,
# "loves red most" a favourite colour): not needed in an item for a mention
_QUALIFIERS = frozenset(
    stem(w)
    for w in "exact current specific full actual latest recent new real "
    "name title type kind sort style status level reason favorite favourite fav".split()
)


@dataclass(frozen=True)
class Asked:
    """What a "What is <person>'s <thing>?" question asks for."""

    thing: str  # "middle name"
    needed: list[str]  # the stems an item must hold to mention it: ["middl"]
    a_name: bool  # the answer is a name ("middle name", "the name of her dog")
    own_name: bool = False  # one of the person's own names ("middle name")


def asked_thing(question: str) -> Asked | None:
    """The thing a "What is <person>'s <thing>?" question asks for; None for a
    question of another form."""
    m = _ASKED.match(question.strip())
    if not m:
        return None
    thing = m.group("asked")
    stems = [stem(t) for t in terms(thing)]
    needed = [s for s in stems if s not in _QUALIFIERS]
    if not needed:
        return None
    if m.group("name_of"):
        return Asked(f"name of the {thing}", needed, a_name=True)
    a_name = stem("name") in stems
    return Asked(thing, needed, a_name=a_name, own_name=a_name)


def unmentioned(question: str, hits: list[SearchHit]) -> str | None:
    """The thing of `unmentioned_name` ("middle name"), or None."""
    asked = unmentioned_name(question, hits)
    return asked.thing if asked else None


def unmentioned_name(question: str, hits: list[SearchHit]) -> Asked | None:
    """The name the question asks for when no retrieved item mentions it with all
    its words (none says "middle" beside "name"). A 1.5B answerer asked for a
    middle name answers with any name among its items (a friend's, a colleague's);
    told that none gives one, it says the answer is not known. Asked for another
    kind of thing (a blood type, a weight) it abstained without being told, and
    the note misled it where an item says the thing in other words ("born on"
    for a birth date), so only names get it (docs/journal/benchmarks.md, twelfth pass)."""
    asked = asked_thing(question)
    if asked is None or not asked.a_name:
        return None
    if any(set(asked.needed) <= stems_of(h.memory.content) for h in hits):
        return None
    return asked


class Answer(BaseModel):
    text: str
    memories: list[SearchHit]


class Answerer:
    """`order`: how the items are listed (docs/journal/benchmarks.md measures both).
    `yes_cut`: a "Yes" to a yes/no question stands only where the model opens its
    reply with "yes" at least this surely (models that score options only; None:
    every "Yes" stands)."""

    def __init__(
        self,
        llm: LLM,
        max_tokens: int = 200,
        order: Order = "date",
        yes_cut: float | None = YES_CUT,
        rules: RuleSettings = DEFAULT,
    ) -> None:
        self.llm = llm
        self.rules = rules
        self.max_tokens = max_tokens
        self.order: Order = order
        self.yes_cut = yes_cut
        self._system = (PROMPTS / "answer_system.txt").read_text(encoding="utf-8")
        self._user = Template((PROMPTS / "answer_user.txt").read_text(encoding="utf-8"))

    def prompt(
        self,
        question: str,
        hits: list[SearchHit],
        asked_at: datetime | None = None,
        *,
        not_yes: bool = False,
    ) -> list[dict[str, str]]:
        return self._prompt(question, hits, asked_at, self._unmentioned(question, hits), not_yes)

    def _unmentioned(self, question: str, hits: list[SearchHit]) -> Asked | None:
        return unmentioned_name(question, hits) if self.rules.on("UNMENTIONED_NAME") else None

    def _prompt(
        self,
        question: str,
        hits: list[SearchHit],
        asked_at: datetime | None,
        unnamed: Asked | None,
        not_yes: bool = False,
    ) -> list[dict[str, str]]:
        facts, excerpts = memory_lines(hits, self.order)
        today = f"Today is {asked_at:%Y-%m-%d}." if asked_at else ""
        note = _UNMENTIONED.substitute(thing=unnamed.thing).strip() if unnamed else ""
        user = self._user.substitute(
            order=ORDER_NOTE[self.order],
            facts="\n".join(facts) if facts else "(none)",
            excerpts="\n".join(excerpts) if excerpts else "(none)",
            notes="\n".join(
                filter(None, [today, note, _NOT_YES if not_yes else "", _in_its_language(question)])
            ),
            question=question.strip(),
        )
        return [{"role": "system", "content": self._system}, {"role": "user", "content": user}]

    def answer(
        self, question: str, hits: list[SearchHit], asked_at: datetime | None = None
    ) -> Answer:
        unnamed = self._unmentioned(question, hits)
        if unnamed is not None and unnamed.own_name and self.rules.on("OWN_NAME_UNKNOWN"):
            # one of the person's own names ("middle name") that no item gives: told so,
            # the 1.5B still answered 4 of 36 such questions with a name found nearby
            # ("Martin's middle name is Mark"); no other wording of it was ever seen
            text = f"Not known from memory: no item gives the {unnamed.thing}."
            return Answer(text=text, memories=hits)
        messages = self._prompt(question, hits, asked_at, unnamed)
        text = self.llm.complete(messages, purpose="answer", max_tokens=self.max_tokens).strip()
        if self._doubted_yes(question, text, messages):
            text = self.llm.complete(
                self._prompt(question, hits, asked_at, unnamed, not_yes=True),
                purpose="answer",
                max_tokens=self.max_tokens,
            )
            text = without_restated_premise(question, text)
        elif opening(text) == "no" and is_yes_no(question):
            # "No, Ola moved from Oslo to Bergen." contradicts itself: the "No" stays
            text = without_restated_premise(question, text)
        return Answer(text=text, memories=hits)

    def _doubted_yes(self, question: str, text: str, messages: list[dict[str, str]]) -> bool:
        """A "Yes" to a yes/no question that the model gave less surely than `yes_cut`
        (one scoring pass over the prompt just answered: its tokens are cached)."""
        if self.yes_cut is None or not self.llm.scores_options or not self.rules.on("DOUBTED_YES"):
            return False
        if opening(text) != "yes" or not is_yes_no(question):
            return False
        return self.llm.p_yes(messages, purpose="answer-yes-check") < self.yes_cut
