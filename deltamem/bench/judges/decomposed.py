"""Judges a 1.5B model can run: code first, then small closed checks.

Each judgement is split into what code can settle (nothing stored, an answer
that says it does not know, every word of the reference found, a day of the
year that differs) and comparisons of two short texts the model answers with
yes or no (`checks.Check`), read as a probability and cut at a threshold tuned
on the labels' tune half (`THRESHOLDS`). The verdict is then composed in code,
with a reason that says which step decided it. Same fields as the rubric judges
(`sets.py`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from deltamem.bench.judges.base import JudgeCache
from deltamem.bench.judges.checks import (
    Check,
    abstains,
    affirmed,
    beyond_the_question,
    content,
    exact_values,
    information_points,
    numbers,
    other_choice,
    other_count,
    other_day,
    polarity,
    ranked,
    restates,
    values_missing,
)
from deltamem.bench.judges.text import after_opening
from deltamem.embed.base import Embedder
from deltamem.llm.base import LLM
from deltamem.train.distance import DEFAULT_TAU

CANDIDATES = 3  # memories (or turns) a check is asked about, best word overlap first

# P(yes) cut points, tuned on the tune half of bench/labels (docs/journal/benchmarks.md)
THRESHOLDS: dict[str, float] = {
    "same_answer": 0.65,  # HaluMem QA: the same answer
    # HaluMem QA, an answer that shares no word with the reference (the question's
    # aside): the check passes topical answers ("more narrative-driven games" for
    # "story-rich books") at P 0.7-0.8 (tune half with qa-084 … qa-123, 2026-11-25:
    # kappa 0.712 -> 0.737, failed answers called correct 5 -> 2 of 38; 0.8-0.9 tie)
    "same_answer_unshared": 0.8,
    # LoCoMo: "the same thing as the gold answer". 0.3 was tuned on 30 answers we wrote;
    # on 103 the embedded answerer gave (conv-41-43, labelled by two blind readers,
    # bench/labels locomo-061 ...) it passed 26 wrong ones: 0.7 on the tune half
    # (kappa 0.567 -> 0.714; 0.65 0.680, 0.75 0.659), forty-second session
    "same_answer_locomo": 0.7,
    # HaluMem QA, a yes/no answer opening with the reference's word: the check
    # compares what follows, which rewords the reason ("still interested in the
    # hikes" for "embraced them"), and gives right answers P 0.2-0.4 (tune half,
    # 2026-11-23: kappa 0.638 -> 0.794; 0.25 or 0.35 give 0.708 / 0.638)
    "same_polarity": 0.3,
    "covers_full": 0.65,
    "covers_part": 0.3,
    "update": 0.75,
    "conflict": 0.65,
    # accuracy (tune half, 2026-11-23: kappa 0.42 -> 0.80; with the value cap,
    # thirteenth session: 0.5 -> 0.45, kappa 0.80 -> 0.86)
    "supported_full": 0.45,
    "supported_part": 0.15,
    # the `included` flag: "does the reference speak of this same particular thing?"
    # (tune half with the 30 labels of 2026-11-25: kappa 0.532 -> 0.596; 0.4 gives 0.580)
    "same_field": 0.5,
}
# a reference this close in meaning (embedding cosine) to an information point holds
# its field without asking: the state distance's "same memory" cut, not tuned here
NEAR_IN_MEANING = DEFAULT_TAU


# a question that asks for what the person is against: a negated answer restates it
_ASKS_DISLIKE = re.compile(r"\b(?:dislike[sd]?|hates?|avoids?)\b", re.IGNORECASE)


def common_words(items: list[str]) -> frozenset[str]:
    """Words most items share (the person's name, in a list of their memories),
    which say nothing about which item matches."""
    if len(items) < 4:
        return frozenset()
    counts = Counter(w for x in items for w in content(x))
    return frozenset(w for w, n in counts.items() if n >= len(items) / 2)


def opening(text: str) -> set[str]:
    """The first two words, lower-cased, possessive dropped: the person's name in a
    fact or memory about them, which is no value of its own."""
    return {re.sub(r"['’]s$", "", w.lower()) for w in text.split()[:2]}


_SUBJECT = re.compile(r"^(?:The user|[A-Z][\w-]+(?: [A-Z][\w-]+){0,2}?)(?=['’]s\b|\s+[a-z])")


def subject_of(memory: str) -> str:
    """Whom a memory is about, as it names them first ("Sarah Garcia", "The user")."""
    m = _SUBJECT.match(memory)
    return m.group(0) if m else ""


def graded(p: float, full: float, part: float) -> int:
    return 2 if p >= full else 1 if p >= part else 0


_FROM_TO = re.compile(r"""\bfrom\s+['"‘“](.+?)['"’”]\s+to\s+['"‘“](.+?)['"’”]""")


def changed_value(new: str, memories: list[str]) -> dict[str, Any] | None:
    """The verdict on an update written as a change of value ("... updated
    monthly_income from "15700" to "18000"", HaluMem's form), where code can say:
    a memory names the new value and none the old (correct); a memory names another
    figure where the new value is a figure (hallucination: "earns 19000"); only
    the old value is named (omission: "health is normal" for 'Normal' ->
    'Improved'). None where it cannot say, and the checks decide. A memory that
    itself reads "from X to Y" states Y, not X."""
    m = _FROM_TO.search(new)
    if m is None:
        return None
    was, now = m.group(1), m.group(2)
    gained = content(now) - content(was)
    old_words, old_nums, new_nums = content(was), numbers(was), numbers(now)

    def stated(memory: str) -> tuple[set[str], set[int]]:
        own = _FROM_TO.search(memory)
        text = memory.replace(own.group(0), own.group(2)) if own else memory
        return content(text), numbers(text)

    def names_new(words: set[str], nums: set[int]) -> bool:
        return bool(gained or new_nums) and gained <= words and new_nums <= nums

    said = [stated(memory) for memory in memories]
    new_named = any(names_new(w, n) for w, n in said)
    old_named = any(
        bool(old_words or old_nums) and old_words <= w and old_nums <= n and not names_new(w, n)
        for w, n in said
    )
    if new_named:
        if old_named:  # both stated as current: which holds is the checks' to say
            return None
        return {"verdict": "correct", "reason": f"a memory names the new value {now!r} (code)"}
    for _, nums in said:
        # a figure of the new value's size: another amount, not a year or a day
        other = nums - old_nums - new_nums
        if any(n2 / 3 <= n <= n2 * 3 for n in other for n2 in new_nums):
            return {
                "verdict": "hallucination",
                "reason": f"a memory names another value than {now!r} (code)",
            }
    if old_named and (gained or new_nums):
        return {"verdict": "omission", "reason": f"only the old value {was!r} is named (code)"}
    return None


class DecomposedJudges:
    mode = "decomposed"

    def __init__(
        self,
        llm: LLM,
        cache: JudgeCache,
        *,
        votes: int = 1,
        thresholds: Mapping[str, float] | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        self.t = {**THRESHOLDS, **(thresholds or {})}
        self._embedder = embedder  # made on first use: only `included` reads it
        self._refs: tuple[tuple[str, ...], np.ndarray] = ((), np.zeros((0, 0)))
        self.same_answer = Check("same_answer", llm, cache, votes=votes)
        self.covers = Check("covers", llm, cache, votes=votes)
        self.update_check = Check("update", llm, cache, votes=votes)
        self.conflict = Check("conflict", llm, cache, votes=votes)
        self.supported = Check("supported", llm, cache, votes=votes)
        self.same_field = Check("same_field", llm, cache, votes=votes)

    # -- answers -------------------------------------------------------------

    def _answer(
        self, question: str, answer: str, prediction: str, cut: str = "same_answer"
    ) -> tuple[str, str]:
        """One of correct / partly / wrong / abstained / invented, and why."""
        if not prediction.strip():
            return "abstained", "no answer"
        if abstains(prediction):
            if abstains(answer):
                return "correct", "both say it is not known (code)"
            return "abstained", "the answer says it does not know (code)"
        if abstains(answer):
            return "invented", "the reference says it is not known; the answer gives one (code)"
        if other_day(answer, prediction):
            return "wrong", "the answer names another day (code)"
        if other_count(question, answer, prediction):
            return "wrong", "the answer gives another count (code)"
        if other_choice(question, answer, prediction):
            return "wrong", "the answer takes the other of the two options (code)"
        # a yes/no question answered with the other word is wrong, whatever follows
        # (the 1.5B check passed "Yes, it improved" for "No, it became 'Abnormal'");
        # the same word is not enough to be right: "No, he remained negative" for
        # "No, it became positive" opens right and then gets the fact wrong
        said, meant = polarity(question, prediction), polarity(question, answer)
        if said and meant and said != meant:
            return "wrong", f"the answer says {said!r}, the reference {meant!r} (code)"
        same_word = said if said is not None and said == meant else None
        claims, meant_beyond = prediction, answer
        if same_word is not None:
            if restates(question, prediction, negative=same_word == "no"):
                # "No, he did not abandon them" for "No, he embraced them": the question
                # is answered and nothing is claimed beyond it (the check wants detail)
                return (
                    "correct",
                    f"both answer {same_word!r}; the rest restates the question (code)",
                )
            if cut == "same_answer":
                cut = "same_polarity"
            # after the reference's own yes or no, a sentence that only says the question
            # again ("No, he did not decide to switch to casual attire") is that word;
            # what the answer claims is the rest, and a negation there is its own
            claims = beyond_the_question(question, prediction, negative=same_word == "no")
            meant_beyond = after_opening(answer)
        asked = content(question)
        want, found = content(meant_beyond, asked), content(claims, asked)
        if same_word is not None and not want and not numbers(meant_beyond):
            return "correct", f"both answer {same_word!r}; the reference says no more (code)"
        # Code settles the two cases a 1.5B check gets wrong most (hand labels, both
        # halves): an answer that holds every word and number of the reference and
        # adds detail ("a manager at Oracle" for "Manager") is right; one that gives
        # some of the reference's words and nothing else ("chia seeds and
        # spirulina" for three ingredients) leaves part out. Anything else, such as
        # "Senior Manager" for "Manager", is for the check to say. The words count
        # where no negation denies them ("jazz, not rock"), unless the question asks
        # what is disliked: "does not like heavy metal" answers "What music does she
        # dislike?"
        held = found if _ASKS_DISLIKE.search(question) else content(affirmed(claims), asked)
        if want and want <= held and numbers(answer) <= numbers(prediction):
            return "correct", "the answer holds the reference's words and numbers (code)"
        if found and found < want and numbers(claims) <= numbers(answer):
            return "partly", "the answer gives part of the reference and nothing else (code)"
        if cut == "same_answer" and want and not want & found:
            cut = "same_answer_unshared"
        p = self.same_answer.p_yes(question=question, reference=answer, answer=prediction)
        note = ", no word of the reference" if cut == "same_answer_unshared" else ""
        if p >= self.t[cut]:
            return "correct", f"check: same answer (p {p:.2f}{note})"
        return "wrong", f"check: not the same (p {p:.2f}{note})"

    def qa(
        self, question: str, answer: str, evidence: list[str], prediction: str
    ) -> dict[str, Any]:
        outcome, why = self._answer(question, answer, prediction)
        verdict = {
            "correct": "correct",
            "partly": "omission",
            "abstained": "omission",
            "wrong": "hallucination",
            "invented": "hallucination",
        }[outcome]
        return {"verdict": verdict, "reason": why}

    def locomo(self, question: str, answer: str, prediction: str) -> dict[str, Any]:
        outcome, why = self._answer(question, answer, prediction, "same_answer_locomo")
        # LoCoMo's rubric is lenient: naming part of a list, and nothing wrong, counts
        label = "CORRECT" if outcome in ("correct", "partly") else "WRONG"
        return {"label": label, "reason": why}

    # -- extraction ------------------------------------------------------------

    def integrity(self, memories: list[str], fact: str) -> dict[str, Any]:
        if not memories:
            return {"score": 0, "reason": "no memories extracted"}
        skip = common_words(memories)
        found = ranked(fact, memories, skip, CANDIDATES)
        if not found:
            return {"score": 0, "reason": "no memory shares a word with the fact (code)"}
        want = content(fact, skip)
        if any(want <= content(m) for m in found):
            return {"score": 2, "reason": "a memory holds every word of the fact (code)"}
        p = max(self.covers.p_yes(fact=fact, memory=m) for m in found)
        score = graded(p, self.t["covers_full"], self.t["covers_part"])
        why = f"check over {len(found)} memories: best p {p:.2f}"
        # the exact values settle what the check leans on: a name, a number or a
        # tag the memories lack is not "fully" kept ("1 million lives", "Max
        # Richter"); every one of them kept makes a partial match full ("works at
        # Oracle" in "a manager at Oracle"). For a change, only its new value counts.
        values = exact_values(_FROM_TO.sub(lambda m: f"to {m.group(2)}", fact), opening(fact))
        missing = values_missing(values, memories)
        if score == 2 and missing:
            return {"score": 1, "reason": f"{why}; no memory names {sorted(missing)} (code)"}
        if score == 1 and values and not missing:
            return {"score": 2, "reason": f"{why}; every value of the fact is named (code)"}
        return {"score": score, "reason": why}

    def accuracy(self, dialogue: list[str], gold: list[str], memory: str) -> dict[str, Any]:
        own = [t.split(":", 1)[1].strip() for t in dialogue if t.startswith("user:")]
        sources = ranked(memory, own + gold, common_words(own + gold), CANDIDATES)
        if not sources:
            score, why = 0, "nothing the person said shares a word with it (code)"
        else:
            p = self.supported.p_yes(said="\n".join(f"- {s}" for s in sources), memory=memory)
            score = graded(p, self.t["supported_full"], self.t["supported_part"])
            why = f"check: supported p {p:.2f}"
            # a name or number that neither the person nor the references name is not
            # "fully" supported, whatever the check leans to ("a PhD in Sociology")
            missing = values_missing(exact_values(memory, opening(memory)), own + gold)
            if score == 2 and missing:
                score, why = 1, f"{why}; nothing said names {sorted(missing)} (code)"
        # The product's own write rules (whose clause a fact was said in, a label
        # nobody used) are no grader's: a memory is judged by the check and the
        # values above, never refused because the manager would not write it
        # (docs/judges.md).
        return {"score": score, "included": self._included(memory, gold), "reason": why}

    def _included(self, memory: str, gold: list[str]) -> bool:
        """HaluMem's rule: every information point of the memory has a field among
        the references, whatever its value. A point is held by a reference near it
        in meaning ("is married" by "partner status: divorced", which share no
        word) or holding every one of its words, else by a candidate reference that
        the check says speaks of the same particular thing; one point without one
        makes the memory not included. The candidates are those sharing most words
        with the point and those nearest in meaning: in a session about music every
        reference says "music", and the word ranking, which skips words most
        references share, finds none for "enjoys music"."""
        if not gold:
            return False
        skip = common_words(gold)
        for point in information_points(memory):
            similarity = self._similarities(point, gold)
            if float(similarity.max()) >= NEAR_IN_MEANING:
                continue
            words = content(point, skip) - content(subject_of(point))
            if words and any(words <= content(g) for g in gold):
                continue  # a reference holds every word of it ("has support from colleagues")
            near = ranked(point, gold, skip, CANDIDATES)
            near += [gold[i] for i in np.argsort(-similarity)[:CANDIDATES] if gold[i] not in near]
            if not any(self.same_field.p_yes(a=point, b=g) >= self.t["same_field"] for g in near):
                return False
        return True

    def _similarities(self, text: str, others: list[str]) -> np.ndarray:
        """The cosine of `text` to each of `others` (embedders give unit rows). The
        references are embedded once per list: every memory of a session is judged
        against the same ones."""
        if self._embedder is None:
            from deltamem.embed import make_embedder

            self._embedder = make_embedder()
        key = tuple(others)
        if self._refs[0] != key:
            self._refs = (key, self._embedder.embed(others))
        return self._refs[1] @ self._embedder.embed_one(text)

    # -- updates -----------------------------------------------------------------

    def update(self, old: list[str], new: str, memories: list[str]) -> dict[str, Any]:
        if not memories:
            return {"verdict": "omission", "reason": "nothing returned"}
        found = ranked(new, memories, common_words(memories), CANDIDATES)
        if not found:
            return {"verdict": "omission", "reason": "nothing returned about this fact (code)"}
        settled = changed_value(new, found)
        if settled is not None:
            return settled
        was = " / ".join(old)
        p = max(self.update_check.p_yes(old=was, new=new, memory=m) for m in found)
        # both checks always, so that their thresholds can be tuned from the cache
        q = max(self.conflict.p_yes(old=was, new=new, memory=m) for m in found)
        if p >= self.t["update"]:
            return {"verdict": "correct", "reason": f"check: new version stated (p {p:.2f})"}
        if q >= self.t["conflict"]:
            return {"verdict": "hallucination", "reason": f"check: a differing version (p {q:.2f})"}
        return {"verdict": "omission", "reason": f"check: new version absent (p {p:.2f})"}
