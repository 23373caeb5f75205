"""The rules pipeline (deltamem/rules): codes, switches, thresholds, languages, and
the labelled cases every rule is measured on."""

from __future__ import annotations

import json

import pytest

from deltamem.bench.rules_replay import CASES, score_cases
from deltamem.manager.extract import introduced_name
from deltamem.rules import DEFAULT, RULES, STAGES, RuleSettings, all_rules, check, rules_for
from deltamem.rules.language import language_of

JON = "Jon"


def test_every_rule_has_a_unique_code_a_stage_and_a_summary() -> None:
    codes = [r.code for r in all_rules()]
    assert len(codes) == len(set(codes))
    for rule in all_rules():
        assert rule.stage in STAGES and rule.summary and rule.code.isupper()
        # fact rules carry their check; the others run where their data is
        assert (rule.apply is not None) == (rule.stage == "fact")


def test_a_refusal_carries_its_code_and_detail() -> None:
    verdict = check("Jon is a doctor", JON, "My dad is a doctor.", None)
    assert verdict.refused is not None
    assert verdict.refused.code == "ATTRIBUTED_TO_OTHER"
    assert verdict.why == "said of someone else, not the person"


def test_a_rule_switched_off_lets_its_fact_through() -> None:
    off = RuleSettings(off=frozenset({"ATTRIBUTED_TO_OTHER"}))
    assert check("Jon is a doctor", JON, "My dad is a doctor.", None, settings=off).kept


def test_a_threshold_can_be_moved() -> None:
    fact, said = "Jon hikes in the Alps with friends", "I hike in the Alps."
    assert check(fact, JON, said, None).kept  # 2 of 3 content words said
    strict = RuleSettings(thresholds={"NOT_GROUNDED.share": 0.9, "ASSISTANTS_WORDS.share": 0.0})
    assert check(fact, JON, said, None, settings=strict).refused.code == "NOT_GROUNDED"  # type: ignore[union-attr]


def test_trace_asks_every_refusal_rule() -> None:
    # not grounded (nothing of it was said) and the assistant's words at once
    fact = "Jon should try yoga retreats in Bali with cousins"
    verdict = check(fact, JON, "OK, thanks.", "Try yoga!", trace=True)
    assert verdict.fired[0] == verdict.refused.code  # type: ignore[union-attr]
    assert set(verdict.fired) >= {"NOT_GROUNDED", "ASSISTANTS_WORDS"}
    assert check(fact, JON, "OK, thanks.", "Try yoga!").fired == verdict.fired[:1]


def test_no_kept_fact_keeps_a_first_person_word() -> None:
    told = check(
        "Jon is open to sharing my experiences", JON, "I'm open to sharing my experiences.", None
    )
    assert told.kept and told.fact == "Jon is open to sharing their experiences"
    assert [r.code for r in told.rewrites] == ["FIRST_PERSON_TOLD"]
    we = check("Jon and we went to Rome in May", JON, "We went to Rome in May.", None)
    assert we.refused is not None and we.refused.code == "FIRST_PERSON"
    assert check("Jon moved to the US in 2020", JON, "I moved to the US in 2020.", None).kept


def test_a_namesake_is_not_the_person() -> None:
    sharon = "Sharon Brown"
    said = "My friend Sharon Jackson is amazing. Sharon always encourages me to keep going."
    verdict = check("Sharon Brown always encourages me to keep going", sharon, said, None)
    assert verdict.refused is not None and verdict.refused.code == "NAMESAKE"
    # an introduction is the person's own name
    assert check("Sharon Brown likes hiking", sharon, "Hi, I'm Sharon. I like hiking.", None).kept


@pytest.mark.parametrize(
    ("said", "name"),
    [
        ("I'm Martin. I just started as a nurse at St Mary's hospital in Leeds.", "Martin"),
        ("Martin here! Quick question.", "Martin"),
        ("Hi, I'm Priya Raman, nice to meet you.", "Priya Raman"),
        ("I'm Canadian and I'm so happy today.", None),
        ("I'm Tired. Long day.", None),
        ("Hola, soy Ana Ruiz. Trabajo como enfermera.", "Ana Ruiz"),
        ("Soy enfermera en Sevilla.", None),
        ("Ich heiße Lena und wohne in Hamburg.", "Lena"),
    ],
)
def test_the_person_is_named_by_any_self_introduction(said: str, name: str | None) -> None:
    assert introduced_name([said]) == name


