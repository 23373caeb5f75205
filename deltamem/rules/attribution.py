"""Whose fact is it, and is it done: refusing what the person said of someone else,
or only wished.

The person talks about their cat, their partner, their employer; the 1.5B
extractor writes every clause it reads as a fact about the person ("Miso is fine,
she already sleeps on the new sofa" -> "Priya already sleeps on the new sofa";
"Oracle's culture encourages innovation" -> "Sarah encourages innovation"), and
writes a plan as done ("I'll implement regular assessments" -> "Sarah is currently
implementing regular assessments"). The grounding check passes them: every word
was said. Here code reads the clause the fact came from: whom it was about, and
whether a word of wish or plan governs it.
"""

from __future__ import annotations

import itertools
import re

from lemminflect import getAllLemmas  # type: ignore[import-untyped]

from deltamem.manager.voice import opens_with_verb
from deltamem.porter import stem
from deltamem.rules.sources import PUNCTUATION_CUT
from deltamem.text import STOPWORDS, negated, sentences, stems_of, terms, words

# a message cut into sentences, and those into clauses: at commas, dashes and the
# words that join clauses
_SENTENCES = re.compile(r"[.;:!?()\"“”]+")
_CLAUSES = re.compile(
    rf"{PUNCTUATION_CUT}"
    r"|\s+(?:and|but|because|so|while|whereas|although|though|since|when|which|who)\s+",
    re.IGNORECASE,
)
_JOINED = re.compile(f"({_CLAUSES.pattern})", re.IGNORECASE)  # the same cuts, kept
_RELATIVE = re.compile(r"\s+who\s+$", re.IGNORECASE)


def _split_clauses(sentence: str) -> list[tuple[str, str]]:
    """A sentence's clauses, each with the words that joined it to the one before."""
    parts = _JOINED.split(sentence)
    return [("", parts[0]), *zip(parts[1::2], parts[2::2], strict=True)]


