"""What the person said to the listener is not a fact about the person.

In a chat between two people half of what one says is about the other: praise
("Your cooking skills are awesome" -> "Joanna has cooking skills"), questions
("What specifically are you allergic to?" -> "Nate is allergic to peanuts"),
advice ("Read lots. Build a solid understanding of literature." -> "Joanna is trying
to build a solid understanding of literature"). The 1.5B extractor writes each as a
fact about the speaker, every word of it said. This check reads the clauses the fact
was made from (`deltamem.rules.sources`): where each of them is about the listener, the
fact is refused. A clause is about the listener when

* it speaks of "you" or "your" and the speaker is not in it ("I love when you try
  something new" and "advice for someone like me" are the speaker's; "Keep me posted
  on how your campaign is going", an order, is not; a pleasantry, "Glad you enjoyed
  it" -> "Maria is glad John enjoyed it", says nothing of the person),
* it asks, and the speaker is not in it ("Are you excited?"; "Did I tell you I
  adopted a puppy?" is the speaker's news), or
* the fact names the person twice where the message says "you" ("Nate has faith in
  Nate" from "I have faith in you!"): the second is the listener, written with the
  person's name, or
* it tells the listener to do something (English: it opens with a verb's bare form,
  "Keep up the hard work!"; a verb of feeling opening a clause is the speaker's own,
  "Love your creations!" is "I love ...").

Two English facts have put the listener in the listener's place already and are kept:
one that reports an act of speech carrying something of the speaker's, a recommendation
or advice ("Caroline recommends 'Becoming Nicole' to Melanie"), unless it makes a "your
X" the person's, and one that gives each "your X" of the clause to someone it names
("John is motivated by Maria's help"). A fact that reports only the asking, the
encouraging or the thanks ("Tim asks if John has a favorite beach memory") is refused
with the clause it reports.
"""

from __future__ import annotations

import re

from lemminflect import getAllLemmas  # type: ignore[import-untyped]

from deltamem.porter import stem
from deltamem.rules.base import Outcome
from deltamem.rules.grounding import FIRST_PERSON_WORDS
from deltamem.rules.pipeline import FactInput
from deltamem.rules.sources import Clause, sources
from deltamem.text import words

# the listener's words, by language
SECOND_PERSON = {
    "en": frozenset("you you're you've you'd you'll your yours yourself yourselves y'all".split()),
    "es": frozenset(
        "tú tu tus te ti contigo usted ustedes vosotros vosotras vuestro vuestra vuestros "
        "vuestras tuyo tuya tuyos tuyas".split()
    ),
    "de": frozenset("du dich dir dein deine deinen deinem deiner deines euch euer eure".split()),
    "fr": frozenset("tu te t' toi ton ta tes vous votre vos".split()),
}
# the speaker in a clause; English's object "me" and "us" count except in an order
# ("keep me posted on your campaign" is the listener's; "advice for someone like me"
# is the speaker's); the other languages' count always ("me gusta", "mir gefällt")
_SPEAKER = FIRST_PERSON_WORDS
_OBJECT_ONLY = {"en": frozenset({"me", "us"})}
# openers of an order that are not its verb ("Just keep going", "Don't be afraid")
_BEFORE_ORDER = frozenset("just please definitely do don't dont".split())
# verbs of feeling and thought: a clause opening with one has dropped its "I"
# ("Love your creations!", "Hope it goes well", "Guess so")
_FEELING = frozenset(
    "love like hope wish miss think guess need want mean bet agree feel know wonder "
    "appreciate adore hate enjoy reckon suppose remember".split()
)
# verbs that report an act of speech that carries something of the speaker's: a fact
# that opens with one ("Caroline recommends 'Becoming Nicole' to Melanie") is what the
# speaker did, whoever it was for; asking, encouraging or praising carries nothing of
# theirs ("Joanna is asking if taking care of them is tough")
_SPEECH_ACTS = frozenset("suggest recommend advise tell remind invite".split())
# what may stand between the person and that verb ("Maria is recommending", "Maria also tells")
_BEFORE_ACT = frozenset("is was has had have also often then again just".split())
# a word after the opener that makes the opener a noun ("Work is crazy")
_NOUN_AFTER = frozenset("is was has had has been 's are were will would can could".split())


def _tokens(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in words(text)]


