"""Running an evaluator over labelled traces: per record, the probability it gave that the condition holds.

Nothing here imports numpy: the metrics come after, from the predictions.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from stopwise.evals.traces import TraceRecord, text_projection
from stopwise.guardian.answers import Answers, Evaluator, uncertain
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, Condition, QuestionSet
from stopwise.guardian.projection import Projection

__all__ = ["Prediction", "Predictions", "Skipped", "answered", "by_condition", "predict", "reads_text"]

Progress = Callable[[int, int], None]
"""Called with (evaluator calls done, calls in all) as the run goes."""

_ELIDED = "[... earlier steps elided ...]"


@dataclass(frozen=True, slots=True)
class Prediction:
    """One record and what the evaluator said about it."""

    record: TraceRecord
    condition: Condition
    holds: bool
    """The label: whether the condition holds."""
    p: float | None
    """The probability the evaluator gave that it holds; None when its answer was uncertain."""
    note: str = ""
    """The answer's note (why it is uncertain, or what the evaluator noticed)."""


@dataclass(frozen=True, slots=True)
class Skipped:
    """A record that was not asked, and why."""

    record: TraceRecord
    reason: str


@dataclass(frozen=True, slots=True, repr=False)
class Predictions:
    """An evaluator run over a set of records."""

    evaluator: str
    model_version: str
    """The model version most answers came with (``unavailable`` when none came back)."""
    items: tuple[Prediction, ...]
    skipped: tuple[Skipped, ...] = ()
    calls: int = 0
    """Evaluator calls made: records that share a state are asked in one call."""
    model_versions: tuple[str, ...] = field(default=())
    """Every model version seen, most frequent first (more than one: the evaluator changed mid-run)."""

    def __repr__(self) -> str:
        # Short on purpose: asyncio.run may format the repr of a task's result (Python 3.11 does, building the
        # message of an exception it then ignores), and a full repr of 100,000 predictions takes seconds.
        return (
            f"Predictions({self.evaluator!r}, {self.model_version!r}, {len(self.items)} items, "
            f"{len(self.skipped)} skipped, {self.calls} calls)"
        )


def reads_text(evaluator: Evaluator) -> bool:
    """Whether ``evaluator`` answers from ``Projection.text`` alone, and so can answer text-only records: the
    System One and judge evaluators (also behind a ``CalibratedEvaluator``). Any other evaluator is assumed to
    read the structure."""
    from stopwise.evals.calibration import CalibratedEvaluator
    from stopwise.guardian.evaluators import JudgeEvaluator, SystemOneEvaluator

    while isinstance(evaluator, CalibratedEvaluator):
        evaluator = evaluator.inner
    return isinstance(evaluator, (SystemOneEvaluator, JudgeEvaluator))


@dataclass(slots=True)
class _Work:
    projection: Projection
    conditions: list[Condition]
    members: list[tuple[int, Condition]]