# "let's" is "let us": the speaker with others, not a thing of someone's ("Oracle's")
_SELF = frozenset(
    "i i'm i've i'd i'll me myself we we're we've we'd we'll us ourselves let's".split()
)
# the person as a clause's subject (an object "me" may be anyone's doing)
_SELF_SUBJECT = frozenset("i i'm i've i'd i'll we we're we've we'd we'll let's".split())
_IT = frozenset("it it'll".split())
_OTHER = frozenset(
    "she he they it you she's he's they're you're she'd he'd they'd you've they've "
    "she'll he'll they'll it'll".split()
)
_OWNED = frozenset("my our his her their its your".split())
# "her family" written from "his family" only: "their support" or "your perspective"
# in the message may well be the person's in the fact
_SWAPPED = {"her": "his", "his": "her"}
_MINE = frozenset({"my", "our"})
_THEIRS = frozenset({"his", "her", "their"})
# "it's about ...", "it was challenging": "it" stands for nothing said of another
_DUMMY_IT = re.compile(
    r"^\W*it(?:['’]s|\s+(?:is|was|has\s+been|will\s+be|would\s+be|feels|felt|seems|seemed|"
    r"looks|sounds)\b)",
    re.IGNORECASE,
)
_COPULA = frozenset("is are was were has have had been be".split())
# people a thing of someone's can be ("my dad is a doctor", "my boss runs marathons"):
# what such a clause says is theirs, not the person's, whatever its verb
_PEOPLE = frozenset(
    "mom mum mother dad father parent parents brother brothers sister sisters sibling "
    "siblings son sons daughter daughters kid kids child children baby wife husband "
    "spouse partner boyfriend girlfriend fiance fiancé fiancee fiancée friend friends "
    "bestie boss manager colleague colleagues coworker coworkers co-worker neighbour "
    "neighbor neighbours neighbors cousin cousins aunt uncle niece nephew grandma "
    "grandpa grandmother grandfather grandparents roommate flatmate teacher coach "
    "mentor doctor therapist landlord classmate classmates team teammate teammates".split()
)
# verbs that end the noun phrase a clause opens with ("my dance studio is ...")
_VERBS = _COPULA | frozenset(
    "does do did will would can could may might must provided provides gave gives "
    "helped helps made makes encourages encouraged offers offered supports supported".split()
)
# words of a wish, a plan or a possibility, in what was said or in the fact
_WISH = (
    r"wants?|wanted|wanna|plans?|planning|planned|hopes?|hoping|hoped|would|'d like|'d love|"
    r"’d like|’d love|"
    r"going to|gonna|will|'ll|intends?|intending|aims?|aiming|thinking (?:about|of)|"
    r"consider(?:s|ing)?|might|(?<!\d\s)may(?!\s+\d)|could|should|wish(?:es)?|dreams? of|"
    r"try(?:ing)? to|"
    r"next|soon|future|someday|one day|looking to|seek(?:s|ing)? to|aspir\w*"
)
_INTENT = re.compile(rf"\b(?:{_WISH})\b", re.IGNORECASE)
# ... and words of keenness, which keep a plan in the fact but in what was said are
# a feeling now: "I'm excited to explore more horror films" says he enjoys them
_KEEN = re.compile(rf"\b(?:{_WISH}|looking forward|can't wait|eager|excited to)\b", re.IGNORECASE)
# a fact of liking or interest states a feeling, not the plan done ("That makes me want
# to hike with my dogs" -> "Audrey is interested in hiking with her dogs"), unless it
# copies its word from the clause it was made from, where it was another's or a request
# ("friends who are interested in nutrition", "I'd like to share my Movie Preference")
_LIKING = re.compile(
    r"\b(?:interest(?:ed|s)?|lik(?:e|es|ing)|lov(?:e|es|ing)|enjoy(?:s|ing)?|keen|fond|fan|"
    r"hooked|passionate|curious)\b",
    re.IGNORECASE,
)
# "I'll continue experimenting", "I hope to keep refining": it goes on already
_ONGOING = re.compile(r"\s+(?:\w+\s+)?(?:to\s+)?(?:continue|keep)\b", re.IGNORECASE)
_HAVING = re.compile(
    r"^\s+(?:also\s+|now\s+)?(?:has|have|had|owns|owned|runs|ran|keeps|kept|manages|managed|"
    r"started|founded|bought|adopted|got|leads|led)\b",
    re.IGNORECASE,
)
_LEAD = 4  # a clause's subject is among its first few words ("Honestly, she ...")
_LEADING = 3  # a fact's first content words, which name what it says
_MIN_SHARED = 2  # of those, how many a clause must hold to be the fact's source
# words that name nothing in particular: "married to someone" says only "married"
_VAGUE = frozenset(
    stem(w) for w in "someone somebody something somewhere anyone anybody anything".split()
)


def _norm(word: str) -> str:
    return word.lower().replace("’", "'")


def _tokens(text: str) -> list[str]:
    return [_norm(t) for t in words(text)]


def _owned_lead(tokens: list[str]) -> bool:
    """Whether a clause opens with a thing of someone's ("my network", "Oracle's
    culture"; "she's" and "it's" are pronouns)."""
    first = tokens[0]
    return first in _OWNED or (first.endswith("'s") and first not in _OTHER)


