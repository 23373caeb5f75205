"""A later fact that ends or takes back an earlier one outdates it in Spanish, German
and French as in English (deltamem/rules/endings.py, rules ENDED_BY_LATER and
TAKEN_BACK_BY_LATER)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import UTC, datetime

import pytest
from fakes import SESSION, ScriptedLLM, add, ops

from deltamem.manager.outdate import outdated_by
from deltamem.memory import Memory
from deltamem.types import MemoryItem

BEFORE = datetime(2030, 1, 1, tzinfo=UTC)
AFTER = datetime(2030, 6, 1, tzinfo=UTC)


def _memory(n: int, content: str) -> MemoryItem:
    return MemoryItem(
        id=f"m{n}", content=content, user_id="u", timestamp=BEFORE,
        created_at=BEFORE, updated_at=BEFORE,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("name", "fact", "ended", "kept", "rule"),
    [
        (
            "Ana Ruiz", "Ana Ruiz dejó el hospital de Sevilla",
            "Ana Ruiz trabaja en el Hospital Virgen del Rocío de Sevilla desde 2020",
            "Ana Ruiz tiene una hermana llamada Lucía", "ENDED_BY_LATER",
        ),
        (
            "Ana Ruiz", "Ana Ruiz dejó de fumar el año pasado",
            "Ana Ruiz fuma diez cigarrillos al día", "Ana Ruiz corre por el parque",
            "TAKEN_BACK_BY_LATER",
        ),
        (
            "Ana Ruiz", "Ana Ruiz ya no toma café por la mañana",
            "Ana Ruiz toma café por la mañana", "Ana Ruiz toma té por la tarde",
            "TAKEN_BACK_BY_LATER",
        ),
        (
            "Lena Vogel", "Lena Vogel hat Siemens im Mai verlassen",
            "Lena Vogel arbeitet als Ingenieurin bei Siemens in München",
            "Lena Vogel spielt Geige", "ENDED_BY_LATER",
        ),
        (
            "Lena Vogel", "Lena Vogel trinkt keinen Kaffee mehr",
            "Lena Vogel trinkt jeden Morgen Kaffee", "Lena Vogel trinkt gern Tee",
            "TAKEN_BACK_BY_LATER",
        ),
        (
            "Lena Vogel", "Lena Vogel hat aufgehört zu rauchen",
            "Lena Vogel raucht seit zehn Jahren", "Lena Vogel wohnt in Köln",
            "TAKEN_BACK_BY_LATER",
        ),
        (
            "Marie Dubois", "Marie Dubois a quitté Renault en mars",
            "Marie Dubois travaille chez Renault à Paris", "Marie Dubois joue du piano",
            "ENDED_BY_LATER",
        ),
        (
            "Marie Dubois", "Marie Dubois ne boit plus de café",
            "Marie Dubois boit du café chaque matin", "Marie Dubois aime le thé",
            "TAKEN_BACK_BY_LATER",
        ),
        (
            "Priya", "Priya left Northwind Bank and joined Fernhill Labs",
            "Priya works as a data analyst at Northwind Bank", "Priya plays tennis",
            "ENDED_BY_LATER",
        ),
    ],
)  # fmt: skip
def test_a_later_fact_outdates_what_it_ends_in_its_own_language(
    name: str, fact: str, ended: str, kept: str, rule: str
) -> None:
    ids, found = outdated_by(fact, [_memory(1, ended), _memory(2, kept)], name, AFTER)
    assert (ids, found) == (["m1"], rule)


@pytest.mark.parametrize(
    ("name", "fact", "older"),
    [
        # nothing named ended: a review left, a house left for the day
        ("Priya", "Priya left a review for Cafe Nero", "Priya likes Cafe Nero"),
        ("Ana Ruiz", "Ana Ruiz dejó una reseña del Café Central", "Ana Ruiz va al Café Central"),
        # a fact that ends nothing
        ("Lena Vogel", "Lena Vogel arbeitet seit Mai bei Bosch", "Lena Vogel arbeitet bei Siemens"),
    ],
)
def test_a_fact_that_ends_nothing_outdates_nothing(name: str, fact: str, older: str) -> None:
    assert outdated_by(fact, [_memory(1, older)], name, AFTER) == ([], None)


@pytest.fixture
def mem(make_memory: Callable[..., Memory], llm: ScriptedLLM) -> Memory:
    return make_memory(llm, dataclasses.replace(SESSION, beside="both"))


def test_a_spanish_job_that_ended_is_stored_as_outdated(mem: Memory, llm: ScriptedLLM) -> None:
    llm.push(ops(add("Alice trabaja como enfermera en el Hospital Virgen del Rocío de Sevilla")))
    job = "Trabajo como enfermera en el Hospital Virgen del Rocío de Sevilla desde 2020."
    mem.add([{"role": "user", "content": job}], user_id="alice", session_id="s1",
            timestamp="2030-09-14")  # fmt: skip
    llm.push(ops(add("Alice dejó el hospital de Sevilla")))
    left = "¡Grandes noticias! Dejé el hospital de Sevilla el mes pasado."
    mem.add([{"role": "user", "content": left}], user_id="alice", session_id="s2",
            timestamp="2031-01-20")  # fmt: skip

    (current,) = mem.get_all(user_id="alice")
    assert current.content == "Alice dejó el hospital de Sevilla"
    everything = mem.get_all(user_id="alice", filters={"outdated": True})
    (old,) = [m for m in everything if m.id != current.id]
    assert old.superseded_by == current.id and old.invalid_at is not None