async def predict(
    evaluator: Evaluator,
    records: Iterable[TraceRecord],
    questions: QuestionSet = DEFAULT_CONDITIONS,
    *,
    text_only: bool | None = None,
    concurrency: int = 8,
    call_timeout: float | None = None,
    progress: Progress | None = None,
) -> Predictions:
    """Ask ``evaluator`` about every record, and read the probability that the record's condition holds.

    - Records whose states render the same text are asked in one call, with all their conditions: an evaluator
      is a function of the state and the questions, and a model-based one is paid per call.
    - Skipped, with a reason: a condition ``questions`` does not have, a label its question does not have, and a
      text-only record when the evaluator reads structure (``text_only``: whether it can answer from the text;
      by default ``reads_text(evaluator)``).
    - An evaluator that raises or runs past ``call_timeout`` seconds makes that call's answers uncertain, as the
      guardian does; malformed answers become uncertain through ``Answers.checked``. An uncertain answer gives
      ``p=None``: the metrics leave it out and count it.
    - At most ``concurrency`` calls are in flight at once.
    """
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if text_only is None:
        text_only = reads_text(evaluator)
    records = list(records)
    skipped: list[Skipped] = []
    work: dict[object, _Work] = {}
    for i, record in enumerate(records):
        condition = questions.by_name.get(record.condition)
        if condition is None:
            skipped.append(Skipped(record, f"condition {record.condition!r} is not in the question set"))
            continue
        problem = record.label_problem(condition)
        if problem is not None:
            skipped.append(Skipped(record, problem))
            continue
        if record.text_only and not text_only:
            skipped.append(Skipped(record, "text-only record: the evaluator reads the projection's structure"))
            continue
        # The rendered text is the state's identity; a structured state and a bare text are never one call.
        key: object = (record.text_only, record.text)
        if _ELIDED in record.text:
            # An elided middle can hide a difference between two states: never share such a call.
            key = (key, i)
        item = work.get(key)
        if item is None:
            try:
                projection = record.projection if not record.text_only else text_projection(record.text)
            except ValueError as exc:
                skipped.append(Skipped(record, f"malformed projection: {exc}"))
                continue
            assert projection is not None
            item = work[key] = _Work(projection, [], [])
        if condition not in item.conditions:
            item.conditions.append(condition)
        item.members.append((i, condition))

    items = list(work.values())
    answers_of: list[Answers | None] = [None] * len(items)
    name = getattr(evaluator, "name", type(evaluator).__name__)
    done = 0
    queue = iter(range(len(items)))

    async def worker() -> None:
        nonlocal done
        # One shared iterator: no await between taking an item and starting it, so no two workers take the same.
        for k in queue:
            item = items[k]
            ordered = tuple(c for c in questions.conditions if c in item.conditions)
            answers_of[k] = await _ask(
                evaluator, name, item.projection, QuestionSet(ordered, questions.version), call_timeout
            )
            done += 1
            if progress is not None:
                progress(done, len(items))

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)))))

    by_record: dict[int, Prediction] = {}
    versions: Counter[str] = Counter()
    for item, answers in zip(items, answers_of, strict=True):
        assert answers is not None
        versions[answers.model_version] += 1
        for i, condition in item.members:
            answer = answers.answers.get(condition.name) or uncertain("no answer")
            p = None if answer.uncertain else answer.p(condition.fires_on)
            record = records[i]
            by_record[i] = Prediction(record, condition, record.holds(condition), p, answer.note)
    ordered_versions = tuple(v for v, _ in versions.most_common())
    usable = [v for v in ordered_versions if v != "unavailable"]
    return Predictions(
        evaluator=name,
        model_version=usable[0] if usable else "unavailable",
        items=tuple(by_record[i] for i in sorted(by_record)),
        skipped=tuple(skipped),
        calls=len(items),
        model_versions=ordered_versions,
    )


async def _ask(
    evaluator: Evaluator, name: str, projection: Projection, questions: QuestionSet, limit: float | None
) -> Answers:
    conditions = questions.conditions
    try:
        if limit is None:
            answers = await evaluator.evaluate(projection, questions)
        else:
            async with asyncio.timeout(limit):
                answers = await evaluator.evaluate(projection, questions)
        if not isinstance(answers, Answers):
            raise TypeError(f"evaluate() returned {type(answers).__name__}, expected Answers")
        return answers.checked(conditions)
    except TimeoutError:
        note = f"{name} timed out after {limit:g}s"
    except Exception as exc:  # an evaluator's failure is an uncertain answer, as in the guardian
        note = f"{name} failed: {type(exc).__name__}: {exc}"
    return Answers(name, "unavailable", {c.name: uncertain(note) for c in conditions})


def by_condition(items: Sequence[Prediction]) -> dict[str, list[Prediction]]:
    """Predictions grouped by condition name, in first-seen order."""
    out: dict[str, list[Prediction]] = {}
    for item in items:
        out.setdefault(item.condition.name, []).append(item)
    return out


def answered(items: Sequence[Prediction]) -> tuple[list[float], list[bool]]:
    """The probabilities and labels of the answered predictions (uncertain ones left out)."""
    ps: list[float] = []
    ys: list[bool] = []
    for item in items:
        if item.p is not None:
            ps.append(item.p)
            ys.append(item.holds)
    return ps, ys