def clause_subject(clause: str) -> str | None:
    """Who a clause is about: "self" where the person is in it (I, me, we: "it
    helps me set goals" is theirs), "other" where it opens with another ("she",
    "they", "it" doing something; a thing of someone's doing something, "my network
    provided ...", "Oracle's culture encourages ..."), else None ("it's about ...",
    "my major is Political Science": an attribute of theirs)."""
    tokens = _tokens(clause)
    if not tokens:
        return None
    if any(t in _SELF_SUBJECT for t in tokens):
        return "self"
    # another opening the clause as its doer, the person at most its object: "Sharon
    # always encourages me", "she helps me with homework", "my dad is a doctor"
    if (
        any(t in _OTHER and t not in _IT for t in tokens[:_LEAD])
        or _named_doer(clause)
        or (tokens[0] in _OWNED and len(tokens) > 1 and tokens[1] in _PEOPLE)
    ):
        return "other"
    if opens_with_verb(clause.strip()):
        return None  # "..., runs the night shift with me": the clause before says whose
    if any(t in _SELF for t in tokens):
        return "self"  # "it helps me set clear goals"
    if _DUMMY_IT.match(clause):
        return None
    if _owned_lead(tokens):
        # "my major is ...", "my friends have been ...": an attribute of theirs;
        # any other verb after the thing ("my sister takes him to the vet") is its doing
        # ("my promotion to Senior Director", cut off at "since", does nothing)
        if any(t in _COPULA for t in tokens[1:5]):
            return None
        acts = any(t in _VERBS or (len(t) > 3 and t.endswith(("s", "ed"))) for t in tokens[2:6])
        return "other" if acts else None
    if any(t in _OTHER for t in tokens[:_LEAD]) or _named_doer(clause):
        return "other"
    return None


def _named_doer(clause: str) -> bool:
    """Whether a clause opens with someone's name and what they did ("Nora picked the
    name", "Tomás cooks every night"). A name is a capitalised word the lexicon does
    not know ("Pottery relaxes me" opens with a noun); a state ("Kyoto was magical")
    is no doing."""
    m = re.match(
        r"\s*([A-Z][\w'’-]+)\s+(?:(?:always|often|never|also|still|really|usually|just|"
        r"sometimes|\w+ly)\s+)?([a-z]+)\b",
        clause,
    )
    if m is None:
        return False
    name, verb = m.group(1).lower(), m.group(2)
    if name in STOPWORDS or getAllLemmas(name):  # "The", "Pottery": no name
        return False
    return verb not in _COPULA and (
        verb in _VERBS or (len(verb) > 3 and verb.endswith(("s", "ed")))
    )


def _head(clause: str) -> set[str]:
    """The stem of the thing a clause opens with as someone's ("my dance studio is by
    the river": studio; "Oracle's culture": culture). A fact that says the person
    has it ("Priya owns a dance studio ...") says what the clause says; any other
    makes the person do, or be, what the thing did ("is a social network provider"
    from "my social network provides ...")."""
    tokens = _tokens(clause)
    if len(tokens) >= 2 and _owned_lead(tokens):
        return {stem(tokens[-1] if len(tokens) == 2 else _noun_end(tokens[1:]))}
    return set()


def _noun_end(tokens: list[str]) -> str:
    """The last word of the noun phrase at the start of `tokens` ("dance studio is"
    -> "studio"): the word before the first verb-like word, else the first word."""
    for i, t in enumerate(tokens):
        if t in _VERBS and i > 0:
            return tokens[i - 1]
    return tokens[0]


def _doing(fact: str, subject: str) -> str | None:
    """What the fact says the person does, after their name, when it makes them
    its subject ("Priya sleeps ..."); None for "Priya's cat sleeps ..." or a fact
    that does not open with the name."""
    if not fact.lower().startswith(subject.lower()):
        return None
    rest = fact[len(subject) :]
    return None if re.match(r"['’]s?\b", rest) else rest


def said_of_another(fact: str, subject: str, said: str) -> str | None:
    """Why the fact is refused as what the person said of someone else, or None.

    The clauses of the person's message that hold most of the fact's first
    content words are its source; when every such clause is about another, and
    the fact makes the person the doer, it is refused. A fact with "her/his
    <thing>" where the message says the thing only as someone else's ("near his
    family") is refused too."""
    rest = _doing(fact, subject)
    if rest is None:
        return None
    sources = source_clauses(rest, said)
    # "owns a dance studio" from "my dance studio is ...": the fact says the thing is
    # theirs (a verb of having, and the thing named), which the clause does say
    had = stems_of(rest) if _HAVING.match(rest) else set()
    # "wants tips for his first marathon" from "Do you have any tips for me before my
    # first marathon?": the thing is the speaker's in the clause ("my"), whoever its doer
    # unless the fact repeats the other's doing ("Sam broke my phone" -> "Tom broke his
    # phone")
    claimed = had | _things(rest, _THEIRS)
    verb = stem(_tokens(rest)[0]) if _tokens(rest) else ""
    if sources and all(
        who == "other"
        and not (_head(c) & had)
        and not (_things(c, _MINE) & claimed and verb not in {stem(t) for t in _tokens(c)})
        for c, who in sources
    ):
        return "said of someone else, not the person"
    return others_thing(fact, subject, said)


