"""Evaluators: what answers the guardian's questions (see ``stopwise.guardian.answers.Evaluator``)."""

from typing import TYPE_CHECKING

from stopwise.guardian.evaluators.judge import JudgeEvaluator
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.evaluators.scripted import EvaluatorScriptExhausted, ScriptedEvaluator

if TYPE_CHECKING:
    from stopwise.guardian.evaluators.systemone import SystemOneEvaluator

__all__ = [
    "EvaluatorScriptExhausted",
    "JudgeEvaluator",
    "RuleEvaluator",
    "ScriptedEvaluator",
    "SystemOneEvaluator",
]


def __getattr__(name: str) -> object:
    # The System 1 client imports httpx (a third of ``import stopwise``): loaded when first named, not before.
    if name == "SystemOneEvaluator":
        from stopwise.guardian.evaluators.systemone import SystemOneEvaluator

        return SystemOneEvaluator
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