def test_english_rules_read_english_turns_only() -> None:
    said = "Mi hermano trabaja como médico en Madrid desde hace años."
    assert language_of(said) == "es"
    # OTHERS_THING reads English grammar: on Spanish, the general rules decide
    assert not RULES["OTHERS_THING"].reads("es") and RULES["NOT_GROUNDED"].reads("es")
    # ATTRIBUTED_TO_OTHER reads a Spanish clause by the speaker's someone it opens with
    fact = "Ana trabaja como médico en Madrid"
    verdict = check(fact, "Ana", said, None, trace=True)
    assert verdict.fired == ("ATTRIBUTED_TO_OTHER",)
    # an English fact from a Spanish turn is not grounded in its words
    english = check("Ana works as a doctor in Madrid", "Ana", said, None)
    assert english.refused is not None and english.refused.code == "NOT_GROUNDED"
    # Spanish first-person words are refused too
    mine = check(
        "Ana vive con mi hermana en el centro", "Ana", "Vivo con mi hermana en el centro.", None
    )
    assert mine.refused is not None and mine.refused.code == "FIRST_PERSON"


def test_the_labelled_cases_hold_both_kinds_for_every_fact_rule_they_name() -> None:
    rows = [json.loads(x) for x in CASES.read_text(encoding="utf-8").splitlines() if x.strip()]
    assert {r["expect"] for r in rows} == {"keep", "refuse"}
    known = {r.code for r in rules_for("fact")}
    assert {r["rule"] for r in rows if r["rule"]} <= known


