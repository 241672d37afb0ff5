"""The guardian: typed questions every turn, a threshold policy in code, a replayable decision log."""

from stopwise.guardian.answers import Answer, Answers, Evaluator
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, Condition, Outcome, QuestionSet
from stopwise.guardian.projection import Projection, project
from stopwise.guardian.questions import Choice, Question, Score, YesNo

__all__ = [
    "DEFAULT_CONDITIONS",
    "Answer",
    "Answers",
    "Choice",
    "Condition",
    "Evaluator",
    "Outcome",
    "Projection",
    "Question",
    "QuestionSet",
    "Score",
    "YesNo",
    "project",
]
