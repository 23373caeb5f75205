"""Every rule of the write and read paths, in one list per stage, in the order they run.

`docs/rules.md` lists them with their fire rates, their precision on the labelled
cases (`deltamem/rules/cases.jsonl`) and their ablation lines; `deltamem rules`
prints this list. A rule lands here with those three figures, or not at all.
"""

from __future__ import annotations

from deltamem.rules import confidence, endings, grounding, listener, other_languages, whose
from deltamem.rules.base import Rule, Stage

EN = frozenset({"en"})
# the languages whose first-person words `grounding.FIRST_PERSON_WORDS` knows
PRONOUNS = frozenset(grounding.FIRST_PERSON_WORDS)
# the languages whose words of ending `endings` knows
ENDINGS = frozenset(endings.ENDS)

_ALL: list[Rule] = [
    # --- fact: one written fact against the turn it was written from -------------
    Rule(
        "UNSAID_LABEL",
        "fact",
        "rewrite",
        "a label the turn never used ('is a fashion designer' from 'my clothes store') is "
        "dropped, the clause after it kept; a label alone is refused. A label that only "
        "relates the person to a thing the turn said is kept ('pet lover', 'clothing store "
        "owner', 'taekwondo practitioner'; not 'enthusiast')",
        EN,
        whose.label,
    ),
    Rule(
        "FIRST_PERSON_TOLD",
        "fact",
        "rewrite",
        "the speaker's 'me'/'my' left in a fact about the person becomes 'them'/'their'",
        EN,
        grounding.first_person_told,
    ),
    Rule(
        "TOO_LONG",
        "fact",
        "refuse",
        "a fact over the memory length limit",
        None,
        grounding.too_long,
    ),
    Rule("FRAGMENT", "fact", "refuse", "fewer than three words", None, grounding.fragment),
    Rule(
        "FIRST_PERSON",
        "fact",
        "refuse",
        "a first-person word of the speaker (I, we, our; yo, ich, je ...) left in the "
        "fact, or their first-person verb ('Ana Ruiz toco la guitarra', 'Lena spiele')",
        PRONOUNS,
        other_languages.first_person,
    ),
    Rule(
        "NOT_NAMED",
        "fact",
        "refuse",
        "the fact does not name the person",
        None,
        grounding.not_named,
    ),
    Rule(
        "SAYS_NOTHING",
        "fact",
        "refuse",
        "no content word besides the person's name",
        None,
        grounding.says_nothing,
    ),
    Rule(
        "NOT_GROUNDED",
        "fact",
        "refuse",
        "under half of the fact's content words occur in the turn (the person's message and "
        "the assistant's before it; a clipped word, 'edu', 'comps', counts for the whole)",
        None,
        grounding.not_grounded,
        {"share": 0.5},
    ),
    Rule(
        "ASSISTANTS_WORDS",
        "fact",
        "refuse",
        "too few of the fact's content words are the person's own (the assistant's "
        "suggestions or praise recast as theirs)",
        None,
        grounding.assistants_words,
        {"share": 0.4, "answering": 0.3},
    ),
    Rule(
        "ABOUT_LISTENER",
        "fact",
        "refuse",
        "every clause holding the fact's words is about the listener: says 'you'/'your' "
        "without the speaker, asks, or tells them to do something",
        frozenset(listener.SECOND_PERSON),
        listener.about_listener,
    ),
    Rule(
        "NAMESAKE",
        "fact",
        "refuse",
        "written from a clause about someone who shares the person's first name",
        None,
        whose.namesake,
    ),
    Rule(
        "ATTRIBUTED_TO_OTHER",
        "fact",
        "refuse",
        "its source clauses are about another (she, they, a named doer, 'my dad', 'my "
        "boss', 'my friend who ...'; 'mi hermana', 'mein Bruder', 'ma sœur') and the fact "
        "makes the person the doer",
        PRONOUNS,
        other_languages.attributed_to_other,
    ),
    Rule(
        "OTHERS_THING",
        "fact",
        "refuse",
        "'her/his <thing>' where the message says the thing only as another's, or only "
        "as the listener's in a statement ('a pic of your dog' -> 'her dog')",
        EN,
        whose.others_thing_rule,
    ),
    Rule(
        "PLAN_AS_DONE",
        "fact",
        "refuse",
        "a wish or plan ('I'd love to live in Berlin', 'me encantaría vivir en Lisboa') "
        "written as done; a fact of liking or interest made from it ('is interested in "
        "hiking') is kept, unless its word was the clause's, said of others; a plan denied "
        "('I'm not gonna give up', 'I'll never forget') plans nothing",
        PRONOUNS,
        other_languages.plan_as_done,
    ),
    Rule(
        "DISLIKE_FROM_REQUEST",
        "fact",
        "refuse",
        "a dislike read into a request ('I'd like to share my Movie Preference')",
        EN,
        whose.dislike,
    ),
    Rule(
        "SPOUSE_NOT_NAMED",
        "fact",
        "refuse",
        "a spouse or partner named where no sentence of the message names them as one",
        EN,
        whose.spouse,
    ),
    Rule(
        "LOW_CONFIDENCE",
        "fact",
        "refuse",
        "the extractor wrote the fact unsure: the mean log-probability of its tokens is "
        "under the floor (off by default: floor minus infinity)",
        None,
        confidence.low,
        {"mean": float("-inf")},
    ),
    # --- session: a fact against the rest of its session -------------------------
    Rule(
        "NOTHING_NEW",
        "session",
        "refuse",
        "every content word was said in the person's earlier messages of the session",
    ),
    Rule(
        "REPEATS_SESSION_FACT",
        "session",
        "refuse",
        "near-identical (cosine) to a fact this session already wrote, the same values",
        thresholds={"cosine": 0.95},
    ),
    # --- decide: a fact against the stored memories --------------------------------
    Rule(
        "RESTATES_KNOWN",
        "decide",
        "refuse",
        "near-identical (cosine) to a stored memory with the same values",
        thresholds={"cosine": 0.95},
    ),
    Rule(
        "SAME_AS_KNOWN",
        "decide",
        "refuse",
        "a stored memory holds every content word of the fact",
        EN,
    ),
    Rule(
        "UPDATE_LOSES_DETAILS",
        "decide",
        "rewrite",
        "an update that would drop more than a changed value is written as an add",
    ),
    Rule(
        "UPDATE_COPIES_OTHER",
        "decide",
        "refuse",
        "('session' strategy) an update whose text restates another shown memory",
        thresholds={"cosine": 0.9},
    ),
    Rule(
        "UPDATE_UNRELATED",
        "decide",
        "rewrite",
        "('session' strategy) an update unrelated to its target is kept as an add",
        thresholds={"cosine": 0.5},
    ),
    Rule(
        "QUOTED_FIRST_PERSON",
        "decide",
        "refuse",
        "('session' strategy) a first-person sentence packed after a fact",
        EN,
    ),
    Rule(
        "ENDED_BY_LATER",
        "decide",
        "invalidate",
        "a fact that ends a named thing ('left Northwind Bank', 'dejó el hospital de "
        "Sevilla') outdates the older memories naming it: invalid_at and superseded_by, "
        "written with the fact",
        ENDINGS,
    ),
    Rule(
        "TAKEN_BACK_BY_LATER",
        "decide",
        "invalidate",
        "a fact that takes something back ('no longer drinks coffee', 'quit smoking', "
        "'trinkt keinen Kaffee mehr') outdates the older memories stating it",
        ENDINGS,
    ),
    # --- context: what the answerer reads ------------------------------------------
    Rule(
        "OUTDATED_EXCERPT",
        "context",
        "filter",
        "an excerpt whose facts a later session changed or outdated is left out: the "
        "sentences that said them (naming all their exact values, else holding half their "
        "content words; the person's name is neither), else the turn; a sentence that "
        "says a fact still holding stays",
    ),
    # --- answer: the answerer's reply ------------------------------------------------
    Rule(
        "OWN_NAME_UNKNOWN",
        "answer",
        "rewrite",
        "asked for one of the person's own names no item gives: 'not known'",
        EN,
    ),
    Rule(
        "UNMENTIONED_NAME",
        "answer",
        "rewrite",
        "a note that no item gives the name asked for",
        EN,
    ),
    Rule(
        "DOUBTED_YES",
        "answer",
        "rewrite",
        "a 'Yes' given less surely than the cut is asked again as a 'No'",
        EN,
        thresholds={"p_yes": 0.75},
    ),
]

RULES: dict[str, Rule] = {r.code: r for r in _ALL}
assert len(RULES) == len(_ALL), "rule codes are unique"


def rules_for(stage: Stage) -> list[Rule]:
    """The rules of `stage`, in the order they run."""
    return [r for r in _ALL if r.stage == stage]


def all_rules() -> list[Rule]:
    return list(_ALL)
