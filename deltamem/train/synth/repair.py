"""What code mends in a generated memory before the checks read it.

A small model writes the profile step's facts as one paragraph per life area ("Emily
works as a nurse. Her employer is XYZ Hospital, and she earns $70,000 a year. She
is taking regular exercise …"), with the keywords spread over its sentences, and it
names a keyword in another form than its text ("cooking" for "likes to cook").
Refusing these (docs/journal/benchmarks.md: two personas, 12 generations, nothing kept) is
what the checks did; mending them keeps the facts the model did state:

- a paragraph is split into its sentences (`manager.atomise.split_facts`, which
  also gives a sentence that opens with "She" / "Her" the person's name back); a
  sentence is kept as a fact where it holds at least two of the keywords, with
  those keywords;
- a one-word keyword that is not in the text, but whose stem is a word of the text,
  becomes that word (`keyword_in` then finds it, as the reward will);
- a keyword that is the person's name (which every memory holds, so it tells the
  reward nothing) is dropped where enough others are left.

What is mended is still checked; nothing is invented: a sentence without two
keywords is dropped, not given new ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from deltamem.manager.atomise import split_facts
from deltamem.porter import stem
from deltamem.text import terms
from deltamem.train.distance import keyword_in
from deltamem.train.synth.checks import MAX_KEYWORDS, MIN_KEYWORDS
from deltamem.train.synth.schemas import (
    AnchorReply,
    DialogueTurn,
    Fact,
    OpsReply,
    ProfileReply,
)


def keyword_as_written(keyword: str, text: str) -> str:
    """`keyword`, or the word of `text` it is another form of ("cooking" → "cook")."""
    if keyword_in(keyword, text) or len(keyword.split()) != 1:
        return keyword
    want = stem(keyword.strip().lower())
    return next((w for w in terms(text) if stem(w.lower()) == want), keyword)


def keywords_as_written(
    keywords: Sequence[str], text: str, first_name: str | None = None
) -> list[str]:
    """The keywords in `text`'s own words, less the person's name and those the text
    does not hold, where at least MIN_KEYWORDS others are left."""
    mended = [keyword_as_written(k, text) for k in keywords]
    if first_name:
        others = [k for k in mended if not keyword_in(first_name, k)]
        if len(others) >= MIN_KEYWORDS:
            mended = others
    present = [k for k in mended if keyword_in(k, text)]
    return present if len(present) >= MIN_KEYWORDS else mended


def split_fact(fact: Fact) -> list[Fact]:
    """A paragraph fact as the sentences of it that carry two or more keywords (each
    with its own); a fact of one sentence, or one no sentence of which carries two,
    comes back whole (keywords mended), for the checks to judge."""
    whole = fact.model_copy(update={"keywords": keywords_as_written(fact.keywords, fact.content)})
    sentences = split_facts(fact.content)
    if len(sentences) < 2:
        return [whole]
    kept: list[Fact] = []
    for sentence in sentences:
        mine = [k for k in keywords_as_written(fact.keywords, sentence) if keyword_in(k, sentence)]
        if len(mine) >= MIN_KEYWORDS:
            kept.append(Fact(area=fact.area, content=sentence, keywords=mine[:MAX_KEYWORDS]))
    return kept or [whole]


def mend_profile(reply: ProfileReply) -> ProfileReply:
    """The profile reply with each paragraph fact split (`split_fact`)."""
    facts = [piece for fact in reply.facts for piece in split_fact(fact)]
    return reply.model_copy(update={"facts": facts})


def one_sentence(memory: str, keywords: Sequence[str]) -> tuple[str, list[str]]:
    """A memory written as a paragraph, cut to its sentence that carries the most of
    its keywords (two at least), with those keywords; a sentence or a paragraph
    without such a sentence comes back as it is, for the checks to judge."""
    sentences = split_facts(memory)
    if len(sentences) < 2:
        return memory, list(keywords)
    scored = []
    for n, sentence in enumerate(sentences):
        mine = [k for k in keywords_as_written(keywords, sentence) if keyword_in(k, sentence)]
        scored.append((len(mine), -n, sentence, mine))
    count, _, sentence, mine = max(scored)
    return (sentence, mine[:MAX_KEYWORDS]) if count >= MIN_KEYWORDS else (memory, list(keywords))


def mend_anchor(reply: AnchorReply, first_name: str | None = None) -> AnchorReply:
    """The anchor thread with each step one sentence (`one_sentence`: a 1.5B model
    writes the anchor's feelings as a paragraph) and its keywords in its own words."""
    thread = []
    for s in reply.thread:
        memory, keywords = one_sentence(s.memory, s.keywords)
        keywords = keywords_as_written(keywords, memory, first_name)
        thread.append(s.model_copy(update={"memory": memory, "keywords": keywords}))
    return reply.model_copy(update={"thread": thread})


_PLACEHOLDER = re.compile(r"^[\s.…]*$")


def mend_ops(reply: OpsReply, first_name: str | None = None) -> tuple[OpsReply, list[str]]:
    """The operations and distractors with their keywords in their text's own words;
    an operation left as the prompt's placeholder ("...") is dropped, and an update
    that quotes no fact becomes an add (a 1.5B model copies the example's shape).
    Returns the reply and a note per change, for the log."""
    ops, notes = [], []
    for i, o in enumerate(reply.operations, 1):
        if _PLACEHOLDER.match(o.memory):
            notes.append(f"operation {i} ({o.op}) is the placeholder {o.memory!r}: dropped")
            continue
        if o.op == "update" and not o.replaces.strip():
            notes.append(f"operation {i} (update) quotes no fact: made an add")
            o = o.model_copy(update={"op": "add"})
        ops.append(
            o.model_copy(update={"keywords": keywords_as_written(o.keywords, o.memory, first_name)})
        )
    distractors = [
        d.model_copy(update={"keywords": keywords_as_written(d.keywords, d.memory, first_name)})
        for d in reply.distractors
    ]
    return reply.model_copy(update={"operations": ops, "distractors": distractors}), notes


def mend_turn(turn: DialogueTurn, name: str) -> DialogueTurn:
    """An exchange without the speaker labels a small model writes into the text
    ("Emily: I work nights …", "Assistant: …")."""
    first = re.escape(name.split()[0])
    user = re.sub(rf"^\s*(?:user|{first}(?:\s+\w+)?)\s*:\s*", "", turn.user, flags=re.I)
    assistant = re.sub(r"^\s*(?:assistant|AI)\s*:\s*", "", turn.assistant, flags=re.I)
    return DialogueTurn(user=user, assistant=assistant)
