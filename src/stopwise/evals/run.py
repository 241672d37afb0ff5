"""Running an evaluator over labelled traces: per record, the probability it gave that the condition holds.

Nothing here imports numpy: the metrics come after, from the predictions.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field

from stopwise.evals.traces import TraceRecord, text_projection
from stopwise.guardian.answers import Answers, Evaluator, uncertain
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, Condition, QuestionSet
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.projection import Projection

__all__ = [
    "Prediction",
    "Predictions",
    "Skipped",
    "answered",
    "by_condition",
    "predict",
    "predict_sync",
    "reads_text",
]

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


PARALLEL_MIN_CALLS = 20_000
"""From this many evaluator calls on, ``predict_sync`` answers a ``RuleEvaluator``'s calls in several processes."""
_MAX_WORKERS = 4


@dataclass(slots=True)
class _Work:
    record: TraceRecord
    conditions: list[Condition]
    members: list[tuple[int, Condition]]
    text_only: bool

    def ordered(self, questions: QuestionSet) -> tuple[Condition, ...]:
        """The conditions to ask, in the question set's order. Most states are asked one: its conditions are the
        question set's own objects (found by name), so that one is the answer without comparing dataclasses."""
        if len(self.conditions) == 1:
            return (self.conditions[0],)
        return tuple(c for c in questions.conditions if c in self.conditions)

    def projection(self) -> Projection:
        """Built when asked (in the process that answers it), not while grouping."""
        if self.text_only:
            return text_projection(self.record.text)
        projection = self.record.projection
        assert projection is not None
        return projection


_Read = tuple[float | None, str]
"""What a prediction keeps of an answer: the probability that the condition holds (None: uncertain), the note."""


def _read(answers: Answers, condition: Condition) -> _Read:
    answer = answers.answers.get(condition.name) or uncertain("no answer")
    return (None if answer.uncertain else answer.p(condition.fires_on)), answer.note