def test_the_rules_decide_the_labelled_cases() -> None:
    scored = score_cases()
    # the known misses, each named in docs/rules.md: conv-41's and the written ones
    # (a nonsense label whose every word was said, a true label the turn did not use,
    # two generic "we" sentences, a reply to the listener read as said of them), and
    # conv-42's held-out sample as labelled before any change (r116, its advice, is
    # refused since ABOUT_LISTENER), the kept facts of conv-41/42 that rule misreads,
    # the maxims read as the person's doing (r205-r211, r213: GENERAL_TRUTH refused
    # them, and went when held-out conv-43 showed it refusing more right facts than
    # wrong), the dropped negations (r119, r159, r183-r193: NEGATION_DROPPED refused
    # them, and went when conv-43 and HaluMem showed 3 of its 4 firings wrong), and
    # one of held-out conv-43's firings ABOUT_LISTENER refuses wrongly (r154 since a fact
    # that gives "your X" to the listener by name is the speaker's), and held-out
    # conv-44's sample as labelled blind before any change (r071, r149: a "taekwondo
    # practitioner", a "pet lover" are kept since a label that only relates the person
    # to a thing said is the turn's; r267 since "your dog" in a statement is not "her
    # dog"; r287, "my dog" of a dog hoped for, is the relation's miss), and held-out
    # conv-30's and conv-26's (r372 and r429, "I'm not gonna give up", "I'll never
    # forget", are kept since a plan denied plans nothing; r379 since "let's" is the
    # speaker with the listener; r398 since "my family- they motivate me" is two
    # clauses; r414 since "edu" is "education" clipped; r392 since "is having" keeps the
    # clause's "I'm having"). Nineteen cases were relabelled under the written label
    # policy on 2026-11-29 (docs/rules.md, "Label policy"; each carries `relabelled`):
    # r085, r170, r220, r245, r248 (a pleasantry, an asking or encouraging reported)
    # are refused since then; r026, r049, r067, r076, r122, r176, r268, r297, r391 are
    # misses the relabelling showed
    assert sorted(w["id"] for w in scored.wrong) == [
        "r009", "r026", "r049", "r067", "r076", "r079", "r096",
        "r107", "r114", "r115", "r119", "r120", "r122", "r124",
        "r159", "r160", "r176",
        "r183", "r184", "r185", "r191", "r193", "r196",
        "r205", "r206", "r207", "r208", "r209", "r210", "r211", "r213",
        "r262", "r263", "r264", "r268", "r285", "r287", "r293", "r294", "r297", "r301", "r308",
        "r325", "r327", "r333", "r335", "r338", "r341", "r345", "r354", "r374",
        "r386", "r391",
        "r402", "r405", "r406", "r424",
        # the fact audit's wrong facts (r447-r665: stored facts drawn at random from the
        # eight dev banks, labelled blind by two readers; docs/rules.md, "The fact
        # audit"): every one a fact the rules kept when it was stored
        "r447", "r449", "r452", "r454", "r462", "r467", "r470", "r471", "r476",
        "r495", "r496", "r500", "r504", "r512", "r514", "r516", "r519", "r526",
        "r533", "r534", "r541", "r544", "r546", "r548", "r550", "r551", "r554",
        "r555", "r556", "r559", "r561", "r562", "r563", "r565", "r570", "r574",
        "r577", "r579", "r580", "r585", "r588", "r595", "r599", "r602", "r608",
        "r610", "r611", "r612", "r613", "r614", "r619", "r621", "r622", "r623",
        "r640", "r649", "r650", "r651", "r652", "r657", "r658", "r662",
    ]  # fmt: skip
    assert scored.cases == 665


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        ("Joanna has cooking skills", "I can tell! Your cooking skills are awesome."),
        ("Nate is allergic to peanuts", "Sorry to hear that. What are you allergic to?"),
        ("Nate likes to work hard", "Great idea! Keep up the hard work!"),
        ("Nate has faith in Nate", "I have faith in you!"),
        # an order with the speaker as its object is still the listener's
        ("Maria is a campaigner", "Keep me posted on how your campaign is going."),
    ],
)
def test_what_was_said_to_the_listener_is_not_the_persons(fact: str, said: str) -> None:
    verdict = check(fact, fact.split()[0], said, None)
    assert verdict.refused is not None and verdict.refused.code == "ABOUT_LISTENER"


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        ("Tom adopted a puppy", "Did I tell you I adopted a puppy last week?"),
        ("Tom loves hiking", "Love hiking, especially in autumn."),
        ("Tom's work has been crazy", "Work has been crazy this month."),
        ("Tom loves it when Ana cooks", "I love when you cook for us."),
        ("Tom is looking for advice", "Do you have any advice for someone like me?"),
    ],
)
def test_the_speakers_own_news_beside_a_you_is_kept(fact: str, said: str) -> None:
    assert check(fact, "Tom", said, None).kept


@pytest.mark.parametrize(
    ("fact", "said", "kept"),
    [
        # the speaker's own act of speech that carries something of theirs, reported
        ("Tom recommends 'Becoming Nicole' to Ana", "You should read 'Becoming Nicole'!", True),
        ("Tom advises Ana to read lots", "Read lots and try out different genres.", True),
        # the listener's part given to the listener by name
        ("Tom is grateful for Ana's advice", "Your advice was spot on, Ana.", True),
        # an asking or an encouraging reported says nothing of the speaker (the label
        # policy, docs/rules.md)
        (
            "Tom asks if Ana has a favorite beach memory",
            "Do you have a favorite beach memory?",
            False,
        ),
        (
            "Tom encourages Ana to keep up the hard work",
            "Great idea! Keep up the hard work!",
            False,
        ),
        ("Tom asks what Ana is allergic to", "What are you allergic to, Ana?", False),
    ],
)
def test_the_speakers_recommendation_and_the_listener_named_are_kept(
    fact: str, said: str, kept: bool
) -> None:
    fired = check(fact, "Tom", said, None, trace=True).fired
    assert ("ABOUT_LISTENER" not in fired) is kept


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        # asking, but the listener's script made the person's
        ("Tom is asking about the next steps in his script", "So, what about your script now?"),
        # the listener's advice made the person's
        ("Tom gives good advice", "Your advice was spot on, Ana."),
        # another's thing given by name does not cover the listener's own
        ("Tom has Ana's support and great cooking skills", "Your cooking skills are awesome."),
    ],
)
def test_reported_asking_does_not_carry_the_listeners_part(fact: str, said: str) -> None:
    assert "ABOUT_LISTENER" in check(fact, "Tom", said, None, trace=True).fired


