"""The agentic manager: validation of its operations, the search-tool loop, chunking,
what the prompt shows, provenance and duplicate handling. The LLM is scripted; the
embedder and the store are real."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from fakes import SESSION, T0, ScriptedLLM, add, ops, update

from deltamem.embed import Embedder
from deltamem.llm.base import CallRecord, ChatMessage, LLMOutputError
from deltamem.manager import schema
from deltamem.manager.agent import Manager, ManagerConfig, Plan
from deltamem.manager.atomise import first_person, split_facts
from deltamem.manager.validate import Workspace, apply_ops
from deltamem.store.base import PlannedWrite, Store
from deltamem.types import MAX_MEMORY_CHARS, MemoryItem, Message, SessionRecord


def mem_item(mid: str, content: str) -> MemoryItem:
    return MemoryItem(
        id=mid, user_id="u1", content=content, timestamp=T0, created_at=T0, updated_at=T0
    )


def workspace(*contents: str) -> tuple[Workspace, list[str]]:
    """A workspace that was shown stored memories m1, m2, ... with these contents."""
    ws = Workspace()
    shorts = [ws.show(mem_item(f"id{i}", c)) for i, c in enumerate(contents, start=1)]
    return ws, shorts


def rec(
    msgs: list[tuple[str, str]], sid: str = "s1", user_id: str = "u1", days: int = 0
) -> SessionRecord:
    return SessionRecord(
        user_id=user_id,
        session_id=sid,
        timestamp=T0 + timedelta(days=days),
        messages=[Message(role=r, content=c) for r, c in msgs],  # type: ignore[arg-type]
        content_hash=f"h-{sid}",
    )


def seed(store: Store, embedder: Embedder, *contents: str, sid: str = "s0") -> list[str]:
    """Store memories of u1 through a logged, applied session; returns their ids."""
    r, _ = store.log_session(rec([("user", "seed")], sid=sid, days=-30))
    vecs = embedder.embed(list(contents))
    writes = [PlannedWrite("add", c, v) for c, v in zip(contents, vecs, strict=True)]
    return [o.memory_id or "" for o in store.apply_session(r, writes, [])]


def prompt_of(request: dict) -> str:
    return request["messages"][-1]["content"]


def manager(llm: ScriptedLLM, embedder: Embedder, store: Store, **cfg: int) -> Manager:
    return Manager(llm, embedder, store, ManagerConfig(**({"strategy": "session"} | cfg)))


# --- validation ---------------------------------------------------------------------
def test_empty_content_refused() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("   "), {"op": "add", "type": "event"}])
    assert ws.pending == []
    assert [n.op for n in ws.noops] == ["none", "none"]
    assert all("empty" in (n.note or "") for n in ws.noops)


def test_oversized_content_refused() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("Alice " + "x" * MAX_MEMORY_CHARS)])
    assert ws.pending == []
    [n] = ws.noops
    assert str(MAX_MEMORY_CHARS) in (n.note or "")
    ws2, _ = workspace()
    apply_ops(ws2, [add("A" * MAX_MEMORY_CHARS)])  # exactly at the limit is fine
    assert len(ws2.pending) == 1


def test_content_whitespace_is_collapsed() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("  Alice   likes\n tea. ")])
    assert ws.pending[0].content == "Alice likes tea."


def test_update_of_unknown_id_kept_as_add_with_note() -> None:
    ws, _ = workspace("Alice lives in Rome.")
    apply_ops(ws, [update("m7", "Alice lives in Oslo.")])
    [p] = ws.pending
    assert (p.op, p.memory_id, p.content) == ("add", None, "Alice lives in Oslo.")
    [n] = ws.noops
    assert "m7" in (n.note or "") and "kept as add" in (n.note or "")


def test_restated_add_becomes_none() -> None:
    ws, _ = workspace("Alice lives in Rome.")
    apply_ops(ws, [add("alice lives in ROME")])  # same words, other case and punctuation
    assert ws.pending == []
    [n] = ws.noops
    assert n.op == "none" and n.memory_id == "id1"
    assert "restates" in (n.note or "")


def test_restated_add_of_pending_add_becomes_none() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("Alice likes tea."), add("Alice likes tea!")])
    assert [p.content for p in ws.pending] == ["Alice likes tea."]
    assert [n.note for n in ws.noops] == ["add restates a known memory"]


def test_update_identical_to_old_becomes_none() -> None:
    ws, [m1] = workspace("Alice lives in Rome.")
    apply_ops(ws, [update(m1, "Alice lives in Rome")])
    assert ws.pending == []
    [n] = ws.noops
    assert n.memory_id == "id1" and n.note == "update repeats the memory"


def test_update_of_shown_memory_is_planned() -> None:
    ws, [_, m2] = workspace("Alice lives in Rome.", "Alice works at Brightloop.")
    apply_ops(ws, [update(m2, "Alice works at Brightloop as a lead designer.", "event")])
    [p] = ws.pending
    assert (p.op, p.memory_id, p.memory_type) == ("update", "id2", "event")
    assert p.base is not None and p.base.content == "Alice works at Brightloop."


def test_update_of_pending_add_folds_into_the_add() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("Alice moved to Rome.", "event")])
    apply_ops(ws, [update("n1", "Alice moved to Rome in May 2029.", "event")], chunk=1)
    [p] = ws.pending
    assert (p.op, p.content, p.memory_id) == ("add", "Alice moved to Rome in May 2029.", None)
    assert ws.noops == []


def test_repeated_updates_of_one_memory_fold() -> None:
    ws, [m1] = workspace("Alice lives in Rome.")
    apply_ops(
        ws,
        [update(m1, "Alice lives in Milan."), update(m1, "Alice lives in Milan with her sister.")],
    )
    [p] = ws.pending
    assert (p.op, p.memory_id, p.content) == (
        "update",
        "id1",
        "Alice lives in Milan with her sister.",
    )


def test_none_and_unknown_ops() -> None:
    ws, [m1] = workspace("Alice lives in Rome.")
    apply_ops(
        ws, [{"op": "none", "id": m1}, {"op": "none", "id": "m9"}, {"op": "delete", "id": m1}]
    )
    assert ws.pending == []
    assert [(n.op, n.memory_id) for n in ws.noops] == [("none", "id1")]


def test_non_object_operations_are_skipped() -> None:
    ws, _ = workspace()
    apply_ops(ws, ["add Alice likes tea", 3, None, add("Alice likes tea.")])  # type: ignore[list-item]
    assert [p.content for p in ws.pending] == ["Alice likes tea."]


def test_unknown_type_is_dropped() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("Alice likes tea.", "hobby")])
    assert ws.pending[0].memory_type is None


# --- the search-tool loop ----------------------------------------------------------------
def test_search_results_reach_the_second_call(embedder: Embedder, store: Store) -> None:
    [dog] = seed(store, embedder, "Alice has a beagle named Rufus.")
    llm = ScriptedLLM(
        [{"search": ["Alice's dog"]}, ops(update("m1", "Alice has two beagles, Rufus and Max."))]
    )
    m = manager(llm, embedder, store, prefetch=0, search_rounds=1)
    plan = m.plan(rec([("user", "We got a second beagle, Max, last week!")]))
    assert len(llm.requests) == 2
    first, second = llm.requests
    assert first["schema"] == schema.search_or_operations([])
    assert "Rufus" not in prompt_of(first)  # prefetch=0: nothing shown up front
    assert second["schema"] == schema.operations(["m1"])  # the hit's id may now be named
    msgs, n = second["messages"], len(first["messages"])
    assert msgs[:n] == first["messages"]  # the conversation so far, then the tool exchange
    assert len(msgs) == n + 2
    assert msgs[n]["role"] == "assistant"
    assert json.loads(msgs[n]["content"]) == {"search": ["Alice's dog"]}
    assert msgs[n + 1]["role"] == "user"
    assert "m1 | " in msgs[n + 1]["content"]
    assert "Alice has a beagle named Rufus." in msgs[n + 1]["content"]
    [w] = plan.writes
    assert (w.op, w.memory_id, w.content) == (
        "update",
        dog,
        "Alice has two beagles, Rufus and Max.",
    )
    assert plan.stats["search_queries"] == 1 and plan.stats["llm_calls"] == 2


@pytest.mark.parametrize("rounds", [1, 2, 3])
def test_search_rounds_are_bounded(embedder: Embedder, store: Store, rounds: int) -> None:
    llm = ScriptedLLM(default={"search": ["anything"]})
    m = manager(llm, embedder, store, search_rounds=rounds)
    with pytest.raises(LLMOutputError, match="operations: Field required"):
        m.plan(rec([("user", "I started learning the cello.")]))
    # a search is answered with a call that allows operations only: searching again
    # ignores the schema, a failed call, asked once more (retries=1), then given up
    assert len(llm.requests) == 3
    assert [r["schema"] for r in llm.requests[1:]] == [schema.operations([])] * 2


@pytest.mark.parametrize("search", [5, "dog", {"q": "dog"}, [], None, ["a", "b", "c", "d"]])
def test_search_reply_of_wrong_shape_is_a_failed_call(
    embedder: Embedder, store: Store, search: object
) -> None:
    llm = ScriptedLLM(default={"search": search})
    with pytest.raises(LLMOutputError, match=r"wrong shape \(search"):
        manager(llm, embedder, store, search_rounds=2).plan(
            rec([("user", "I started learning the cello.")])
        )
    assert len(llm.requests) == 2  # asked again once (retries=1), never searched


# --- the shape of a reply -------------------------------------------------------------------
MALFORMED = {
    "empty object": {},
    "operations a string": {"operations": "DROP TABLE"},
    "operations null": {"operations": None},
    "operations an object": {"operations": {"op": "add"}},
    "op not an object": ops(5),
    "unknown op": ops({"op": "delete", "id": "m1"}),
    "no op": ops({"type": "persona", "content": "Alice likes tea."}),
    "add without content": ops({"op": "add", "type": "persona"}),
    "add without type": ops({"op": "add", "content": "Alice likes tea."}),
    "content a number": ops({"op": "add", "type": "persona", "content": 5}),
    "type not a memory type": ops(add("Alice likes tea.", "hobby")),
    "update without id": ops({"op": "update", "type": "persona", "content": "Alice is 31."}),
    "id a number": ops({"op": "none", "id": 1}),
    "a good op beside a bad one": ops(add("Alice likes tea."), {"op": "add"}),
}


@pytest.mark.parametrize("reply", list(MALFORMED.values()), ids=list(MALFORMED))
def test_reply_of_wrong_shape_is_refused_with_the_reason(reply: dict) -> None:
    with pytest.raises(ValueError) as info:
        schema.check_operations(reply)
    assert str(info.value)  # names where the fault is


@pytest.mark.parametrize(
    "reply",
    [
        ops(),  # a valid "nothing to remember"
        ops(add("Alice likes tea."), update("m1", "Alice is 31."), {"op": "none", "id": "m2"}),
        ops(update("m9", "Alice is 31.")),  # an id never shown: validate.py's business
        {"operations": [], "note": "extra keys are ignored"},
    ],
)
def test_replies_of_the_right_shape_pass(reply: dict) -> None:
    schema.check_operations(reply)
    schema.check_search_or_operations(reply)


def test_a_malformed_reply_fails_the_plan_and_is_logged_with_its_reason(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM([{}, {"operations": "DROP TABLE"}])
    seen: list[CallRecord] = []
    llm.on_call(seen.append)
    with pytest.raises(LLMOutputError, match="operations: Input should be a valid list"):
        manager(llm, embedder, store).plan(rec([("user", "I started learning the cello.")]))
    assert [(r.ok, r.reply) for r in seen] == [
        (False, "{}"),
        (False, '{"operations": "DROP TABLE"}'),
    ]
    assert "operations: Field required" in (seen[0].error or "")
    assert "valid list" in (seen[1].error or "")


def test_a_malformed_reply_then_a_good_one_applies_the_good_one(
    embedder: Embedder, store: Store
) -> None:
    llm = ScriptedLLM([ops({"op": "delete", "id": "m1"}), ops(add("Alice plays the cello."))])
    plan = manager(llm, embedder, store).plan(rec([("user", "I started learning the cello.")]))
    assert [w.content for w in plan.writes] == ["Alice plays the cello."]
    assert llm.requests[1]["temperature"] > 0  # the second ask samples


def test_no_search_rounds_means_one_operations_call(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM([ops(add("Alice started learning the cello."))])
    m = manager(llm, embedder, store, search_rounds=0)
    plan = m.plan(rec([("user", "I started learning the cello.")]))
    [req] = llm.requests
    assert req["schema"] == schema.operations([])
    assert '{"search"' not in prompt_of(req)
    assert [w.content for w in plan.writes] == ["Alice started learning the cello."]


def test_operations_on_first_reply_skip_search(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM([ops(add("Alice started learning the cello."))])
    m = manager(llm, embedder, store, search_rounds=2)
    m.plan(rec([("user", "I started learning the cello.")]))
    assert len(llm.requests) == 1


def test_prefetched_memories_are_shown_with_short_ids(embedder: Embedder, store: Store) -> None:
    [rome] = seed(store, embedder, "Alice lives in Rome.")
    llm = ScriptedLLM([ops(update("m1", "Alice lives in Milan."))])
    m = manager(llm, embedder, store, search_rounds=0)
    plan = m.plan(rec([("user", "I moved from Rome to Milan.")], days=1))
    assert "m1 | 2029-01-14 | Alice lives in Rome." in prompt_of(llm.requests[0])
    [w] = plan.writes
    assert (w.op, w.memory_id) == ("update", rome)


def test_prefetch_sees_only_the_users_own_memories(embedder: Embedder, store: Store) -> None:
    r, _ = store.log_session(rec([("user", "x")], sid="other", user_id="u2"))
    v = embedder.embed(["Bob lives in Rome."])[0]
    store.apply_session(r, [PlannedWrite("add", "Bob lives in Rome.", v)], [])
    llm = ScriptedLLM([ops()])
    manager(llm, embedder, store, search_rounds=0).plan(rec([("user", "I live in Rome.")]))
    assert "Bob" not in prompt_of(llm.requests[0])


def update_ids(request: dict, op: str = "update") -> list[str] | None:
    """The ids an `op` may name under the request's schema (None: no such op)."""
    items = request["schema"]["properties"]["operations"]["items"]
    for branch in items.get("anyOf", [items]):
        if branch["properties"]["op"] == {"const": op}:
            return branch["properties"]["id"]["enum"]
    return None