async def predict(
    evaluator: Evaluator,
    records: Iterable[TraceRecord],
    questions: QuestionSet = DEFAULT_CONDITIONS,
    *,
    text_only: bool | None = None,
    concurrency: int = 8,
    call_timeout: float | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
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
    - At most ``concurrency`` calls are in flight at once, all in this process and on this event loop.

    Process-wide state (the garbage collector, child processes) is left alone. ``predict_sync`` is the same
    run for a caller with no event loop, and can answer a large ``RuleEvaluator`` run in several processes.
    ``workers`` is deprecated (it moved to ``predict_sync``): it is checked, warned about and otherwise ignored,
    since the answers are the same in one process.
    """
    if workers is not None:
        warnings.warn(
            "predict(workers=...) is deprecated and ignored: predict never forks inside a running event loop; "
            "use predict_sync(..., workers=...) from synchronous code",
            DeprecationWarning,
            stacklevel=2,
        )
    _check(evaluator, concurrency, workers)
    records, skipped, items = _group(evaluator, records, questions, text_only)
    name = _name(evaluator)
    versions_of, reads_of = await _answer_concurrently(
        evaluator, name, items, questions, concurrency, call_timeout, progress
    )
    return _assemble(name, records, skipped, items, versions_of, reads_of)


def predict_sync(
    evaluator: Evaluator,
    records: Iterable[TraceRecord],
    questions: QuestionSet = DEFAULT_CONDITIONS,
    *,
    text_only: bool | None = None,
    concurrency: int = 8,
    call_timeout: float | None = None,
    progress: Progress | None = None,
    workers: int | None = None,
) -> Predictions:
    """``predict`` for synchronous code (a script, ``stopwise eval``): the same predictions, on an event loop of
    its own. Raises ``RuntimeError`` when called inside a running event loop (``await predict(...)`` there).

    ``workers``: processes answering the calls of a ``RuleEvaluator`` (the only evaluator known to be a pure,
    synchronous function of the state: the answers are the same, computed in ``fork``-ed copies of this process,
    forked before any event loop runs). By default 1, or up to 4 (the CPU count) from ``PARALLEL_MIN_CALLS``
    calls on where ``fork`` is available. More than 1 for another evaluator raises ``ValueError``. Forking copies
    the whole process: call it from a program's main thread, not while other threads hold locks.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError("predict_sync() was called inside a running event loop; use 'await predict(...)'")
    _check(evaluator, concurrency, workers)
    records, skipped, items = _group(evaluator, records, questions, text_only)
    name = _name(evaluator)
    if workers is None:
        workers = _default_workers(evaluator, len(items))
    if workers > 1 and len(items) > 1:
        versions_of, reads_of = _answer_in_processes(evaluator, name, items, questions, workers, progress)
    else:
        versions_of, reads_of = asyncio.run(
            _answer_concurrently(evaluator, name, items, questions, concurrency, call_timeout, progress)
        )
    return _assemble(name, records, skipped, items, versions_of, reads_of)


def _check(evaluator: Evaluator, concurrency: int, workers: int | None) -> None:
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    if workers is not None and (workers < 1 or (workers > 1 and type(evaluator) is not RuleEvaluator)):
        raise ValueError(f"workers must be 1, or more for a RuleEvaluator only, got {workers}")


def _name(evaluator: Evaluator) -> str:
    return str(getattr(evaluator, "name", type(evaluator).__name__))


def _group(
    evaluator: Evaluator, records: Iterable[TraceRecord], questions: QuestionSet, text_only: bool | None
) -> tuple[list[TraceRecord], list[Skipped], list[_Work]]:
    """The records, those skipped with why, and the evaluator calls to make: one per distinct state."""
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
            # Checked here, built when answered: projection_from_data raises ValueError exactly for these.
            malformed = None if record.text_only else record.projection_problem()
            if malformed is not None:
                skipped.append(Skipped(record, f"malformed projection: {malformed}"))
                continue
            item = work[key] = _Work(record, [], [], record.text_only)
        if condition not in item.conditions:
            item.conditions.append(condition)
        item.members.append((i, condition))
    return records, skipped, list(work.values())


def _assemble(
    name: str,
    records: list[TraceRecord],
    skipped: list[Skipped],
    items: list[_Work],
    versions_of: list[str],
    reads_of: list[list[_Read]],
) -> Predictions:
    by_record: dict[int, Prediction] = {}
    versions: Counter[str] = Counter(versions_of)
    for item, reads in zip(items, reads_of, strict=True):
        for (i, condition), (p, note) in zip(item.members, reads, strict=True):
            record = records[i]
            by_record[i] = Prediction(record, condition, record.holds(condition), p, note)
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


async def _answer_concurrently(
    evaluator: Evaluator,
    name: str,
    items: list[_Work],
    questions: QuestionSet,
    concurrency: int,
    call_timeout: float | None,
    progress: Progress | None,
) -> tuple[list[str], list[list[_Read]]]:
    """Every item's answers in this process, at most ``concurrency`` calls in flight: per item, the model
    version and what each member reads of the answers."""
    answers_of: list[Answers | None] = [None] * len(items)
    done = 0
    queue = iter(range(len(items)))

    async def worker() -> None:
        nonlocal done
        # One shared iterator: no await between taking an item and starting it, so no two workers take the same.
        for k in queue:
            item = items[k]
            ordered = item.ordered(questions)
            answers_of[k] = await _ask(
                evaluator, name, item.projection(), QuestionSet(ordered, questions.version), call_timeout
            )
            done += 1
            if progress is not None:
                progress(done, len(items))

    await asyncio.gather(*(worker() for _ in range(min(concurrency, len(items)))))
    versions: list[str] = []
    reads: list[list[_Read]] = []
    for item, answers in zip(items, answers_of, strict=True):
        assert answers is not None
        versions.append(answers.model_version)
        reads.append([_read(answers, condition) for _, condition in item.members])
    return versions, reads


def _default_workers(evaluator: Evaluator, calls: int) -> int:
    if type(evaluator) is not RuleEvaluator or calls < PARALLEL_MIN_CALLS:
        return 1
    if "fork" not in multiprocessing.get_all_start_methods():
        return 1
    return max(1, min(os.cpu_count() or 1, _MAX_WORKERS))


# What the forked workers answer from: set just before they are forked, so they inherit it instead of being sent
# the states (pickling 100,000 projections would cost more than answering them).
_SHARED: tuple[Evaluator, str, list[_Work], QuestionSet] | None = None


def _answer_share(part: int, parts: int, progress: Progress | None = None) -> list[tuple[str, list[_Read]]]:
    """The items ``part``, ``part + parts``, ``part + 2 * parts``...: interleaved, so each process gets a like mix
    of states, and the order of the results never depends on which process finishes first."""
    assert _SHARED is not None
    evaluator, name, items, questions = _SHARED
    out: list[tuple[str, list[_Read]]] = []
    for k in range(part, len(items), parts):
        item = items[k]
        ordered = item.ordered(questions)
        answers = _ask_now(evaluator, name, item.projection(), ordered)
        out.append((answers.model_version, [_read(answers, condition) for _, condition in item.members]))
        if progress is not None:
            progress(min(len(out) * parts, len(items)), len(items))
    return out


def _ask_now(evaluator: Evaluator, name: str, projection: Projection, conditions: tuple[Condition, ...]) -> Answers:
    """``_ask`` for a ``RuleEvaluator``, whose ``evaluate`` is ``answer_all`` and never waits: the same answers."""
    assert isinstance(evaluator, RuleEvaluator)
    try:
        return evaluator.answer_all(projection, conditions).checked(conditions)
    except Exception as exc:  # as _ask: an evaluator's failure is an uncertain answer
        note = f"{name} failed: {type(exc).__name__}: {exc}"
    return Answers(name, "unavailable", {c.name: uncertain(note) for c in conditions})


def _answer_in_processes(
    evaluator: Evaluator,
    name: str,
    items: list[_Work],
    questions: QuestionSet,
    workers: int,
    progress: Progress | None,
) -> tuple[list[str], list[list[_Read]]]:
    """Every item's answers, one share answered here and the others in ``workers - 1`` forked processes; a share
    whose process fails (it could not start, or died) is answered here instead."""
    global _SHARED
    shares: list[list[tuple[str, list[_Read]]] | None] = [None] * workers
    _SHARED = (evaluator, name, items, questions)
    pool: ProcessPoolExecutor | None = None
    try:
        futures = []
        try:
            pool = ProcessPoolExecutor(workers - 1, mp_context=multiprocessing.get_context("fork"))
            futures = [pool.submit(_answer_share, part, workers) for part in range(1, workers)]
        except (OSError, RuntimeError, ValueError):
            futures = []  # no process to be had: every share is answered here
        shares[0] = _answer_share(0, workers, progress)
        for part, future in enumerate(futures, 1):
            try:
                shares[part] = future.result()
            except Exception:  # a broken pool (a worker killed): that share is answered here, the same way
                shares[part] = None
        for part in range(1, workers):
            if shares[part] is None:
                shares[part] = _answer_share(part, workers)
    finally:
        _SHARED = None
        if pool is not None:
            pool.shutdown(cancel_futures=True)
    versions: list[str] = [""] * len(items)
    reads: list[list[_Read]] = [[] for _ in items]
    for part, share in enumerate(shares):
        assert share is not None
        for j, (version, read) in enumerate(share):
            versions[part + j * workers] = version
            reads[part + j * workers] = read
    if progress is not None:
        progress(len(items), len(items))
    return versions, reads


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
