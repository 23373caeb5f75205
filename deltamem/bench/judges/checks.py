"""Narrow checks a 1.5B judge can answer, and what code settles without one.

A decomposed judge (`decomposed.py`) settles in code what code can (an empty
answer, an answer that says it does not know, the reference's words all found,
a date that differs) and asks the model only small closed questions: one
comparison of two short texts, answered from a fixed set of words by schema.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from string import Template
from typing import Any

from deltamem.bench.judges.base import PROMPTS, JudgeCache
from deltamem.bench.judges.text import YES_NO_QUESTION, after_opening, opening, sentences
from deltamem.llm.base import LLM
from deltamem.porter import stem
from deltamem.text import negated, plain_numbers, terms

# "I don't know", "not in my memory", "the memories do not name any …", "unknown"
_ABSTAINS = re.compile(
    r"\b(?:do(?:es)?n['’]?t|do(?:es)? not|can(?:no|['’])t|cannot|could not|couldn['’]t)\s+"
    r"(?:\w+\s+)?(?:know|tell|say|name|mention|state|specify|include|contain|have|find|recall|"
    r"remember|determine)\b"
    r"|(?:\bnot|n['’]t)\s+(?:been\s+)?(?:known|stated|mentioned|specified|provided|available|"
    r"given|recorded|found|clear|sure|in (?:my |the )?memor\w*)\b"
    r"|\bunknown\b|\bno (?:information|record|mention|details?|data)\b|\bnot enough information\b",
    re.IGNORECASE,
)
_MONTHS = {
    m: i
    for i, names in enumerate(
        [
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        ],
        1,
    )
    for m in names
}
_MONTH = r"(" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY_MONTH = re.compile(rf"\b(\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b", re.IGNORECASE)
_MONTH_DAY = re.compile(rf"\b{_MONTH}\s+(\d{{1,2}})(?:st|nd|rd|th)?\b", re.IGNORECASE)
_ISO = re.compile(r"\b(\d{4})-(\d{2})-(\d{2})\b")


def abstains(text: str) -> bool:
    """The text says the answer is not known (rather than giving one)."""
    return bool(_ABSTAINS.search(text))


def polarity(question: str, text: str) -> str | None:
    """ "yes" or "no" where a yes/no question's answer opens with one, else None."""
    return opening(text) if YES_NO_QUESTION.match(question) else None


def restates(question: str, answer: str, *, negative: bool) -> bool:
    """After its yes or no, the answer only says the question again (no word or number
    of its own), negated for a no and not negated for a yes; or says nothing more."""
    rest = after_opening(answer)
    if not content(rest) and not numbers(rest):
        return True  # the bare word: "No."
    if not content(rest) <= content(question) or not numbers(rest) <= numbers(question):
        return False
    return negated(rest) == negative


def beyond_the_question(question: str, answer: str, *, negative: bool) -> str:
    """What a yes/no answer claims past its yes or no: its sentences less those that
    only say the question again, negated for a no ("No, he did not switch to casual
    attire. He chose smart-casual." → "He chose smart-casual.")."""
    kept = [
        s for s in sentences(after_opening(answer)) if not restates(question, s, negative=negative)
    ]
    return " ".join(kept)


# where one clause ends: a negation in one ("not in 1985") says nothing of the next
_CLAUSE_BREAK = re.compile(r"[,;:.!?()]+")


def affirmed(text: str) -> str:
    """The text's clauses that hold no negation ("No, it was jazz, not rock" → "it was
    jazz"; "She didn't work at Microsoft; she was a manager at Oracle" → "she was a
    manager at Oracle")."""
    return " ".join(c for c in _CLAUSE_BREAK.split(text) if c.strip() and not negated(c))


def numbers(text: str) -> set[int]:
    """The numbers a text writes in digits ("7 May 2023" → {7, 2023})."""
    return {int(n) for n in re.findall(r"\d+", text)}


def content(text: str, skip: AbstractSet[str] = frozenset()) -> set[str]:
    """Stemmed content words, stopwords and `skip` left out."""
    return {stem(t) for t in terms(text, limit=10_000)} - skip


_MONTH_NUMBERS = {
    name: n
    for n, name in enumerate(
        "january february march april may june july august september october november "
        "december".split(),
        1,
    )
}


_CAMEL = re.compile(r"([a-z]{2})([A-Z][a-z]{2})")  # "JacksonLinda", not "PhD"


