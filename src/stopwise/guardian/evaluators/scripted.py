"""``ScriptedEvaluator``: a guardian evaluator for tests that returns answers given in advance, in order."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import TypeAlias

from stopwise.errors import StopwiseError
from stopwise.guardian.answers import Answer, Answers
from stopwise.guardian.conditions import QuestionSet
from stopwise.guardian.projection import Projection
from stopwise.guardian.questions import YesNo

__all__ = ["EvaluatorScriptExhausted", "ScriptItem", "ScriptedEvaluator"]

ScriptItem: TypeAlias = Mapping[str, "float | Mapping[str, float] | Answer"] | Answers | BaseException
"""One call's script: per condition a probability of yes (yes/no questions), a distribution over the labels
(choice and score questions) or an ``Answer``; or a whole ``Answers``; or an exception to raise."""


class EvaluatorScriptExhausted(StopwiseError):
    """A ``ScriptedEvaluator`` was called more times than it was given answers for."""


class ScriptedEvaluator:
    """Returns the scripted answers in order, one item per ``evaluate`` call; for tests and demos.

    Each item is one of:
    - a mapping condition name -> a float (the probability of yes; only for yes/no questions), a mapping label ->
      probability (a Choice's options or a Score's levels ``"0"``..), or an ``Answer``. Conditions the mapping
      leaves out get no answer, which ``Answers.checked`` turns into an uncertain one, as for a real evaluator;
      names the question set does not ask are ignored;
    - an ``Answers``, returned as it is;
    - an exception instance, raised (to simulate an evaluator failure or a timeout).

    ``seen`` holds every projection it was asked about and ``questions`` every question set, in call order, so a
    test can assert what the guardian showed it. A call beyond the script raises ``EvaluatorScriptExhausted``
    naming the call number. A float for a question that is not yes/no raises ``TypeError``: that is a bug in the
    test, not an answer to check.
    """

    def __init__(
        self,
        answers: Iterable[ScriptItem],
        *,
        name: str = "scripted",
        model_version: str = "scripted-1",
    ) -> None:
        self.name = name
        self.model_version = model_version
        self._script: list[ScriptItem] = list(answers)
        self.seen: list[Projection] = []
        """The projection of every call, in order."""
        self.questions: list[QuestionSet] = []
        """The question set of every call, in order."""

    @property
    def calls(self) -> int:
        """How many times ``evaluate`` was called."""
        return len(self.seen)

    @property
    def remaining(self) -> int:
        """How many scripted items are left."""
        return max(0, len(self._script) - len(self.seen))

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        self.seen.append(projection)
        self.questions.append(questions)
        call = len(self.seen)
        if call > len(self._script):
            raise EvaluatorScriptExhausted(
                f"ScriptedEvaluator has no answers left for call {call}: "
                f"it was given {len(self._script)} and all were used"
            )
        item = self._script[call - 1]
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, Answers):
            return item
        answers: dict[str, Answer] = {}
        for condition in questions.conditions:
            if condition.name not in item:
                continue
            value = item[condition.name]
            if isinstance(value, Answer):
                answers[condition.name] = value
            elif isinstance(value, Mapping):
                answers[condition.name] = Answer(dict(value))
            elif isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                if not isinstance(condition.question, YesNo):
                    raise TypeError(
                        f"ScriptedEvaluator call {call}: {condition.name!r} is a "
                        f"{type(condition.question).__name__} question; script a distribution over "
                        f"{list(condition.question.labels)}, not a float"
                    )
                answers[condition.name] = Answer({"yes": float(value), "no": 1.0 - float(value)})
            else:
                raise TypeError(
                    f"ScriptedEvaluator call {call}: the answer for {condition.name!r} must be a probability, "
                    f"a distribution or an Answer, got {value!r}"
                )
        return Answers(self.name, self.model_version, answers)
