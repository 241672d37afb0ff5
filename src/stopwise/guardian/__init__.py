"""The guardian: typed questions every turn, a threshold policy in code, a replayable decision log."""

from typing import TYPE_CHECKING

from stopwise._deprecated import aliases
from stopwise._lazy import lazy
from stopwise.goal import Goal
from stopwise.guardian.answers import Answer, Answers, Evaluator
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, Condition, GuardianOutcome, QuestionSet
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.policy import PolicyInputs, PolicyResult, ThresholdPolicy
from stopwise.guardian.projection import Projection, project
from stopwise.guardian.questions import Choice, Question, Score, YesNo
from stopwise.guardian.records import ConditionSpec, GuardianDecision, replay

if TYPE_CHECKING:
    from stopwise.guardian.evaluators import (
        EvaluatorScriptExhausted,
        JudgeEvaluator,
        RuleEvaluator,
        ScriptedEvaluator,
        SystemOneEvaluator,
    )

__all__ = [
    "DEFAULT_CONDITIONS",
    "Answer",
    "Answers",
    "Choice",
    "Condition",
    "ConditionSpec",
    "GuardianDecision",
    "Evaluator",
    "EvaluatorScriptExhausted",
    "Goal",
    "Guardian",
    "JudgeEvaluator",
    "GuardianOutcome",
    "PolicyInputs",
    "PolicyResult",
    "Projection",
    "Question",
    "QuestionSet",
    "RuleEvaluator",
    "Score",
    "ScriptedEvaluator",
    "SystemOneEvaluator",
    "ThresholdPolicy",
    "YesNo",
    "project",
    "replay",
]

_renamed = aliases(
    __name__, {"Decision": ("GuardianDecision", GuardianDecision), "Outcome": ("GuardianOutcome", GuardianOutcome)}
)

# The evaluators are imported when first named (the rule evaluator's tables, the System 1 client's httpx): see
# ``guardian.evaluators``.
__getattr__ = lazy(
    __name__,
    dict.fromkeys(
        ("EvaluatorScriptExhausted", "JudgeEvaluator", "RuleEvaluator", "ScriptedEvaluator", "SystemOneEvaluator"),
        "stopwise.guardian.evaluators",
    ),
    _renamed,
)