def others_thing(fact: str, subject: str, said: str) -> str | None:
    """Why a fact with "her/his <thing>" is refused where the message says the thing
    only as someone else's ("near his family"), or a fact about "<person>'s <thing>"
    where the message says it only as the listener's ("Your family looks so
    cheerful" -> "Maria's family is cheerful"), or None."""
    owned = _owned_things(said)
    m = re.match(rf"{re.escape(subject)}['’]s\s+([\w'’-]+)", fact, re.IGNORECASE)
    if m:
        thing = stem(_norm(m.group(1)))
        owners = {o for o, t, _ in owned if t == thing}
        if "your" in owners and not owners & {"my", "our"}:
            return f"the listener's {m.group(1)}, not the person's"
        return None
    rest = _doing(fact, subject)
    if rest is None:
        return None
    for owner, thing, word in _owned_things(rest):
        # "her family" in the fact, only "his family" in the message (a faithful
        # "their skills" of the team, or "her homework" of a sister, is the same word)
        owners = {o for o, t, _ in owned if t == thing}
        if owner in _SWAPPED and _SWAPPED[owner] in owners and not owners & {"my", "our", owner}:
            return f"someone else's {word}, not the person's"
        # "her dog" in the fact, only "your dog" in the message: the listener's (a
        # question asked back, "What do you enjoy doing with your family?", shares it)
        if owner in _SWAPPED and owners == {"your"} and thing in _told_things(said):
            return f"the listener's {word}, not the person's"
    return None


def _told_things(said: str) -> set[str]:
    """The stems of the listener's things ("your dog") in the message's statements."""
    return {
        t
        for sentence in sentences(said)
        if not sentence.rstrip().endswith("?")
        for o, t, _ in _owned_things(sentence)
        if o == "your"
    }


def source_clauses(fact: str, said: str) -> list[tuple[str, str | None]]:
    """The clauses of the person's message a fact was written from (`subjects`):
    those holding most of its first content words, then most of all its words;
    none when no clause holds two of its first words, or its one word when it has
    one ("is married to someone" from "We want to marry in Lisbon")."""
    clauses = subjects(said)
    leading = _leading(fact)
    least = min(_MIN_SHARED, len(leading))
    if not clauses or not leading:
        return []
    fact_stems = stems_of(fact)
    shared = []
    for c, who in clauses:
        held = stems_of(c)
        shared.append(((len(leading & held), len(fact_stems & held)), c, who))
    best = max(n for n, _, _ in shared)
    if best[0] < least:
        return []
    return [(c, who) for n, c, who in shared if n == best]


def plan_as_done(fact: str, subject: str, said: str) -> str | None:
    """Why the fact is refused as a wish or plan written as done, or None: its source
    clause wants, plans or hopes it ("We want to marry in Lisbon"), and the fact
    says none of that ("Priya is married")."""
    rest = _doing(fact, subject)
    if rest is None or _KEEN.search(rest):
        return None
    leading = _leading(rest)
    sources = source_clauses(rest, said)
    liking = {stem(_norm(w)) for w in _LIKING.findall(rest)}
    if liking and not any(liking & {stem(_norm(w)) for w in words(c)} for c, _ in sources):
        return None
    if sources and all(_wished(c, leading) and not _same_arrangement(rest, c) for c, _ in sources):
        return "a wish or plan written as done"
    return None


# "is having ...": a fact in the present progressive
_PROGRESSIVE = re.compile(r"^\s+(?:is|are)\s+(?:also\s+|now\s+)?(\w+ing)\b", re.IGNORECASE)


