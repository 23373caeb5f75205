"""The rules of the write and read paths: named, switchable, counted.

from deltamem.rules import check, RuleSettings
verdict = check("Jon is a doctor", "Jon", "My dad is a doctor.", None)
verdict.refused.code  # "ATTRIBUTED_TO_OTHER"
check(..., settings=RuleSettings(off=frozenset({"ATTRIBUTED_TO_OTHER"})))
"""

from deltamem.rules.base import DEFAULT, STAGES, Outcome, Rule, RuleSettings, Stage
from deltamem.rules.pipeline import FactInput, Verdict, check
from deltamem.rules.registry import RULES, all_rules, rules_for

__all__ = [
    "DEFAULT",
    "RULES",
    "STAGES",
    "FactInput",
    "Outcome",
    "Rule",
    "RuleSettings",
    "Stage",
    "Verdict",
    "all_rules",
    "check",
    "rules_for",
]