def test_reply_may_name_only_the_ids_it_was_shown(embedder: Embedder, store: Store) -> None:
    seed(store, embedder, "Alice lives in Rome.", "Alice has a beagle named Rufus.")
    llm = ScriptedLLM([ops()])
    manager(llm, embedder, store, search_rounds=0).plan(
        rec([("user", "I moved from Rome to Milan with Rufus.")], days=1)
    )
    [req] = llm.requests
    assert update_ids(req) == ["m1", "m2"]  # a small model would otherwise go on to m3, m4...
    assert update_ids(req, "none") == ["m1", "m2"]


def test_operations_schema_without_known_memories_allows_only_adds() -> None:
    s = schema.operations([])
    assert s["properties"]["operations"]["items"]["properties"]["op"] == {"const": "add"}
    assert update_ids({"schema": schema.operations(["m1", "m1", "n1"])}) == ["m1", "n1"]


# --- chunking -----------------------------------------------------------------------------
def test_long_session_is_chunked_in_order(embedder: Embedder, store: Store) -> None:
    topics = ["Rome", "violin", "marathon"]
    turns = [("user", f"Topic {t}. " + " ".join(f"word{j}" for j in range(120))) for t in topics]

    def reply(messages: list[ChatMessage]) -> dict:
        n = len(llm.requests)
        if n == 1:
            return ops(add("Alice moved to Rome.", "event"))
        if n == 2:
            return ops(update("n1", "Alice moved to Rome in February 2029.", "event"))
        return ops(add("Alice runs marathons."))

    llm = ScriptedLLM(default=reply)
    m = manager(llm, embedder, store, search_rounds=0, chunk_tokens=256)
    plan = m.plan(rec(turns))
    assert len(llm.requests) == 3
    for i, (req, topic) in enumerate(zip(llm.requests, topics, strict=True)):
        p = prompt_of(req)
        assert f"[{i}] user: Topic {topic}." in p
        assert all(f"Topic {t}." not in p for t in topics if t != topic)
    # the second chunk is shown the first chunk's add as n1 and can change it
    assert "n1 | this session | Alice moved to Rome." in prompt_of(llm.requests[1])
    assert update_ids(llm.requests[0]) is None  # nothing known yet: adds only
    assert update_ids(llm.requests[1]) == ["n1"]
    assert [(w.op, w.content) for w in plan.writes] == [
        ("add", "Alice moved to Rome in February 2029."),
        ("add", "Alice runs marathons."),
    ]
    assert plan.stats["chunks"] == 3


