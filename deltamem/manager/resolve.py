"""Deciding what each new fact does to the bank (the manager's second step).

The extractor never sees the known memories, so it cannot copy them. Here each
new fact meets only its few nearest memories: none close enough, it is added;
nearly identical to one, it is a duplicate. Otherwise the decision is taken one
of two ways (`ManagerConfig.decide`):

* "code" (default): a fact whose words a memory already holds is the same; one
  that holds all of a memory's words and more is its richer version (an update
  that loses nothing); one that says what a memory says with one value swapped
  ("earns 15600" -> "earns 18000") is a change; anything else is added beside,
  dated, and the answerer takes the newer where two disagree. On the embedded
  1.5B model the narrow call's "changes" was wrong in every sampled verdict and
  erased true facts (docs/journal/benchmarks.md), so it is not the default.
* "model": a narrow call, which answers with a verdict naming a memory by its
  number, decides whether it is new, the same, or a newer state of one of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

import numpy as np

from deltamem.embed.base import Embedder
from deltamem.llm.base import LLM
from deltamem.manager.extract import Candidate
from deltamem.manager.render import template
from deltamem.porter import stem
from deltamem.rules import DEFAULT, RULES, RuleSettings, endings
from deltamem.store.base import PlannedWrite, Store
from deltamem.text import STOPWORDS, keywords, negated, plain_numbers, terms
from deltamem.types import Operation, SessionRecord

# cosine at or above which a fact restates a memory (rule RESTATES_KNOWN's default)
DUPLICATE = RULES["RESTATES_KNOWN"].thresholds["cosine"]
RELATED = 0.4  # cosine (names left out) below which a memory is not worth asking about
NEAREST = 3  # memories shown with a new fact
# words of a date: a swap of these alone is another event, not a changed value
_DATE_WORDS = frozenset(
    "january february march april may june july august september october november december "
    "jan feb mar apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday "
    "friday saturday sunday week weekend "
    # the months of the languages whose endings are read (deltamem.rules.endings)
    "enero febrero marzo abril mayo junio julio agosto septiembre octubre noviembre "
    "diciembre januar februar märz mai juni juli oktober dezember janvier février mars "
    "avril mai juin juillet août septembre octobre novembre décembre".split()
)

Decide = Literal["code", "model"]


@dataclass
class _Option:
    """A stored memory a new fact is compared with."""

    content: str
    date: str
    score: float
    memory_id: str


def without_name(text: str, name: str | None) -> str:
    """The fact without the person's name ("Sarah Garcia's", "The user"), which
    every memory of theirs repeats and which would make them all look alike."""
    for who in filter(None, [name, "The user", "the user", "User"]):
        text = re.sub(re.escape(who) + r"(['’]s)?\b", "", text)
    return " ".join(text.split())


def specifics(text: str) -> set[str]:
    """The exact values a fact carries: numbers and capitalised words after its
    first word (names, places, employers, titles)."""
    tokens = re.findall(r"[\w'’-]+", text)[1:]
    return {
        re.sub(r"['’]s$", "", t).lower()
        for t in tokens
        if any(c.isdigit() for c in t) or t[0].isupper()
    }


def loses_details(old: str, new: str, name: str | None) -> bool:
    """Whether replacing `old` by `new` would drop more than a changed value.

    Either over half of the old memory's content words, and at least three of them,
    are absent from the new one ("lives in Manchester with Tomás and a cat called
    Miso" -> "lives in Lisbon" loses the partner and the cat); or it drops more of
    the old memory's exact values (numbers, names, places) than it brings new ones:
    a change swaps a value ("Manchester" -> "Lisbon", "15600" -> "18000"), a
    paraphrase that forgets "Oracle" is not a change."""
    before = {stem(t) for t in terms(without_name(old, name), limit=64)}
    after = {stem(t) for t in terms(without_name(new, name), limit=64)}
    lost = before - after
    if len(lost) >= 3 and len(lost) > len(before) / 2:
        return True
    was, now = specifics(without_name(old, name)), specifics(without_name(new, name))
    return len(was - now) > max(1, len(now - was))


def _plain(text: str, name: str | None) -> str:
    """The fact without the person's name, numbers without their thousands commas."""
    return plain_numbers(without_name(text, name))


def content_of(text: str, name: str | None) -> set[str]:
    """The stemmed content words of a fact, the person's name and any negation left
    out (a stem that is a stopword goes too: "likes" and "like" compare alike)."""
    stems = {stem(t) for t in terms(_plain(text, name), limit=64) if not negated(t)}
    return stems - STOPWORDS


def _values(text: str, name: str | None) -> set[str]:
    """`specifics` that are not parts of a date (a year, a month, a day)."""
    out = set()
    for v in specifics(_plain(text, name)):
        if v in _DATE_WORDS or re.fullmatch(r"(19|20|21)\d\d|\d{1,2}(st|nd|rd|th)?", v):
            continue
        out.add(v)
    return out


def same_values(a: str, b: str, name: str | None) -> bool:
    """Whether two facts name the same exact values (numbers, names, places)."""
    return _values(a, name) == _values(b, name)


# "Sam and Mia broke up": who the person was with comes before the verb
_PARTED = re.compile(r"^(?P<ended>.+?)\s+and\s+.+?\s+(?:broke|split)\s+up\b", re.IGNORECASE)


def ended_values(fact: str, name: str | None) -> set[str]:
    """The exact values (names, places, employers) of what a fact says has ended:
    {"northwind", "bank"} for "Priya left Northwind Bank and joined Fernhill Labs",
    {"sam"} for "Sam and Mia broke up". Empty for a fact that ends nothing, or ends
    something it does not name ("quit her job")."""
    m = _PARTED.match(fact)
    if m and name and name.lower() in fact.lower():
        return _values("x " + m.group("ended"), name)
    for lang in endings.languages(fact):
        found = next((m for p in endings.ENDS[lang] if (m := p.search(fact))), None)
        if found is None:
            continue
        ended = endings.CLAUSE_END[lang].sub("", found.group("ended"))
        if not endings.NAMED_THING[lang].match(ended):
            return set()  # "left a review for Cafe Nero": what ended is not the named thing
        # `specifics` skips a sentence's first word: the ended thing is not a sentence
        return _values("x " + ended, name)
    return set()


def outdated_values(old: str, new: str, name: str | None = None) -> set[str]:
    """The exact values of `old` that `new` says no longer hold: what it ends, or
    what it swapped for another value ({"northwind", "bank"}; {"15600"})."""
    return ended_values(new, name) or (_values(old, name) - _values(new, name))


def exact_values(text: str, name: str | None = None) -> set[str]:
    """The exact values (names, places, numbers; not dates) anywhere in `text`."""
    return _values("x " + text, name)


def outdates(old: str, new: str, name: str | None = None) -> bool:
    """Whether `new`, written over `old`, says that something `old` stated no longer
    holds: it ends what `old` names, drops one of its exact values (a changed
    employer, city, income), or reverses it. A paraphrase or a richer version
    does not."""
    if negated(old) != negated(new):
        return True
    return bool(ended_values(new, name)) or bool(_values(old, name) - _values(new, name))


def decided_in_code(fact: str, memories: list[str], name: str | None) -> str:
    """The verdict on a new fact against its related memories (numbered from 1),
    taken from their words: "same N" if memory N holds every content word of the
    fact; "changes N" if the fact holds every word of memory N and more (its richer
    version), or says what memory N says with one value swapped for another (the
    same words besides, at least two of them: "earns 15600 USD a month" ->
    "earns 18000 USD a month"; a date alone changing is another event), or says it
    with the negation gone or come (a reversal); "ends N" if it says that what memory
    N names has ended ("left Northwind Bank" for "works at Northwind Bank",
    `ended_values`); else "new". A negated fact is never the same as, or a richer
    version of, one that is not."""
    new = content_of(fact, name)
    if not new:
        return "new"
    ended = ended_values(fact, name)
    for n, memory in enumerate(memories, 1):
        # "left Northwind Bank" ends "works as a data analyst at Northwind Bank": the
        # memory is no longer true, so the fact takes its place (its history keeps it)
        if ended and ended <= _values(memory, name) and not ended_values(memory, name):
            return f"ends {n}"
    new_values = _values(fact, name)
    flipped = negated(fact)
    for n, memory in enumerate(memories, 1):
        old = content_of(memory, name)
        if negated(memory) != flipped:
            # "doesn't like plain t-shirts" -> "likes plain t-shirts": the same words
            # with the negation gone (or come) reverse the memory
            if new == old:
                return f"changes {n}"
            continue
        if new <= old:
            return f"same {n}"
        if old and old < new:
            return f"changes {n}"
        old_values = _values(memory, name)
        gone, came = old_values - new_values, new_values - old_values
        value_stems = {stem(v) for v in old_values | new_values}
        frame = old - value_stems
        if gone and came and len(frame) >= 2 and frame == new - value_stems:
            return f"changes {n}"
    return "new"


def _check_verdict(reply: dict[str, object], allowed: list[str]) -> None:
    if reply.get("verdict") not in allowed:
        raise ValueError(f"verdict must be one of {allowed}")


def verdicts(n: int) -> list[str]:
    return ["new"] + [f"{v} {i}" for i in range(1, n + 1) for v in ("same", "changes")]


class Resolver:
    def __init__(
        self,
        llm: LLM,
        embedder: Embedder,
        store: Store,
        decide: Decide = "code",
        rules: RuleSettings = DEFAULT,
    ) -> None:
        self.llm = llm
        self.embedder = embedder
        self.store = store
        self.decide = decide
        self.rules = rules
        self._repeat = rules.threshold(RULES["REPEATS_SESSION_FACT"], "cosine")
        self._restate = rules.threshold(RULES["RESTATES_KNOWN"], "cosine")
        self._system = template("resolve_system.txt").substitute().strip()
        self._fact = template("resolve_fact.txt")

    def resolve(
        self,
        session: SessionRecord,
        candidates: list[Candidate],
        noops: list[Operation],
        name: str | None = None,
    ) -> tuple[list[PlannedWrite], int]:
        """The session's writes, in order, and how many decisions took a call.

        Facts of one session are all true at once: among themselves they are only
        deduplicated. Each is decided against the stored memories nearest to it,
        and a memory is worth asking about only if it is close once the person's
        name is left out of both (every memory of theirs shares the name)."""
        if not candidates:
            return [], 0
        vecs = self.embedder.embed([c.content for c in candidates])
        bare = self.embedder.embed([without_name(c.content, name) for c in candidates])
        writes: list[PlannedWrite] = []
        calls = 0
        for cand, vec, bare_vec in zip(candidates, vecs, bare, strict=True):
            if self.rules.on("REPEATS_SESSION_FACT") and any(
                float(w.embedding @ vec) >= self._repeat
                and same_values(w.content, cand.content, name)
                for w in writes
            ):
                noops.append(
                    Operation(
                        op="none",
                        content=cand.content,
                        turns=[cand.turn],
                        note="repeats a fact of this session",
                        rule="REPEATS_SESSION_FACT",
                    )
                )
                continue
            options = self._nearest(session, vec, writes)
            # nearly the same sentence is a duplicate, unless a value differs
            # ("earns 3,100 GBP" / "earns 3,600 GBP" are 0.97 alike)
            top = options[0] if options else None
            if (
                self.rules.on("RESTATES_KNOWN")
                and top
                and top.score >= self._restate
                and same_values(top.content, cand.content, name)
            ):
                noops.append(self._noop(cand, top, "restates a known memory", "RESTATES_KNOWN"))
                continue
            related = self._related(options, bare_vec, name)
            verdict = "new"
            if related and self.decide == "code":
                verdict = decided_in_code(cand.content, [o.content for o in related], name)
            elif related:
                verdict = self._ask(session, cand, related)
                calls += 1
            kind, _, number = verdict.partition(" ")
            if kind == "same" and not self.rules.on("SAME_AS_KNOWN"):
                kind = "new"
            if kind == "new":
                writes.append(self._outdating(self._write("add", cand, vec), session, writes, name))
                continue
            target = related[int(number) - 1]
            if kind == "same":
                noops.append(
                    self._noop(cand, target, "the same as a known memory", "SAME_AS_KNOWN")
                )
            elif (
                kind == "changes"
                and self.rules.on("UPDATE_LOSES_DETAILS")
                and loses_details(target.content, cand.content, name)
            ):
                # the update would erase what is still true of the old memory: both stay,
                # dated, and the answerer takes the newer where they disagree
                noops.append(
                    self._noop(
                        cand, target, "update would drop details; added", "UPDATE_LOSES_DETAILS"
                    )
                )
                writes.append(self._outdating(self._write("add", cand, vec), session, writes, name))
            else:
                update = self._write("update", cand, vec, target.memory_id)
                writes.append(self._outdating(update, session, writes, name))
        return writes, calls

    def _outdating(
        self,
        write: PlannedWrite,
        session: SessionRecord,
        writes: list[PlannedWrite],
        name: str | None,
    ) -> PlannedWrite:
        from deltamem.manager.outdate import mark_outdated  # it imports this module

        return mark_outdated(self.store, write, session, writes, name, self.rules)

    def _related(
        self, options: list[_Option], bare_vec: np.ndarray, name: str | None
    ) -> list[_Option]:
        if not options:
            return []
        bare = self.embedder.embed([without_name(o.content, name) for o in options])
        return [o for o, v in zip(options, bare, strict=True) if float(v @ bare_vec) >= RELATED]

    def _nearest(
        self, session: SessionRecord, vec: np.ndarray, writes: list[PlannedWrite]
    ) -> list[_Option]:
        """The stored memories nearest to a fact, leaving out those this session
        already updates (one update per memory and session)."""
        updated = {w.memory_id for w in writes if w.memory_id}
        found = self.store.dense_search(
            session.user_id, vec, NEAREST + len(updated), session.agent_id
        )
        scores = dict(found)
        mems = self.store.get_many([mid for mid, _ in found if mid not in updated])
        current = [m for m in mems if m.invalid_at is None]
        return [
            _Option(m.content, f"{m.timestamp:%Y-%m-%d}", scores[m.id], m.id)
            for m in current[:NEAREST]
        ]

    def _ask(self, session: SessionRecord, cand: Candidate, related: list[_Option]) -> str:
        remembered = "\n".join(f"{n}. ({o.date}) {o.content}" for n, o in enumerate(related, 1))
        prompt = self._fact.substitute(
            remembered=remembered, fact=cand.content, date=f"{session.timestamp:%Y-%m-%d}"
        )
        allowed = verdicts(len(related))
        reply = self.llm.complete_json(
            [{"role": "system", "content": self._system}, {"role": "user", "content": prompt}],
            {
                "type": "object",
                "properties": {"verdict": {"enum": allowed}},
                "required": ["verdict"],
            },
            purpose="resolve",
            max_tokens=16,
            check=lambda r: _check_verdict(r, allowed),
        )
        return str(reply["verdict"])

    @staticmethod
    def _write(
        op: str, cand: Candidate, vec: np.ndarray, memory_id: str | None = None
    ) -> PlannedWrite:
        return PlannedWrite(
            op=op,
            content=cand.content,
            embedding=vec,
            memory_id=memory_id,
            keywords=keywords(cand.content),
            turns=[cand.turn],
        )

    @staticmethod
    def _noop(cand: Candidate, target: _Option, why: str, rule: str) -> Operation:
        return Operation(
            op="none",
            memory_id=target.memory_id,
            content=cand.content,
            turns=[cand.turn],
            note=why,
            rule=rule,
        )