def _same_arrangement(rest: str, clause: str) -> bool:
    """Whether the fact keeps the clause's own present progressive ("Next month I'm
    having an art show" -> "is having an art show"): an arrangement as said, not a
    wish written as done ("I want to have" -> "is having" is one)."""
    m = _PROGRESSIVE.match(rest)
    if m is None:
        return False
    said = (
        rf"(?:i['’]m|i am|we['’]re|we are)\s+(?:(?:also|still|now|finally|actually)\s+)?"
        rf"{re.escape(m.group(1))}\b"
    )
    return re.search(said, clause, re.IGNORECASE) is not None


# a dislike the fact gives the person ("dislikes reading", "doesn't like sodas")
_DISLIKE = re.compile(
    r"^\s+(?:(?:also|still|now|really|especially|particularly)\s+)*"
    r"(?:(?:does\s+not|doesn['’]t|do\s+not|don['’]t)\s+(?:really\s+)?(?:like|enjoy|love)|"
    r"dislikes?|hates?|is\s+not\s+(?:a\s+fan\s+of|fond\s+of))\b",
    re.IGNORECASE,
)
# "I'd like to share my Reading Preference": a request, which says no liking
_REQUEST = re.compile(
    r"\b(?:I['’]d|I\s+would|we['’]d|we\s+would|would|you['’]d|if\s+you)\s+(?:really\s+)?(?:like|love)\b",
    re.IGNORECASE,
)
# words by which a message voices a liking or a dislike
_VOICED = re.compile(
    r"\b(?:lik(?:e|es|ed|ing)|lov(?:e|es|ed|ing)|enjoy\w*|prefer(?:s|red|ring)?|favou?rite\w*|fan|fond|"
    r"dislik\w*|hat(?:e|es|ed|ing)|into|can['’]t\s+stand|passion\w*)\b",
    re.IGNORECASE,
)


def dislike_from_request(fact: str, subject: str, said: str) -> str | None:
    """Why the fact is refused as a dislike read into a request, or None. "I'd like
    to share my Movie Preference with you" voices no taste, yet the 1.5B model
    writes both "Sarah likes movies" and "Sarah dislikes movies" from it; the second
    contradicts what she then says. A dislike is refused when the message's only
    words of liking are in such a request."""
    rest = _doing(fact, subject)
    if rest is None or not _DISLIKE.match(rest) or not _REQUEST.search(said):
        return None
    rest = _REQUEST.sub(" ", said)
    if _VOICED.search(rest):
        return None
    # "horror films are not for me": a dislike voiced by a negated sentence on the
    # fact's own topic, without a word of liking
    topic = stems_of(fact) - stems_of(subject)
    if any(negated(s) and stems_of(s) & topic for s in sentences(rest)):
        return None
    return "a request ('I'd like to ...') read as a dislike"


_SPOUSE = r"(?:wife|husband|spouse|fianc[eé]e?|partner|boyfriend|girlfriend)"
_NAME = r"(?P<name>[A-Z][\w'’-]+(?:\s+[A-Z][\w'’-]+)?)"
# the person's spouse or partner named in a fact: "married to Amara", "has a wife
# named Gina", "Gina is his wife", "Ola's wife is Ana", "his fiancée Ana"
_SPOUSE_NAMED = (
    re.compile(
        rf"\b(?:married\s+to|engaged\s+to|dating|{_SPOUSE}\s+(?:named|called)|"
        rf"(?:his|her|their|['’]s)\s+{_SPOUSE},?(?:\s+is)?)\s+{_NAME}"
    ),
    re.compile(rf"{_NAME}\s+is\s+(?:his|her|their)\s+(?:\w+\s+)?{_SPOUSE}\b"),
)
# words by which the person's own message speaks of a spouse or partner
_SPOUSE_SAID = re.compile(
    rf"\b(?:{_SPOUSE}|marri\w*|marry\w*|engaged|engagement|wedding|dating)\b", re.IGNORECASE
)