def test_one_giant_message_is_split_across_chunks(embedder: Embedder, store: Store) -> None:
    giant = " ".join(f"w{i:05d}" for i in range(2800))  # 19,600 characters
    llm = ScriptedLLM(default=ops())
    manager(llm, embedder, store, search_rounds=0).plan(rec([("user", giant)]))
    assert len(llm.requests) >= 2
    shown = []
    for req in llm.requests:
        conversation = prompt_of(req).split("Conversation")[1].split("Known memories")[0]
        assert "[0] user: w" in conversation
        shown += [w for w in conversation.split() if w.startswith("w0") or w.startswith("w1")]
    assert shown == giant.split()  # every word once, in order


def test_chunks_without_user_turns_make_no_call(embedder: Embedder, store: Store) -> None:
    long_reply = " ".join(f"word{j}" for j in range(300))
    turns = [("assistant", long_reply), ("user", "I play the cello.")]
    llm = ScriptedLLM(default=ops())
    m = manager(llm, embedder, store, search_rounds=0, chunk_tokens=256, assistant_words=400)
    m.plan(rec(turns))
    assert len(llm.requests) == 1
    assert "I play the cello." in prompt_of(llm.requests[0])


# --- the prompt ---------------------------------------------------------------------------
def test_assistant_turns_shortened_user_turns_whole(embedder: Embedder, store: Store) -> None:
    user_text = "I adopted a beagle. " + " ".join(f"userword{i}" for i in range(200)) + "."
    assistant_text = "Congratulations on the puppy! " + " ".join(
        f"assistantword{i}" for i in range(200)
    )
    llm = ScriptedLLM([ops()])
    m = manager(llm, embedder, store, search_rounds=0, assistant_words=40)
    m.plan(rec([("user", user_text), ("assistant", assistant_text)]))
    p = prompt_of(llm.requests[0])
    assert f"[0] user: {user_text}" in p
    assert "[1] assistant: Congratulations on the puppy!" in p
    assert "assistantword199" not in p
    assert "assistantword50" not in p
    assert "…" in p