def _orders(text: str) -> bool:
    """Whether a clause opens with an order (English): a verb's bare form."""
    said, tokens = words(text), _tokens(text)
    i = 0
    while i < len(tokens) - 1 and tokens[i] in _BEFORE_ORDER:
        i += 1
    word = tokens[i] if tokens else ""
    if word in _FEELING or word in ("let's", "lets", "thank", "thanks"):
        return False
    if i + 1 < len(tokens) and tokens[i + 1] in _NOUN_AFTER:
        return False
    # a name ("Fox Hollow is a great trail"), not the verb "fox"
    if i + 1 < len(said) and said[i + 1][:1].isupper() and tokens[i + 1] != "i":
        return False
    # a bare verb, and nothing but a verb or a noun ("Cool!", "Up for it" are not orders)
    lemmas = getAllLemmas(word)
    verb = lemmas.get("VERB")
    return bool(verb) and verb[0] == word and set(lemmas) <= {"VERB", "NOUN", "AUX"}


def listeners(clause: Clause, language: str) -> str | None:
    """How a clause is about the listener ("you", "asks", "order"), or None."""
    tokens = _tokens(clause.text)
    speaker = set(tokens) & _SPEAKER.get(language, frozenset())
    order = language == "en" and clause.opens and _orders(clause.text)
    if not tokens or (speaker and not (order and speaker <= _OBJECT_ONLY[language])):
        return None
    if set(tokens) & SECOND_PERSON.get(language, frozenset()):
        return "you"
    if clause.asks:
        return "asks"
    if order:
        return "order"
    return None


def reports_speech(fact: str, subject: str) -> bool:
    """Whether an English fact reports an act of speech of the person's that carries
    something of theirs: it opens with the person and a verb of recommending, advising
    or telling ("Caroline recommends ...", "Maria tells John about ...")."""
    if not fact.startswith(subject):
        return False
    tokens = _tokens(fact[len(subject) :])
    while tokens and tokens[0] in _BEFORE_ACT:
        tokens = tokens[1:]
    verbs: tuple[str, ...] = getAllLemmas(tokens[0]).get("VERB", ()) if tokens else ()
    return bool(verbs) and verbs[0] in _SPEECH_ACTS


def names_the_listeners(clause: str, fact: str, subject: str) -> bool:
    """Whether the fact gives each "your X" of the clause to someone it names ("Your help
    is really motivating" -> "John is motivated by Maria's help"): then the listener's
    part is the listener's, not the person's."""
    yours = _things_of(_YOUR, clause)
    given = {
        stem(thing.lower())
        for owner, thing in re.findall(r"\b([A-Z][a-z]+)['’]s\s+(\w+)", fact)
        if owner not in subject.split()
    }
    return bool(yours) and yours <= given


_YOUR = r"\byour\s+(\w+)"  # the listener's thing ("your help")


def _things_of(pattern: str, text: str) -> set[str]:
    return {stem(w.lower()) for w in re.findall(pattern, text, re.IGNORECASE)}


def _gives_yours_to_person(said: str, fact: str) -> bool:
    """Whether a "your X" of the message is the person's "his/her/their X" in the fact."""
    yours = _things_of(_YOUR, said)
    return bool(yours & _things_of(r"\b(?:his|her|their)\s+(\w+)", fact))


def _named_again(fact: str, subject: str) -> bool:
    """Whether a fact that opens with the person as its doer names them again
    ("Nate has faith in Nate", "Joanna is grateful for Joanna's help"); "Maria's aunt
    helped Maria's family" opens with a thing of theirs."""
    first = subject.split()[0] if subject else ""
    if not first[:1].isupper() or not fact.startswith(subject) or subject == "The user":
        return False
    rest = fact[len(subject) :]
    return not re.match(r"['’]", rest) and bool(re.search(rf"\b{re.escape(first)}\b", rest))


def about_listener(given: FactInput) -> Outcome | None:
    # the person named again stands for a "you" of the message; without one it is the
    # model writing the name for "she" ("because Sarah Garcia finds them too sweet")
    you = SECOND_PERSON.get(given.language, frozenset()) & set(_tokens(given.said))
    if you and _named_again(given.fact, given.subject):
        return Outcome("ABOUT_LISTENER", "names the person again where the listener was meant")
    english = given.language == "en"
    # the asking is the person's, unless it makes the listener's thing theirs
    # ("what about your script?" -> "Nate is asking about his script")
    if (
        english
        and reports_speech(given.fact, given.subject)
        and not _gives_yours_to_person(given.said, given.fact)
    ):
        return None
    found = sources(given.fact, given.subject, given.said, given.language)
    how = [
        None
        if english and names_the_listeners(c.text, given.fact, given.subject)
        else listeners(c, given.language)
        for c in found
    ]
    if not found or None in how:
        return None
    said = {"you": "said of the listener", "asks": "asked", "order": "told the listener"}[
        str(how[0])
    ]
    return Outcome("ABOUT_LISTENER", f"{said}, not the person's: {found[0].text[:80]!r}")