def exact_values(text: str, skip: AbstractSet[str] = frozenset()) -> set[str]:
    """The exact values a sentence names after its first word, lower-cased: numbers,
    and capitalised words (names, places, employers, titles, tags). CamelCase is
    split ("JacksonLinda"), a possessive dropped; "I" and `skip` (the person's
    name) are left out."""
    text = _CAMEL.sub(r"\1 \2", plain_numbers(text))
    out = set()
    for token in re.findall(r"[\w'’-]+", text)[1:]:
        word = re.sub(r"['’]s$", "", token.strip("'’-"))
        if word == "I" or word.lower() in skip:
            continue
        if any(c.isdigit() for c in word) or word[:1].isupper():
            out.add(word.lower())
    return out


# words that open a second clause after "and" ("earns 15,600 USD a month and has
# 139,000 USD in savings"); any other word after "and" continues a list ("friends,
# colleagues and family"). A past form ("... and joined a club") counts too.
_CLAUSE_VERBS = frozenset(
    "is are was were has have had will would can could should might may plans wants likes "
    "loves enjoys dislikes hates feels believes thinks makes takes goes went uses works lives "
    "prefers hopes needs seeks values finds found attends visits receives becomes became keeps "
    "shares wishes aims intends took made gets got knows sees watches reads plays drinks eats "
    "earns manages leads oversees runs owns considers".split()
)
_AND = re.compile(r",?\s+and\s+(?=(\w+))")
_SUBJECT = re.compile(r"^((?:[A-Z][\w'’-]+\s+){1,2})")


def information_points(memory: str) -> list[str]:
    """A memory cut into its information points, as HaluMem's rubric reads it
    before asking whether each has a field among the references: its sentences,
    and clauses joined by "and" ("... was promoted to Senior Director and plans to
    leave Huaxin Consulting"), each given the sentence's subject back. A sentence is
    taken as written ("She lives in Porto"): no pronoun is resolved."""
    out: list[str] = []
    for sentence in sentences(memory) or [memory.strip()]:
        m = _SUBJECT.match(sentence)
        subject = m.group(1) if m else ""
        pieces = _AND.split(sentence)  # [text, next word, text, next word, text, ...]
        points = [pieces[0]]
        for word, rest in zip(pieces[1::2], pieces[2::2], strict=True):
            w = word.lower()
            if w in _CLAUSE_VERBS or (w.endswith("ed") and len(w) > 4):
                points.append(f"{subject}{rest}")
            else:
                points[-1] = f"{points[-1]} and {rest}"
        out.extend(points)
    return out


def values_missing(values: AbstractSet[str], memories: Sequence[str]) -> set[str]:
    """Those of `values` (`exact_values`) that no memory names: a word absent as a
    word and as a stem; a number whose digit groups the memories do not write (a
    date in another format counts: "1986-03-26" is in "26 March 1986")."""
    said: set[str] = set()
    nums: set[int] = set()
    for memory in memories:
        memory = _CAMEL.sub(r"\1 \2", plain_numbers(memory))  # "WilsonMatthew": Wilson
        for token in re.findall(r"[\w'’-]+", memory):
            word = re.sub(r"['’]s$", "", token.strip("'’-").lower())
            said |= {word, stem(word)}
            if word in _MONTH_NUMBERS:
                nums.add(_MONTH_NUMBERS[word])
        nums |= numbers(memory)
    missing = set()
    for value in values:
        if any(c.isdigit() for c in value):
            if {int(n) for n in re.findall(r"\d+", value)} <= nums:
                continue
        elif value in said or stem(value) in said:
            continue
        missing.add(value)
    return missing


def days(text: str) -> set[tuple[int, int]]:
    """The (month, day) pairs a text names: "7 May", "May 7th", "2023-05-07"."""
    out = {(int(m), int(d)) for _, m, d in _ISO.findall(text)}
    out |= {(_MONTHS[m.lower()], int(d)) for d, m in _DAY_MONTH.findall(text)}
    out |= {(_MONTHS[m.lower()], int(d)) for m, d in _MONTH_DAY.findall(text)}
    return {(m, d) for m, d in out if 1 <= d <= 31}


_RELATIVE = re.compile(
    r"\b(?:before|after|week|weekend|around|about|between|since|until|early|late|mid)\b",
    re.IGNORECASE,
)


def other_day(reference: str, answer: str) -> bool:
    """Both name a day of the year and the answer names none of the reference's
    (a reference relative to its day, "the Friday before 15 July", is not compared)."""
    if _RELATIVE.search(reference):
        return False
    want, got = days(reference), days(answer)
    return bool(want and got and not want & got)