def test_static_system_prompt_first_and_identical(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM(default=ops())
    m = manager(llm, embedder, store, search_rounds=0)
    m.plan(rec([("user", "I live in Zanzibar.")], sid="a"))
    m.plan(rec([("user", "My sister is called Mia and she is a nurse.")], sid="b", days=40))
    first, second = (r["messages"] for r in llm.requests)
    assert first[0]["role"] == "system"
    assert first[0]["content"].strip()
    # everything before the session's own prompt is the same static prefix (KV cache)
    assert len(first) == len(second)
    assert first[:-1] == second[:-1]
    static = " ".join(msg["content"] for msg in first[:-1])
    assert "Zanzibar" not in static and "13 February 2029" not in static
    assert "Zanzibar" in first[-1]["content"] and "13 February 2029" in first[-1]["content"]
    assert "Mia" in second[-1]["content"] and "25 March 2029" in second[-1]["content"]


# --- provenance and duplicates -------------------------------------------------------
def test_provenance_points_at_best_matching_user_turn(embedder: Embedder, store: Store) -> None:
    turns = [
        ("user", "I work as a nurse at a hospital in Boston."),
        ("assistant", "That sounds demanding. Do you enjoy it? Tell me about your pets."),
        ("user", "Yes! Also, last week I adopted a beagle puppy named Rufus."),
        ("assistant", "A beagle puppy named Rufus, how lovely."),
        ("user", "My favourite food is sushi, I eat it every Friday."),
    ]
    llm = ScriptedLLM(
        [
            ops(
                add("Alice adopted a beagle puppy named Rufus in February 2029.", "event"),
                add("Alice's favourite food is sushi.", "persona"),
            )
        ]
    )
    plan = manager(llm, embedder, store, search_rounds=0).plan(rec(turns))
    by_content = {w.content: w.turns for w in plan.writes}
    assert by_content["Alice adopted a beagle puppy named Rufus in February 2029."] == [2]
    assert by_content["Alice's favourite food is sushi."] == [4]
    assert all(w.keywords for w in plan.writes)


def test_near_duplicate_adds_dropped(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM([ops(add("Alice likes green tea."), add("Alice really likes green tea."))])
    plan = manager(llm, embedder, store, search_rounds=0).plan(rec([("user", "I like green tea.")]))
    assert [w.content for w in plan.writes] == ["Alice likes green tea."]
    assert [n.note for n in plan.noops] == ["duplicate add"]


def test_add_restating_unshown_stored_memory_dropped(embedder: Embedder, store: Store) -> None:
    [old] = seed(store, embedder, "The user adopted a beagle named Rufus.")
    llm = ScriptedLLM([ops(add("The user adopted a beagle called Rufus."))])
    plan = manager(llm, embedder, store, search_rounds=0, prefetch=0).plan(
        rec([("user", "We adopted Rufus, a beagle.")])
    )
    assert plan.writes == []
    [n] = plan.noops
    assert n.memory_id == old and "restates" in (n.note or "")


def test_distinct_adds_are_kept(embedder: Embedder, store: Store) -> None:
    seed(store, embedder, "Alice lives in Rome.")
    llm = ScriptedLLM([ops(add("Alice plays the cello."), add("Alice's sister Mia is a nurse."))])
    plan = manager(llm, embedder, store, search_rounds=0).plan(
        rec([("user", "I play the cello and my sister Mia is a nurse.")])
    )
    assert [w.op for w in plan.writes] == ["add", "add"]
    assert all(w.embedding.shape == (embedder.dim,) for w in plan.writes)


def test_session_without_user_turns_makes_no_call(embedder: Embedder, store: Store) -> None:
    llm = ScriptedLLM()
    plan = manager(llm, embedder, store).plan(
        rec([("assistant", "Hello! How can I help?"), ("system", "Be nice.")])
    )
    assert llm.requests == []
    assert isinstance(plan, Plan) and plan.writes == [] and plan.noops == []


# --- splitting packed facts -------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "facts"),
    [
        pytest.param(
            "Sarah Lee is 39. She lives in Miami. He has a PhD in biology.",
            ["Sarah Lee is 39.", "Sarah Lee lives in Miami.", "Sarah Lee has a PhD in biology."],
            id="pronoun-to-subject",
        ),
        pytest.param(
            "Tom Baker moved to Oslo. His sister Mia is a nurse there.",
            ["Tom Baker moved to Oslo.", "Tom Baker's sister Mia is a nurse there."],
            id="possessive",
        ),
        pytest.param(
            "The user adopted a beagle. He named it Rufus. Her vet is in Leeds.",
            [
                "The user adopted a beagle.",
                "The user named it Rufus.",
                "The user's vet is in Leeds.",
            ],
            id="the-user",
        ),
        pytest.param(
            "Priya Raman works at Fernhill Labs. Since June. She likes green tea.",
            ["Priya Raman works at Fernhill Labs. Since June.", "Priya Raman likes green tea."],
            id="fragment-glued-back",
        ),
        pytest.param("Alice lives in St. Louis.", ["Alice lives in St. Louis."], id="abbreviation"),
        pytest.param(
            "Daniel Okafor is a nurse at St. Michael's Hospital in Toronto, mostly night shifts.",
            ["Daniel Okafor is a nurse at St. Michael's Hospital in Toronto, mostly night shifts."],
            id="abbreviation-before-a-long-rest",
        ),
        pytest.param(
            "Daniel Okafor ran the Toronto marathon! Finished in 3 hours 52 minutes.",
            [
                "Daniel Okafor ran the Toronto marathon!",
                "Daniel Okafor finished in 3 hours 52 minutes.",
            ],
            id="sentence-without-subject",
        ),
        pytest.param(
            "Priya Raman moved to Leeds in May. Running keeps her calm there.",
            ["Priya Raman moved to Leeds in May.", "Running keeps her calm there."],
            id="gerund-is-a-subject",
        ),
        pytest.param(
            "Alice moved to Rome in May 2029 with her sister.",
            ["Alice moved to Rome in May 2029 with her sister."],
            id="single-sentence",
        ),
        pytest.param(
            "In March 2029 Tom moved to Oslo. He likes the fjords.",
            ["In March 2029 Tom moved to Oslo.", "He likes the fjords."],
            id="no-name-no-substitution",
        ),
        pytest.param(
            "Tom Baker's cat Miso is grey. She sleeps all day long.",
            ["Tom Baker's cat Miso is grey.", "She sleeps all day long."],
            id="possessive-subject-not-substituted",
        ),
    ],
)
def test_split_facts(content: str, facts: list[str]) -> None:
    assert split_facts(content) == facts


def test_quoted_first_person_sentences_are_dropped_with_a_note() -> None:
    ws, _ = workspace()
    apply_ops(
        ws,
        [
            add(
                "Sarah Garcia's morning routine has been a game-changer. "
                "I feel more balanced and ready. My team should feel supported too."
            ),
            add("I love hiking in the Alps."),  # only first person: kept, nothing else to keep
        ],
    )
    assert [p.content for p in ws.pending] == [
        "Sarah Garcia's morning routine has been a game-changer.",
        "I love hiking in the Alps.",
    ]
    notes = [(n.content, n.note) for n in ws.noops]
    assert [c for c, _ in notes] == [
        "I feel more balanced and ready.",
        "My team should feel supported too.",
    ]
    assert all("first-person" in (note or "") for _, note in notes)


@pytest.mark.parametrize(
    ("sentence", "quoted"),
    [
        ("I feel great.", True),
        ("I'm moving to Oslo.", True),
        ("I’ve started running.", True),
        ("My sister is a nurse.", True),
        ("We adopted a cat.", True),
        ("Ingrid lives in Oslo.", False),  # a name starting with I
        ("Iris and Tom married in May.", False),
        ("Sarah is happy.", False),
    ],
)
def test_first_person(sentence: str, quoted: bool) -> None:
    assert first_person(sentence) is quoted


def test_packed_add_becomes_separate_pending_adds() -> None:
    ws, _ = workspace()
    apply_ops(ws, [add("Sarah Lee is 39. She lives in Miami.")])
    assert [p.content for p in ws.pending] == ["Sarah Lee is 39.", "Sarah Lee lives in Miami."]


# --- mis-aimed updates ------------------------------------------------------------------
def test_unrelated_update_becomes_add_and_target_is_kept(embedder: Embedder, store: Store) -> None:
    [cat] = seed(store, embedder, "Priya Raman has a cat, Miso.")
    job = "Priya Raman now works as an engineer at Fernhill Labs."
    llm = ScriptedLLM([ops(update("m1", job))])
    m = manager(llm, embedder, store, search_rounds=0)
    r = rec([("user", "I'm an engineer at Fernhill Labs now. Miso is fine.")], sid="s1", days=1)
    store.log_session(r)
    plan = m.plan(r)
    assert [(w.op, w.memory_id, w.content) for w in plan.writes] == [("add", None, job)]
    [note] = [n for n in plan.noops if n.note]
    assert (note.op, note.memory_id, note.content) == ("none", cat, job)
    assert note.note == "update unrelated to its target; kept as add"
    store.apply_session(r, plan.writes, plan.noops)
    assert store.get(cat) is not None and store.get(cat).content == "Priya Raman has a cat, Miso."  # type: ignore[union-attr]
    assert [h.op for h in store.history(cat)] == ["add"]


def test_related_update_is_applied(embedder: Embedder, store: Store) -> None:
    [home] = seed(store, embedder, "Priya Raman lives in Leeds.")
    moved = "Priya Raman moved from Leeds to Manchester in June 2029."
    llm = ScriptedLLM([ops(update("m1", moved))])
    r = rec([("user", "Last week I moved from Leeds to Manchester.")], sid="s1", days=1)
    store.log_session(r)
    plan = manager(llm, embedder, store, search_rounds=0).plan(r)
    assert [(w.op, w.memory_id) for w in plan.writes] == [("update", home)]
    assert not any(n.note and "unrelated" in n.note for n in plan.noops)
    store.apply_session(r, plan.writes, plan.noops)
    assert store.get(home).content == moved  # type: ignore[union-attr]
    assert [h.op for h in store.history(home)] == ["add", "update"]


def test_update_that_copies_another_known_memory_is_dropped(
    embedder: Embedder, tmp_path: Path
) -> None:
    """A small model writing known memories back under shifted ids must not overwrite
    one true fact with a copy of another."""
    from deltamem import Memory

    def swap_known(messages: list[ChatMessage]) -> dict:
        # write each known memory's sentence back under the other one's id
        lines = [x for x in messages[-1]["content"].splitlines() if x.startswith("m")]
        known = [(x.split(" | ")[0], x.split(" | ")[2]) for x in lines]
        assert len(known) == 2, known
        (id1, c1), (id2, c2) = known
        return ops(update(id1, c2), update(id2, c1))

    llm = ScriptedLLM(
        [
            ops(add("Priya Raman has a cat called Miso."), add("Priya Raman lives in Leeds.")),
            swap_known,
        ]
    )
    mem = Memory(tmp_path / "m.db", llm=llm, embedder=embedder, config=SESSION)
    mem.add(
        [{"role": "user", "content": "I live in Leeds with my cat Miso."}],
        user_id="p",
        session_id="s1",
        timestamp="2029-01-01",
    )
    res = mem.add(
        [{"role": "user", "content": "Still in Leeds, Miso says hi."}],
        user_id="p",
        session_id="s2",
        timestamp="2029-02-01",
    )
    assert res.applied == []
    assert sum(1 for o in res.operations if o.note and "copies memory" in o.note) == 2
    assert sorted(m.content for m in mem.get_all(user_id="p")) == [
        "Priya Raman has a cat called Miso.",
        "Priya Raman lives in Leeds.",
    ]
    assert all(m.version == 1 for m in mem.get_all(user_id="p"))