def test_a_name_written_twice_without_a_you_is_not_the_listener() -> None:
    # HaluMem's long preference facts repeat the name for "she"
    fact = "Sam Lee dislikes sodas, because Sam Lee finds them too sweet"
    assert check(fact, "Sam Lee", "I don't like sodas, they're too sweet for me.", None).kept


def test_the_decide_stage_shares_one_duplicate_threshold() -> None:
    from deltamem.manager import agent, resolve

    cut = RULES["RESTATES_KNOWN"].thresholds["cosine"]
    assert resolve.DUPLICATE == agent.NEAR_DUPLICATE == cut
    assert DEFAULT.on("RESTATES_KNOWN")


def test_a_fact_cut_from_its_subject_gets_the_person_back_in_any_language() -> None:
    from deltamem.manager.extract import reply_facts

    reply = {"facts": ["Ana Ruiz es una enfermera. trabaja en el Hospital La Paz de Madrid."]}
    assert reply_facts(reply, "Ana Ruiz") == [
        "Ana Ruiz es una enfermera.",
        "Ana Ruiz trabaja en el Hospital La Paz de Madrid.",
    ]


@pytest.mark.parametrize(
    ("fact", "said"),
    [
        # a pleasantry says nothing of the person (the label policy, docs/rules.md)
        ("Maria is glad John enjoyed it", "Glad you enjoyed it, John!"),
        ("John is grateful for the support", "Thanks for your support."),
        # and the listener's part of it is the listener's
        ("Maria enjoyed it", "Glad you enjoyed it, John!"),
        ("John has support", "Thanks for your support."),
    ],
)
def test_a_pleasantry_to_the_listener_is_not_a_fact_about_the_person(fact: str, said: str) -> None:
    assert not check(fact, fact.split()[0], said, None).kept


@pytest.mark.parametrize(
    ("fact", "said", "kept"),
    [
        # the thing is "my" thing in the clause, whoever does its verb
        (
            "Tom wants tips for his first marathon",
            "Do you have any tips for me before my first marathon?",
            True,
        ),
        ("Tom has a long-term goal", "It ties into my long-term goal of writing a novel.", True),
        # ... unless the fact repeats the other's doing
        ("Tom broke his phone", "She broke my phone yesterday.", False),
        ("Jon runs marathons", "Tom, my boss, runs marathons.", False),
    ],
)
def test_the_speakers_own_thing_in_anothers_clause(fact: str, said: str, kept: bool) -> None:
    assert check(fact, fact.split()[0], said, None).kept is kept


