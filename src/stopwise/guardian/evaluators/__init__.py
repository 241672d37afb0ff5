"""Evaluators: what answers the guardian's questions (see ``stopwise.guardian.answers.Evaluator``)."""

from stopwise.guardian.evaluators.judge import JudgeEvaluator
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.evaluators.scripted import EvaluatorScriptExhausted, ScriptedEvaluator
from stopwise.guardian.evaluators.systemone import SystemOneEvaluator

__all__ = [
    "EvaluatorScriptExhausted",
    "JudgeEvaluator",
    "RuleEvaluator",
    "ScriptedEvaluator",
    "SystemOneEvaluator",
]
