"""The default manager strategy: facts extracted one user turn at a time, checked in
code, then each one decided against its nearest memories. The LLM is scripted; the
embedder and the store are real."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fakes import T0, ScriptedLLM

from deltamem.embed import Embedder
from deltamem.llm.base import ChatMessage
from deltamem.manager.agent import Manager, ManagerConfig
from deltamem.manager.dates import annotate, dated, relative_dates
from deltamem.manager.extract import MAX_FACTS, introduced_name, unsaid_label
from deltamem.memory import Memory
from deltamem.porter import stem
from deltamem.store.base import PlannedWrite, Store
from deltamem.text import terms
from deltamem.types import Message, SessionRecord


def rec(msgs: list[tuple[str, str]], sid: str = "s1", days: int = 0) -> SessionRecord:
    return SessionRecord(
        user_id="u1",
        session_id=sid,
        timestamp=T0 + timedelta(days=days),
        messages=[Message(role=r, content=c) for r, c in msgs],  # type: ignore[arg-type]
        content_hash=f"h-{sid}",
    )


def seed(store: Store, embedder: Embedder, *contents: str) -> list[str]:
    r, _ = store.log_session(rec([("user", "seed")], sid="s0", days=-30))
    vecs = embedder.embed(list(contents))
    writes = [PlannedWrite("add", c, v) for c, v in zip(contents, vecs, strict=True)]
    return [o.memory_id or "" for o in store.apply_session(r, writes, [])]


def facts(*items: str) -> dict[str, Any]:
    return {"facts": list(items)}


def manager(llm: ScriptedLLM, embedder: Embedder, store: Store, decide: str = "model") -> Manager:
    """The per-turn manager; its decisions by the (scripted) model unless `decide`
    says "code", the default."""
    return Manager(llm, embedder, store, ManagerConfig(strategy="turns", decide=decide))  # type: ignore[arg-type]


def test_one_call_per_user_turn_with_only_that_turn_and_its_context(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM([facts("The user adopted a beagle named Rufus."), facts()])
    plan = manager(llm, embedder, store).plan(
        rec(
            [
                ("user", "I adopted a beagle named Rufus."),
                ("assistant", "Lovely! How old is he? Tell me everything about him."),
                ("user", "Thanks, that's all for today."),
            ]
        )
    )
    assert [(w.op, w.content, w.turns) for w in plan.writes] == [
        ("add", "The user adopted a beagle named Rufus.", [0])
    ]
    assert len(llm.requests) == 2  # nothing was known: no decision call
    second = llm.requests[1]["messages"][-1]["content"]
    assert "Thanks, that's all for today [13 February 2029]." in second
    assert "Assistant (before): Lovely!" in second
    assert "beagle" not in second.split("Assistant (before)")[0]  # no other turn, no memories


def test_facts_that_are_not_grounded_or_not_about_the_person_are_refused(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM(
        [
            facts(
                "The user travels to different countries and cultures.",  # not said
                "I love maple syrup in my coffee.",  # the user's words: told of them
                "Maple syrup reminds of home.",  # names nobody
                "The user likes maple syrup in coffee because it reminds her of home.",
            )
        ]
    )
    plan = manager(llm, embedder, store).plan(
        rec([("user", "I love maple syrup in my coffee, it reminds me of home.")])
    )
    assert [w.content for w in plan.writes] == [
        "The user loves maple syrup in their coffee.",
        "The user likes maple syrup in coffee because it reminds her of home.",
    ]
    notes = {o.content: o.note for o in plan.noops}
    assert notes["The user travels to different countries and cultures."] == (
        "not grounded in the conversation"
    )
    assert notes["Maple syrup reminds of home."] == "does not name the person"


def test_a_label_the_person_never_used_is_dropped_and_its_clause_kept(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM(
        [
            facts(
                "The user is a software engineer",  # said nowhere: refused
                "The user is a cat enthusiast who visits a cat cafe every Sunday.",
                "The user is a fashion designer and runs a small online clothes store.",
            )
        ]
    )
    plan = manager(llm, embedder, store, decide="code").plan(
        rec(
            [
                (
                    "user",
                    "I love to dance, I run a small online clothes store and "
                    "I visit a cat cafe every Sunday.",
                )
            ]
        )
    )
    assert [w.content for w in plan.writes] == [
        "The user visits a cat cafe every Sunday",
        "The user runs a small online clothes store",
    ]
    notes = {o.content: o.note for o in plan.noops}
    assert notes["The user is a software engineer"] == "calls the person something they did not say"
    # a label made from a word the person used is theirs: "dancer" from "dance"
    heard = {stem(t) for t in terms("I love to dance.", limit=100)}
    assert unsaid_label("The user is a dancer", "The user", heard) == ("The user is a dancer", None)


def test_a_fact_made_of_the_assistants_words_is_refused(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM(
        [
            facts(
                "The user plans to take an evening Portuguese course at the language school.",
                "The user is moving to Lisbon in March.",
            )
        ]
    )
    plan = manager(llm, embedder, store).plan(
        rec(
            [
                ("assistant", "An evening Portuguese course at the language school could help."),
                ("user", "Sounds good. We're moving to Lisbon in March."),
            ]
        )
    )
    assert [w.content for w in plan.writes] == ["The user is moving to Lisbon in March."]
    (refused,) = plan.noops
    assert refused.note == "the assistant's words, not the person's"


def test_an_answer_makes_the_assistants_question_the_persons(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM([facts("The user has lived in Bergen for five years.")])
    plan = manager(llm, embedder, store).plan(
        rec([("assistant", "How long have you lived in Bergen?"), ("user", "Five years now.")])
    )
    assert [w.content for w in plan.writes] == ["The user has lived in Bergen for five years."]


def test_a_fact_that_only_repeats_earlier_words_of_the_session_is_not_kept(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM(
        [
            facts("The user wants to introduce wellness meetings for the team."),
            facts(
                "The user wants wellness for the team.",
                "The user plans lunchtime walks with the team.",
            ),
        ]
    )
    plan = manager(llm, embedder, store).plan(
        rec(
            [
                ("user", "I want to introduce wellness meetings for my team."),
                ("assistant", "Great idea. How will you start?"),
                ("user", "I want wellness for my team: lunchtime walks first."),
            ]
        )
    )
    assert [w.content for w in plan.writes] == [
        "The user wants to introduce wellness meetings for the team.",
        "The user plans lunchtime walks with the team.",
    ]
    (repeat,) = plan.noops
    assert repeat.content == "The user wants wellness for the team."
    assert repeat.note == "says nothing the person had not said earlier in the session"


def test_a_repeating_reply_is_cut_to_distinct_facts(embedder: Embedder, store: Store) -> None:
    loop = ["The user is learning Portuguese."] * 18
    llm = ScriptedLLM([facts(*loop)])
    plan = manager(llm, embedder, store).plan(rec([("user", "I'm learning Portuguese!")]))
    assert [w.content for w in plan.writes] == ["The user is learning Portuguese."]
    assert llm.requests[0]["schema"]["properties"]["facts"]["maxItems"] == MAX_FACTS


def test_known_name_is_used_and_relative_dates_reach_the_model_resolved(
    embedder: Embedder, store: Store
) -> None:
    seed(store, embedder, "User's name is Priya Raman.")
    llm = ScriptedLLM([facts("Priya Raman got engaged on 12 February 2029.")])
    plan = manager(llm, embedder, store).plan(rec([("user", "We got engaged yesterday!")]))
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "The person is called Priya Raman." in prompt
    assert "yesterday [12 February 2029]" in prompt
    assert [w.content for w in plan.writes] == ["Priya Raman got engaged on 12 February 2029."]


def test_a_newer_state_updates_the_memory_it_changes(embedder: Embedder, store: Store) -> None:
    (_, home, other) = seed(
        store,
        embedder,
        "User's name is Priya Raman.",
        "Priya Raman lives in Manchester.",
        "Priya Raman has a cat called Miso.",
    )
    seen: list[list[ChatMessage]] = []

    def decide(messages: list[ChatMessage]) -> dict[str, Any]:
        seen.append(messages)
        listed = messages[-1]["content"]
        n = next(line[0] for line in listed.splitlines() if "Manchester" in line)
        return {"verdict": f"changes {n}"}

    llm = ScriptedLLM([facts("Priya Raman lives in Lisbon."), decide])
    plan = manager(llm, embedder, store).plan(rec([("user", "I live in Lisbon now.")], days=3))
    assert [(w.op, w.memory_id, w.content) for w in plan.writes] == [
        ("update", home, "Priya Raman lives in Lisbon.")
    ]
    assert other not in {w.memory_id for w in plan.writes}
    assert "New fact (from 2029-02-16): Priya Raman lives in Lisbon." in seen[0][-1]["content"]


def test_same_and_restated_facts_write_nothing(embedder: Embedder, store: Store) -> None:
    seed(store, embedder, "User's name is Priya Raman.", "Priya Raman is learning Portuguese.")
    llm = ScriptedLLM(
        [
            facts("Priya Raman is learning Portuguese."),  # identical: no call needed
            facts("Priya Raman studies the Portuguese language."),
            {"verdict": "same 1"},
        ]
    )
    plan = manager(llm, embedder, store).plan(
        rec(
            [
                ("user", "I'm learning Portuguese."),
                ("assistant", "Great."),
                ("user", "I study the Portuguese language every day."),
            ]
        )
    )
    assert plan.writes == []
    assert sorted(o.note or "" for o in plan.noops) == [
        "restates a known memory",
        "the same as a known memory",
    ]
    assert len(llm.requests) == 3


def test_replies_of_the_wrong_shape_are_failed_calls_asked_again(
    embedder: Embedder, store: Store
) -> None:
    seed(store, embedder, "User's name is Priya Raman.", "Priya Raman lives in Manchester.")
    llm = ScriptedLLM(
        [
            {"facts": "DROP TABLE"},  # not a list of facts: asked again
            facts("Priya Raman lives in Lisbon."),
            {"verdict": "changes 9"},  # names no memory shown: asked again
            {"verdict": "new"},
        ]
    )
    plan = manager(llm, embedder, store).plan(rec([("user", "I live in Lisbon.")]))
    assert [(w.op, w.content) for w in plan.writes] == [("add", "Priya Raman lives in Lisbon.")]
    assert len(llm.requests) == 4


def test_a_model_that_keeps_answering_the_wrong_shape_fails_the_session(
    make_memory: Any,
) -> None:
    from deltamem.memory import SessionFailed

    mem: Memory = make_memory(ScriptedLLM(default={}), ManagerConfig())
    try:
        mem.add([{"role": "user", "content": "I keep bees."}], user_id="u", session_id="s1")
    except SessionFailed as exc:
        assert "wrong shape" in str(exc)
    else:
        raise AssertionError("a reply of the wrong shape must not count as 'no facts'")
    assert mem.store.get_session("u", "s1").status == "failed"  # type: ignore[union-attr]
    assert mem.get_all(user_id="u") == []


def test_memory_default_is_the_turns_strategy(make_memory: Any) -> None:
    llm = ScriptedLLM([facts("The user keeps bees in Ghent.")])
    mem: Memory = make_memory(llm, ManagerConfig())
    result = mem.add([{"role": "user", "content": "I keep bees in Ghent."}], user_id="u")
    assert [o.content for o in result.applied] == ["The user keeps bees in Ghent."]
    assert result.cost["llm_calls"] == 1


# --- relative dates -------------------------------------------------------------------
AT = datetime(2026, 11, 2, 10, 0, tzinfo=UTC)


def test_relative_dates_are_annotated_against_the_session_date() -> None:
    assert (
        annotate("We got engaged yesterday!", AT) == "We got engaged yesterday [1 November 2026]!"
    )
    assert "last year [2025]" in annotate("I moved to Leeds last year.", AT)
    assert "[December 2026]" in annotate("We marry next month in Lisbon.", AT)
    assert "[30 October 2026]" in annotate("I started 3 days ago.", AT)


def test_each_expression_is_found_beside_another_and_written_as_its_date() -> None:
    # dateparser alone finds only "yesterday" in this sentence
    said = "I moved to Manchester last week, and Tomás and I got engaged yesterday!"
    found = relative_dates(said, AT)
    assert found == [("last week", "week of 26 October 2026"), ("yesterday", "1 November 2026")]
    assert dated("Priya moved to Manchester last week", found) == (
        "Priya moved to Manchester in the week of 26 October 2026"
    )
    assert dated("Priya got engaged yesterday [1 November 2026]", found) == (
        "Priya got engaged on 1 November 2026"
    )
    assert dated("Priya lives in Manchester", found) == "Priya lives in Manchester"
    two = relative_dates("Two years ago I started running; last month I ran a marathon.", AT)
    assert dated("Priya started running two years ago", two) == "Priya started running in 2024"
    assert dated("Priya ran a marathon last month", two) == "Priya ran a marathon in October 2026"
    # a preposition of its own keeps the date bare ("since 2024", not "since in 2024")
    assert dated("Priya has run since two years ago", two) == "Priya has run since 2024"


@pytest.mark.parametrize(
    ("said", "at", "found"),
    [
        # dateparser resolves neither weekends nor seasons (a Wednesday: LoCoMo's
        # "the weekend before 13 September 2023")
        (
            "I went biking with friends last weekend.",
            datetime(2023, 9, 13),
            [("last weekend", "weekend of 9 September 2023")],
        ),
        (
            "We went camping two weekends ago.",
            datetime(2023, 7, 17),
            [("two weekends ago", "weekend of 8 July 2023")],
        ),
        # from Monday to Thursday "next weekend" is the coming one, from Friday the one after
        (
            "See you next weekend!",
            datetime(2023, 7, 17),
            [("next weekend", "weekend of 22 July 2023")],
        ),
        (
            "See you next weekend!",
            datetime(2023, 7, 21),
            [("next weekend", "weekend of 29 July 2023")],
        ),
        ("We marry next spring.", datetime(2031, 9, 10), [("next spring", "spring 2032")]),
        # said in September, "last summer" has just ended; said in July, it is last year's
        ("I moved there last summer.", datetime(2031, 9, 10), [("last summer", "summer 2031")]),
        ("I moved there last summer.", datetime(2031, 7, 10), [("last summer", "summer 2030")]),
        # a winter is named by its December
        ("Last winter was cold.", datetime(2032, 1, 15), [("Last winter", "winter 2030")]),
        (
            "I went there last year and last weekend too.",
            datetime(2031, 9, 10),
            [("last year", "2030"), ("last weekend", "weekend of 6 September 2031")],
        ),
    ],
)
def test_weekends_and_seasons_are_resolved_in_code(
    said: str, at: datetime, found: list[tuple[str, str]]
) -> None:
    assert relative_dates(said, at) == found


def test_a_fact_on_a_weekend_is_written_with_it() -> None:
    found = relative_dates("Sofia and I got engaged last weekend!", datetime(2031, 9, 10))
    assert dated("Luis got engaged last weekend", found) == (
        "Luis got engaged on the weekend of 6 September 2031"
    )


def test_a_fact_that_copies_a_relative_expression_is_stored_with_the_date(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM([facts("User moved to Manchester last week.")])
    session = rec([("user", "I moved to Manchester last week.")])
    plan = manager(llm, embedder, store).plan(session)
    when = relative_dates("last week", session.timestamp)[0][1]
    assert [w.content for w in plan.writes] == [f"User moved to Manchester in the {when}."]


def test_text_without_relative_time_is_left_alone() -> None:
    text = "I was born on 26 March 1986 in May, Oklahoma, and I like the second album."
    assert annotate(text, AT) == text


def test_an_update_that_would_drop_details_is_added_beside_the_old_memory(
    embedder: Embedder, store: Store
) -> None:
    (_, home) = seed(
        store,
        embedder,
        "User's name is Priya Raman.",
        "Priya Raman lives in Manchester with her partner Tomás and a cat called Miso.",
    )
    llm = ScriptedLLM([facts("Priya Raman lives in Lisbon."), {"verdict": "changes 1"}])
    plan = manager(llm, embedder, store).plan(rec([("user", "I live in Lisbon now.")]))
    assert [(w.op, w.content) for w in plan.writes] == [("add", "Priya Raman lives in Lisbon.")]
    assert [o.note for o in plan.noops] == ["update would drop details; added"]
    assert plan.noops[0].memory_id == home


def test_an_update_may_swap_a_value_but_not_forget_the_others() -> None:
    from deltamem.manager.resolve import loses_details

    who = "Sarah Garcia"
    swaps = [
        ("Sarah Garcia lives in Miami.", "Sarah Garcia lives in Boston."),
        ("Sarah Garcia earns 15600 USD a month.", "Sarah Garcia earns 18000 USD a month."),
        ("Sarah Garcia likes jazz.", "Sarah Garcia now prefers rock music."),
    ]
    for old, new in swaps:
        assert not loses_details(old, new, who), (old, new)
    forgets = [  # the employer goes with the paraphrase: both stay
        ("Sarah Garcia is a Senior Manager at Oracle.", "Sarah Garcia is a Senior Director."),
        ("Sarah Garcia works at Oracle in Miami.", "Sarah Garcia works as a senior manager."),
    ]
    for old, new in forgets:
        assert loses_details(old, new, who), (old, new)


def test_pronouns_get_the_persons_name_back_where_nobody_else_is_named() -> None:
    from deltamem.manager.atomise import name_subject

    who = "Sarah Garcia"
    assert name_subject("Her major is Political Science.", who) == (
        "Sarah Garcia's major is Political Science."
    )
    assert name_subject("They have $139,000 in savings.", who) == (
        "Sarah Garcia has $139,000 in savings."
    )
    assert name_subject("My physical condition is Normal.", who) == (
        "Sarah Garcia's physical condition is Normal."
    )
    assert name_subject("JacksonLinda is her friend.", who) == (
        "JacksonLinda is Sarah Garcia's friend."
    )
    assert name_subject("With a raise, she saved more.", who) == (
        "With a raise, Sarah Garcia saved more."
    )
    assert name_subject("Linda says she is tired.", who) == "Linda says she is tired."
    assert name_subject("I maintain a balanced lifestyle.", who) == (
        "Sarah Garcia maintains a balanced lifestyle."
    )
    # who "we" are is not said, and talk to the assistant is no fact
    assert name_subject("We adopted a cat.", who) == "We adopted a cat."
    assert name_subject("I'd like to share my Travel Preference with you.", who) == (
        "I'd like to share my Travel Preference with you."
    )


def test_a_self_introduction_names_the_person() -> None:
    assert introduced_name(["Hi! I'm Priya Raman, nice to meet you."]) == "Priya Raman"
    assert introduced_name(["Most people call me Jo."]) == "Jo"
    assert introduced_name(["My name's Ana Lima."]) == "Ana Lima"
    # one capitalised word after "I'm" is a nationality or a mood, not a name
    assert introduced_name(["I'm Canadian and I'm so happy today."]) is None


def test_by_default_code_decides_and_makes_no_call(embedder: Embedder, store: Store) -> None:
    """The same, a richer version and one value swapped are settled from the words;
    anything else related is added beside the memory it resembles, dated."""
    seed(
        store,
        embedder,
        "User's name is Priya Raman.",
        "Priya Raman earns 3,100 GBP a month.",
        "Priya Raman owns a dance studio.",
        "Priya Raman is learning Portuguese with an app.",
        "Priya Raman works as a data analyst at Northwind Bank.",
    )
    llm = ScriptedLLM(
        [
            facts("Priya Raman earns 3,600 GBP a month."),
            facts("Priya Raman owns a dance studio by the river."),
            facts("Priya Raman is learning Portuguese."),
            facts("Priya Raman works as an engineer at Fernhill Labs."),
        ]
    )
    turns = [
        ("user", "I earn 3,600 GBP a month since the raise."),
        ("assistant", "Congratulations!"),
        ("user", "My dance studio is by the river."),
        ("assistant", "Lovely."),
        ("user", "Still learning Portuguese."),
        ("assistant", "Keep going."),
        ("user", "I work as an engineer at Fernhill Labs."),
    ]
    plan = manager(llm, embedder, store, decide="code").plan(rec(turns, days=3))
    assert len(llm.requests) == 4  # one extraction call per user turn, no decision call
    ops = [(w.op, w.content) for w in plan.writes]
    assert ("update", "Priya Raman earns 3,600 GBP a month.") in ops
    assert ("update", "Priya Raman owns a dance studio by the river.") in ops
    assert ("add", "Priya Raman works as an engineer at Fernhill Labs.") in ops
    assert [o.note for o in plan.noops] == ["the same as a known memory"]
    assert ManagerConfig().decide == "code"


def test_code_does_not_take_another_event_or_a_paraphrase_for_a_change() -> None:
    from deltamem.manager.resolve import decided_in_code

    who = "Sarah Garcia"
    kept_apart = [
        ("Sarah Garcia went to Rome on 12 May 2024.", "Sarah Garcia went to Rome on 3 March 2023."),
        ("Sarah Garcia lives in Boston.", "Sarah Garcia lives in Miami."),  # one word besides
        ("Sarah Garcia is passionate about music.", "Sarah Garcia is a Music enthusiast."),
    ]
    for new, old in kept_apart:
        assert decided_in_code(new, [old], who) == "new", (new, old)
    # a reversal is a change; a negated fact is not "the same" as the plain one
    reversal = ("Sarah Garcia likes plain t-shirts.", "Sarah Garcia doesn't like plain t-shirts.")
    assert decided_in_code(*reversal[:1], [reversal[1]], who) == "changes 1"
    assert (
        decided_in_code("Sarah Garcia doesn't like jazz.", ["Sarah Garcia likes jazz a lot."], who)
        == "new"
    )
    assert (
        decided_in_code(
            "Sarah Garcia's monthly income is 18,000 USD.",
            [
                "Sarah Garcia has 139000 USD in savings.",
                "Sarah Garcia's monthly income is 15600 USD.",
            ],
            who,
        )
        == "changes 2"
    )


def test_the_name_given_in_an_earlier_session_is_used(embedder: Embedder, store: Store) -> None:
    # the first session stored nothing that names the person
    store.log_session(rec([("user", "Hi, I'm Ola Berg. Nice to meet you!")], sid="s0", days=-30))
    llm = ScriptedLLM([facts("I quit Haukeland Hospital last month.")])
    plan = manager(llm, embedder, store).plan(
        rec([("user", "I quit Haukeland Hospital last month.")], sid="s1")
    )
    prompt = llm.requests[0]["messages"][-1]["content"]
    assert "The person is called Ola Berg." in prompt
    # the person's own sentence, told of them
    assert [w.content for w in plan.writes] == ["Ola Berg quit Haukeland Hospital in January 2029."]


def test_in_a_chat_between_two_people_the_other_ones_message_is_the_context() -> None:
    from deltamem.manager.extract import turn_prompt

    chat = [
        Message(role="user", name="Tim", content="Where's your next game?"),
        Message(role="user", name="John", content="Seattle, next month!"),
        Message(role="user", name="John", content="Can't wait."),
    ]
    record = SessionRecord(
        user_id="u", session_id="s", timestamp=T0, messages=chat, content_hash="h"
    )
    asked = turn_prompt(record, 1, None)
    assert asked.before is chat[0] and asked.subject == "John"
    assert "Tim (before): Where's your next game?" in asked.messages[1]["content"]
    # the same person's message before is no one else's context
    assert turn_prompt(record, 2, None).before is None