@pytest.mark.parametrize(
    ("fact", "said", "kept"),
    [
        # a fact of liking or interest from a wish states the feeling, not the plan done
        (
            "Audrey is interested in hiking with her dogs",
            "That makes me want to hike with my dogs.",
            True,
        ),
        ("Audrey likes dogs", "I would love to take the dogs there sometime soon.", True),
        # ... unless its word was the clause's, said of others or in a request
        (
            "Martin is interested in nutrition",
            "I'll discuss it with friends who are interested in nutrition.",
            False,
        ),
        ("Sarah likes movies", "I'd like to share my Movie Preference with you.", False),
        # the month in a date note is not "may"
        (
            "Audrey took a road trip to a national park",
            "Last Friday [5 May 2023] we took a road trip to a national park.",
            True,
        ),
        ("Jon lives in Berlin", "I'd love to live in Berlin someday.", False),
        # a relative clause is said of the noun before it
        (
            "Tim is a fan of Harry Potter",
            "Last week I talked to my friend who is a fan of Harry Potter.",
            False,
        ),
        ("Tim talked to his friend", "Last week I talked to my friend who is a fan of it.", True),
        # a name opening a sentence is not an order ("fox" is also a verb)
        (
            "Andrew enjoys hiking on weekends",
            "Fox Hollow is a great trail to hike on weekends; the views are awesome!",
            True,
        ),
        # the listener's thing in a statement is not the person's ...
        (
            "Audrey is training her future dog",
            "I'll send you tips on training your future dog!",
            False,
        ),
        # ... but asked back, it is shared
        (
            "John enjoys playing games with his family",
            "We love playing games. What do you enjoy doing with your family?",
            True,
        ),
        # a label that only relates the person to a thing the turn said is the turn's
        ("Nate is a pet lover", "Pets bring tons of joy. Relaxing with them is great.", True),
        ("John is a taekwondo practitioner", "I'm off to do some taekwondo!", True),
        (
            "Gina is a clothing store owner",
            "I launched an ad campaign for my clothing store.",
            True,
        ),
        # ... and one who attends it, suffers it or takes part in it (2026-11-29)
        ("Sarah is a health seminar attendee", "Recently, I attended a health seminar.", True),
        (
            "Sarah is a chronic fatigue syndrome patient",
            "Balancing these projects with my health condition, Chronic Fatigue Syndrome, is hard.",
            True,
        ),
        # an enthusiast is the model's summary of any liking; a label of unsaid things too
        ("Sarah is a heavy metal enthusiast", "The heavy metal concert was overwhelming.", False),
        (
            "Martin is a jazz musician",
            "The improvisational nature of jazz sparked new ideas.",
            False,
        ),
        ("Gina is a fashion designer", "My online clothes store is open!", False),
    ],
)
def test_the_readings_held_out_conv44_showed(fact: str, said: str, kept: bool) -> None:
    """Each general reading the blind sample of conv-44 showed (docs/rules.md), with
    the case it must still refuse beside it."""
    assert check(fact, fact.split()[0], said, None).kept is kept


@pytest.mark.parametrize(
    ("fact", "said", "kept"),
    [
        # a plan denied plans nothing: what the clause says after it is the person's ...
        (
            "Jon has a dance studio",
            "I'm not gonna give up on my dreams - my dance studio and biz need hard work.",
            True,
        ),
        ("Tom dances every day", "I don't want to stop dancing every day.", True),
        (
            "Mel is a mother of a child who took her first steps",
            "I'll never forget the day my child took her first steps.",
            True,
        ),
        # the fact keeps the clause's own present progressive: an arrangement as said ...
        ("Cara is having an art show", "Next month I'm having an art show - can't wait!", True),
        # ... not a wish, a thought or a denial written as one
        ("Cara is having an art show", "Next month I want to have an art show.", False),
        ("Cara is moving to Berlin", "I'm thinking of moving to Berlin next year.", False),
        # a dash with a space after it cuts the clause, as one with spaces both sides does
        (
            "Mel is motivated by her family",
            "I want to be brave for my family- they motivate me.",
            True,
        ),
        ("Mel is motivated by her family", "I want to be motivated by my family.", False),
        # ... while a plan not denied is still a plan
        ("Jon has a dance studio", "I'm gonna open a dance studio next year.", False),
        ("Jon owns a car", "I'm not sure, but I'll buy a car soon.", False),
        # "let's" is the speaker with the listener, not a thing of someone's ...
        ("Jon is going to a dance class", "Great idea! Let's go to a dance class!", True),
        # ... while another's doing is still another's
        ("Jon is going to a dance class", "Great idea! My sister goes to a dance class.", False),
        # a word of the chat clipped ("edu", "comps", "info") is the word in full ...
        ("Caro is interested in continuing her education", "Gonna continue my edu!", True),
        # ... but a name is no clipping ("Tim" is not "time"), nor a word the lexicon knows
        ("Ana is spending time on analysis", "Tim and Ana are spending the day out.", False),
        ("Ana is a restaurant owner", "I need some rest after work.", False),
    ],
)
def test_the_readings_held_out_conv30_and_conv26_showed(fact: str, said: str, kept: bool) -> None:
    """Each general reading the blind samples of conv-30 and conv-26 showed (docs/rules.md)."""
    assert check(fact, fact.split()[0], said, None).kept is kept
