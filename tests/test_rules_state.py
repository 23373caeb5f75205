"""`deltamem bench rules` on a HaluMem run: each rule's ablation line in state F1."""

from __future__ import annotations

import json
from pathlib import Path

from fakes import ScriptedLLM

from deltamem.bench.rules_replay import replay_run
from deltamem.bench.rules_state import (
    ALL,
    BEST_OF_WRITTEN,
    NONE,
    state_ablation,
    state_table,
)
from deltamem.embed import Embedder
from deltamem.memory import Memory
from deltamem.store.sqlite import SQLiteStore

SAID = "I'm Jon. My dad is a doctor, and I teach maths at a school in Leeds."
GOLD = "Jon teaches maths at a school in Leeds"


def _halumem_run(tmp_path: Path, embedder: Embedder) -> Path:
    """A finished run as `bench halumem` leaves it: the store's session log, the
    extractor's logged reply and the session's gold points."""
    run = tmp_path / "run"
    db = run / "systems" / "deltamem" / "deltamem.db"
    db.parent.mkdir(parents=True)
    store = SQLiteStore(db, dim=embedder.dim, embedder_name=embedder.name)
    mem = Memory(llm=ScriptedLLM(), embedder=embedder, store=store)
    mem.log_session(
        [{"role": "user", "content": SAID}], user_id="u", session_id="s000", infer=False
    )
    mem.close()
    reply = {"facts": ["Jon is a doctor", GOLD]}
    call = {"purpose": "extract", "ok": True, "reply": json.dumps(reply)}
    (run / "llm_calls.jsonl").write_text(json.dumps(call) + "\n")
    session = {
        "kind": "session",
        "system": "deltamem",
        "session_id": "s000",
        "filler": False,
        "gold": [GOLD],
        "state": {"r_trans": 0.5},
    }
    (run / "results.jsonl").write_text(json.dumps(session) + "\n")
    return run


def test_a_rule_that_refuses_a_wrong_fact_pays_in_state_f1(
    tmp_path: Path, embedder: Embedder
) -> None:
    run = _halumem_run(tmp_path, embedder)
    score = replay_run(run, embedder=embedder)
    assert score.written == 2 and score.kept == 1
    assert score.let_through["ATTRIBUTED_TO_OTHER"] == 1
    state = state_ablation(run, score, embedder)
    assert state is not None and state.logged == 0.5
    assert state.f1[ALL] == 1.0  # the bank is the gold state
    # with the rule off the father's job is the person's: the only entry the two
    # states do not share is wrong (shared entries cost nothing, so F1 is 0)
    assert state.f1["ATTRIBUTED_TO_OTHER"] == 0.0
    assert state.delta("ATTRIBUTED_TO_OTHER") == -1.0
    assert state.f1[NONE] < state.f1[ALL]
    # a perfect filter of what was written keeps the gold fact alone
    assert state.f1[BEST_OF_WRITTEN] == 1.0 and state.facts[BEST_OF_WRITTEN] == 1
    assert state.delta("PLAN_AS_DONE") == 0  # it touched neither fact
    assert "| `ATTRIBUTED_TO_OTHER` | 0.000 (-1.000) |" in state_table({"run": state})


def test_a_run_without_gold_states_has_no_state_line(tmp_path: Path, embedder: Embedder) -> None:
    run = _halumem_run(tmp_path, embedder)
    (run / "results.jsonl").write_text("")  # a LoCoMo run logs no gold state
    assert state_ablation(run, replay_run(run, embedder=embedder), embedder) is None
