"""Evaluators: what answers the guardian's questions (see ``stopwise.guardian.answers.Evaluator``).

Each is imported when first named (``from stopwise.guardian.evaluators import RuleEvaluator`` works as ever): the
rule evaluator's tables, the System 1 client's httpx and the defender backend are not paid for by who does not use
them (``DefenderIntegrity`` loads stackone-defender only when one is built).
"""

from typing import TYPE_CHECKING

from stopwise._lazy import lazy

if TYPE_CHECKING:
    from stopwise.guardian.evaluators.defender import DefenderIntegrity
    from stopwise.guardian.evaluators.judge import JudgeEvaluator
    from stopwise.guardian.evaluators.rule import RuleEvaluator
    from stopwise.guardian.evaluators.scripted import EvaluatorScriptExhausted, ScriptedEvaluator
    from stopwise.guardian.evaluators.systemone import SystemOneEvaluator

__all__ = [
    "DefenderIntegrity",
    "EvaluatorScriptExhausted",
    "JudgeEvaluator",
    "RuleEvaluator",
    "ScriptedEvaluator",
    "SystemOneEvaluator",
]

__getattr__ = lazy(
    __name__,
    {
        "DefenderIntegrity": "stopwise.guardian.evaluators.defender",
        "EvaluatorScriptExhausted": "stopwise.guardian.evaluators.scripted",
        "JudgeEvaluator": "stopwise.guardian.evaluators.judge",
        "RuleEvaluator": "stopwise.guardian.evaluators.rule",
        "ScriptedEvaluator": "stopwise.guardian.evaluators.scripted",
        "SystemOneEvaluator": "stopwise.guardian.evaluators.systemone",
    },
)