def spouse_not_named(fact: str, said: str) -> str | None:
    """Why the fact is refused as a spouse the person never named, or None. The
    1.5B model marries the person to whoever the message names: "Jon has a wife
    named Gina" from "Yeah, Gina, thanks for having my back" (she is the friend he
    talks to), "Daniel is married to Amara" from "My sister Amara came to cheer me
    on. She's getting married in Lagos". A named spouse is kept when one sentence
    of the message holds the name and a word of marriage or partnership."""
    m = next((m for p in _SPOUSE_NAMED if (m := p.search(fact))), None)
    if m is None:
        return None
    name = m.group("name")
    if any(name in s and _SPOUSE_SAID.search(s) for s in sentences(said)):
        return None
    return f"a spouse or partner the person did not name ({name})"


# a wish or plan denied ("I'm not gonna give up", "I don't want to stop", "I'll never
# forget the day ...") plans nothing
_NEGATED = re.compile(r"\b(?:not|never|\w+n['’]t)\s+(?:\w+\s+)?$", re.IGNORECASE)
_DENIED = re.compile(r"\s+(?:not|never)\b", re.IGNORECASE)


def _wished(clause: str, leading: set[str]) -> bool:
    """Whether a word of wish or plan, not denied, comes before the fact's first words
    in the clause ("I'll measure success": yes; "the increase to $18,000 will help":
    the income comes first, and is not what is planned)."""
    m = next(
        (
            m
            for m in _INTENT.finditer(clause)
            if not _NEGATED.search(clause, 0, m.start()) and not _DENIED.match(clause, m.end())
        ),
        None,
    )
    if m is None or _ONGOING.match(clause, m.end()):
        return False
    first = next(
        (w.start() for w in re.finditer(r"[\w'’]+", clause) if stem(_norm(w.group())) in leading),
        len(clause),
    )
    return m.start() < first


def _leading(text: str) -> set[str]:
    """The first content words of a fact after the person's name, stemmed: what it
    says they do ("likes adventure novels because they ..." -> adventure, novel)."""
    stems = [stem(t) for t in terms(text, limit=16)]
    return set([s for s in stems if s not in STOPWORDS and s not in _VAGUE][:_LEADING])


def subjects(said: str) -> list[tuple[str, str | None]]:
    """The message's clauses, each with who it is about (`clause_subject`); a clause
    that does not say continues the one before it in its sentence, and is joined to
    it ("It encourages innovation and provides resources": one clause, "other")."""
    out: list[tuple[str, str | None]] = []
    for sentence in _SENTENCES.split(said):
        opened = len(out)
        for joined, clause in _split_clauses(sentence):
            if not clause or not clause.strip():
                continue
            who = clause_subject(clause)
            if who is None and _RELATIVE.match(joined) and len(out) > opened:
                # "my friend who is a fan of Harry Potter": the relative clause is said of
                # the noun before it, not of the sentence's subject ("someone like me
                # who ..." is the speaker's)
                before = _tokens(out[-1][0])
                who = "self" if before and before[-1] in _SELF else "other"
                out.append((clause.strip(), who))
            elif who is None and len(out) > opened:
                out[-1] = (f"{out[-1][0]} {clause.strip()}", out[-1][1])
            else:
                out.append((clause.strip(), who))
    return out


def _things(text: str, owners: frozenset[str]) -> set[str]:
    """The stems of the words after one of `owners` that is not the clause's first
    word (a thing of theirs opening a clause is its doer, `_head`), up to the first
    stopword or three words ("tips for me before my first marathon" -> first,
    marathon)."""
    tokens = _tokens(text)
    out: set[str] = set()
    for i, t in enumerate(tokens):
        if t not in owners or i == 0:
            continue
        for word in tokens[i + 1 : i + 4]:
            if word in STOPWORDS:
                break
            out.add(stem(word))
    return out


def _owned_things(text: str) -> list[tuple[str, str, str]]:
    """(possessive, stem of the word after it, that word): "his family" -> ("his",
    "famili", "family")."""
    return [(a, stem(b), b) for a, b in itertools.pairwise(_tokens(text)) if a in _OWNED]
