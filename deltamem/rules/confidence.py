"""A fact the model wrote unsure of itself: its own token confidence.

The one fact rule that reads no words: the mean log-probability of the tokens the
extractor wrote for the fact (`deltamem.llm.confidence`), given where the engine
reports it (llama.cpp; a reply asked again after a failure, or from a server that
gives none, carries none, and the rule passes its facts). Each fact cut from one
reply item gets that item's mean. It is off by default (its floor is minus
infinity): on 180 of the fact audit's agreed facts it separates right from wrong
with an AUC of 0.75, but at every floor tried it refuses right facts as well (at
-0.6, 17 wrong and 9 right of 180), above the rules' bar of 1% wrongly refused.
Switched on for whole banks it brings HaluMem's state nearer the gold (+0.008 state
F1 over both users) with the same evidence for the answers, but two blind readers
call half or more of its refusals right facts (conv-42, HaluMem user 3);
docs/rules.md, "The extractor's own confidence".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from deltamem.rules.base import Outcome

if TYPE_CHECKING:
    from deltamem.rules.pipeline import FactInput


def low(given: FactInput) -> Outcome | None:
    from deltamem.rules.registry import RULES  # the registry imports this module

    if given.confidence is None:
        return None
    floor = given.settings.threshold(RULES["LOW_CONFIDENCE"], "mean")
    if given.confidence < floor:
        return Outcome(
            "LOW_CONFIDENCE",
            f"the model wrote it unsure (mean token log-probability {given.confidence:.2f})",
        )
    return None