_COUNT_WORDS = {
    w: n
    for n, w in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve".split()
    )
}
_HOW_MANY = re.compile(r"^\s*how many\b", re.IGNORECASE)


def counts(text: str) -> set[int]:
    """The numbers a text names, in digits or as a word up to twelve ("two kids")."""
    said = {_COUNT_WORDS[w] for w in re.findall(r"[a-z]+", text.lower()) if w in _COUNT_WORDS}
    return numbers(text) | said


def other_count(question: str, reference: str, answer: str) -> bool:
    """A "how many" question whose reference and answer each give a count, and no
    count of the answer is the reference's ("two kids" for 3)."""
    if not _HOW_MANY.match(question):
        return False
    want, got = counts(reference), counts(answer)
    return bool(want and got and not want & got)


def other_choice(question: str, reference: str, answer: str) -> bool:
    """A question offering two options ("... a national park or a theme park?") where
    the reference takes one and the answer the other (and not the reference's)."""
    ask = question.rstrip(" ?")
    if ask.lower().count(" or ") != 1:
        return False
    before, after = re.split(r"\s+or\s+", ask, maxsplit=1, flags=re.IGNORECASE)
    first = content(" ".join(before.split()[-3:]))
    second = content(" ".join(after.split()[:3]))
    first, second = first - second, second - first  # "park" in both says nothing

    def takes(text: str) -> str | None:
        words = content(text)
        a, b = bool(first & words), bool(second & words)
        return "first" if a and not b else "second" if b and not a else None

    meant, said = takes(reference), takes(answer)
    return bool(meant and said and meant != said)


def ranked(target: str, items: Sequence[str], skip: frozenset[str], k: int) -> list[str]:
    """The `k` items sharing most content words with `target` (at least one)."""
    want = content(target, skip)
    scored = [(len(want & content(x, skip)), -i, x) for i, x in enumerate(items)]
    return [x for n, _, x in sorted(scored, reverse=True)[:k] if n > 0]


class Check:
    """One yes/no question about two short texts, answered as a probability.

    Where the model can score options (`LLM.option_logprobs`: one forward pass, the
    log-probabilities of "yes" and "no" as the reply's first word) the answer is
    P(yes) normalised over the two; a threshold tuned on the labels' tune half
    then turns it into a decision, which takes out a small model's lean to one
    word. Other models answer by schema; with `votes` > 1 they are asked again at
    a higher temperature and P(yes) is the share of yes. Cached like every judge
    call."""

    def __init__(self, name: str, llm: LLM, cache: JudgeCache, *, votes: int = 1) -> None:
        self.name, self.llm, self.cache, self.votes = name, llm, cache, votes
        self.system = (PROMPTS / f"check_{name}.system.txt").read_text(encoding="utf-8").strip()
        self.item = Template((PROMPTS / f"check_{name}.item.txt").read_text(encoding="utf-8"))

    def p_yes(self, **fields: str) -> float:
        msgs = [
            {"role": "system", "content": self.system},
            {"role": "user", "content": self.item.substitute(**fields).strip()},
        ]
        if self.llm.scores_options:
            return self._scored(msgs)
        return sum(self._sampled(msgs, i) for i in range(self.votes)) / self.votes

    def _scored(self, msgs: list[dict[str, str]]) -> float:
        key = JudgeCache.key(self.llm.name, [*msgs, {"scored": "yes/no"}], {})
        hit = self.cache.get(key)
        if hit is None:
            hit = {"p": self.llm.p_yes(msgs, purpose=f"judge-check:{self.name}")}
            self.cache.put(key, hit)
        return float(hit["p"])

    def _sampled(self, msgs: list[dict[str, str]], sample: int) -> float:
        key = JudgeCache.key(self.llm.name, [*msgs, {"sample": str(sample)}], YES_NO)
        hit = self.cache.get(key)
        if hit is None:
            hit = self.llm.complete_json(
                msgs,
                YES_NO,
                purpose=f"judge-check:{self.name}",
                max_tokens=16,
                temperature=0.0 if sample == 0 else 0.8,
            )
            self.cache.put(key, hit)
        return 1.0 if str(hit.get("answer", "")).strip().lower() == "yes" else 0.0


YES_NO: dict[str, Any] = {
    "type": "object",
    "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
    "required": ["answer"],
    "additionalProperties": False,
}
