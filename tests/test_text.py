"""Text helpers (terms, keywords, normal forms, shortening) and timestamp parsing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from deltamem.text import keywords, normalise, sentences, shorten, terms, words
from deltamem.timeparse import human_date, parse_time
from deltamem.types import Message, SearchFilters


# --- terms ---------------------------------------------------------------------------
def test_terms_lowercase_distinct_in_order_without_stopwords() -> None:
    assert terms("The user said that Rufus, the BEAGLE, chased a beagle and Rufus.") == [
        "said",
        "rufus",
        "beagle",
        "chased",
    ]


def test_terms_strip_possessives_and_curly_apostrophes() -> None:
    assert terms("Alice's dog and Bob’s cat") == ["alice", "dog", "bob", "cat"]


def test_terms_drop_single_characters_and_underscores() -> None:
    assert terms("a b c x_y 42 7") == ["42"]


def test_terms_limit() -> None:
    text = " ".join(f"word{i}" for i in range(50))
    assert terms(text, limit=3) == ["word0", "word1", "word2"]
    assert len(terms(text)) == 24


def test_terms_unicode_words() -> None:
    assert terms("Zoë ate crème brûlée in Zürich") == ["zoë", "ate", "crème", "brûlée", "zürich"]


def test_terms_of_punctuation_only() -> None:
    assert terms('"*()-:^ ... !!') == []
    assert words("") == []


# --- keywords ------------------------------------------------------------------------
def test_keywords_prefer_names_and_numbers() -> None:
    fact = "Martin Mark started working as a UX designer at Brightloop in March 2029."
    kws = keywords(fact, limit=5, skip=frozenset({"martin", "mark"}))
    assert kws == ["brightloop", "ux", "march", "2029", "started"]
    assert "working" not in kws


def test_keywords_skip_and_limit() -> None:
    fact = "Alice adopted a beagle named Rufus in Oslo."
    assert "alice" in keywords(fact)
    kws = keywords(fact, limit=2, skip=frozenset({"alice"}))
    assert kws == ["rufus", "oslo"]


def test_keywords_capital_is_judged_on_the_word_itself() -> None:
    # "art" is not a proper noun just because "Arthur" starts with the same letters
    assert keywords("Arthur likes art and painting", skip=frozenset({"arthur"})) == [
        "painting",
        "likes",
        "art",
    ]
    assert keywords("the artist met Art", limit=1) == ["art"]


def test_keywords_long_words_beat_short_ones() -> None:
    assert keywords("she enjoys painting and yoga", limit=2) == ["enjoys", "painting"]


# --- normalise -----------------------------------------------------------------------
def test_normalise_ignores_case_space_and_punctuation() -> None:
    assert normalise("  Alice likes   TEA! ") == normalise("alice likes tea") == "alice likes tea"
    assert normalise("Alice's dog.") == "alice's dog"
    assert normalise("Alice likes tea") != normalise("Alice likes coffee")
    assert normalise("Alice’s dog") == normalise("Alice's dog")


# --- shorten -------------------------------------------------------------------------
def test_shorten_keeps_short_text() -> None:
    assert shorten("  Hello there.  ", 5) == "Hello there."


def test_shorten_cuts_at_sentence_boundaries() -> None:
    text = "One two three. Four five six. Seven eight nine."
    assert shorten(text, 6) == "One two three. Four five six. …"
    assert shorten(text, 7) == "One two three. Four five six. …"
    assert shorten(text, 9) == text


def test_shorten_does_not_end_a_sentence_at_an_abbreviation() -> None:
    text = "I met Dr. Smith at St. Mary's today. He was kind. We talked a lot."
    assert shorten(text, 4) == "I met Dr. Smith …"
    assert shorten(text, 11) == "I met Dr. Smith at St. Mary's today. He was kind. …"
    assert sentences(text) == [
        "I met Dr. Smith at St. Mary's today.",
        "He was kind.",
        "We talked a lot.",
    ]


def test_shorten_falls_back_to_words_when_first_sentence_is_long() -> None:
    assert shorten("one two three four five six seven", 3) == "one two three …"
    out = shorten("A very long first sentence indeed. Short.", 2)
    assert out == "A very …"


# --- parse_time -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Sep 04, 2025, 09:05:32", datetime(2025, 9, 4, 9, 5, 32)),  # HaluMem
        ("Feb 13, 2029, 10:51:39", datetime(2029, 2, 13, 10, 51, 39)),
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),  # LoCoMo
        ("10:04 am on 19 January, 2023", datetime(2023, 1, 19, 10, 4)),
        ("12:09 AM on 1 Jan, 2024", datetime(2024, 1, 1, 0, 9)),
        ("2023/05/20 (Sat) 02:21", datetime(2023, 5, 20, 2, 21)),  # LongMemEval
        ("2023/05/20 02:21", datetime(2023, 5, 20, 2, 21)),
        ("2023-05-20T02:21:00", datetime(2023, 5, 20, 2, 21)),  # ISO
        ("2023-05-20", datetime(2023, 5, 20)),
        ("2023-05-20 02:21", datetime(2023, 5, 20, 2, 21)),
        ("  Sep  04, 2025,   09:05:32 ", datetime(2025, 9, 4, 9, 5, 32)),
        ("8 May 2023", datetime(2023, 5, 8)),
        ("May 8, 2023", datetime(2023, 5, 8)),
    ],
)
def test_parse_time_dataset_formats_as_utc(text: str, expected: datetime) -> None:
    got = parse_time(text)
    assert got == expected.replace(tzinfo=UTC)
    assert got.tzinfo is not None


def test_parse_time_keeps_explicit_offsets() -> None:
    assert parse_time("2023-05-20T02:21:00Z") == datetime(2023, 5, 20, 2, 21, tzinfo=UTC)
    got = parse_time("2023-05-20T02:21:00+02:00")
    assert got.utcoffset() == timedelta(hours=2)
    assert got == datetime(2023, 5, 20, 0, 21, tzinfo=UTC)


def test_parse_time_datetimes() -> None:
    naive = datetime(2023, 5, 20, 2, 21)
    assert parse_time(naive) == naive.replace(tzinfo=UTC)
    tokyo = datetime(2023, 5, 20, 2, 21, tzinfo=timezone(timedelta(hours=9)))
    assert parse_time(tokyo) is tokyo


@pytest.mark.parametrize(
    "bad", ["", "   ", "yesterday", "2023-13-45", "32 May, 2023", "Sept 4th 2025", "12:00"]
)
def test_parse_time_bad_input_names_it(bad: str) -> None:
    with pytest.raises(ValueError, match="unrecognised timestamp") as info:
        parse_time(bad)
    assert repr(bad) in str(info.value)


@pytest.mark.parametrize("bad", [1_700_000_000, None, 3.5, b"2023-05-20"])
def test_parse_time_non_strings_raise_value_error(bad: object) -> None:
    with pytest.raises(ValueError, match="unrecognised timestamp") as info:
        parse_time(bad)  # type: ignore[arg-type]
    assert repr(bad) in str(info.value)


def test_human_date() -> None:
    assert (
        human_date(datetime(2029, 2, 13, 10, 51, tzinfo=UTC)) == "Tuesday, 13 February 2029, 10:51"
    )


# --- timestamps in the data model ---------------------------------------------------------
def test_naive_datetimes_in_the_model_are_utc() -> None:
    """Every stored time must compare with every other one: naive means UTC."""
    msg = Message(role="user", content="hi", timestamp=datetime(2023, 5, 8, 10, 0))
    assert msg.timestamp == datetime(2023, 5, 8, 10, 0, tzinfo=UTC)
    f = SearchFilters(since=datetime(2023, 5, 8), until="2023-06-01")  # type: ignore[arg-type]
    assert f.since == datetime(2023, 5, 8, tzinfo=UTC)
    assert f.until == datetime(2023, 6, 1, tzinfo=UTC)
    assert f.since < f.until  # would raise TypeError if one were naive


def test_bad_timestamps_in_the_model_raise() -> None:
    with pytest.raises(ValueError, match="soon"):
        Message(role="user", content="hi", timestamp="soon")
    with pytest.raises(ValueError, match="whenever"):
        SearchFilters(since="whenever")  # type: ignore[arg-type]
