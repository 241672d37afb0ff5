"""``Guardian``: the configuration of an agent's independent evaluator, and one consultation of it.

A consultation projects the run, asks the evaluator the conditions' typed questions under a time limit (a raise
or a timeout makes every answer uncertain), and lets the pure policy decide. The conditions the evaluator left
open (in the uncertain band, unanswered, deferred) go to the judge when one is configured; what the judge settles
is recorded as a labelled example. A clear answer is never the judge's to overturn.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from stopwise._checks import check_async_method, check_seconds
from stopwise.errors import ConfigError
from stopwise.goal import Goal
from stopwise.guardian.answers import Answers, Evaluator, uncertain
from stopwise.guardian.conditions import DEFAULT_CONDITIONS, Condition, GuardianOutcome, QuestionSet
from stopwise.guardian.policy import OnUnavailable, PolicyInputs, PolicyResult, ThresholdPolicy
from stopwise.guardian.projection import Projection, handed, project
from stopwise.guardian.records import ConditionSpec, GuardianDecision, GuardianLabel
from stopwise.messages import Message, Role, ToolCall, Usage
from stopwise.stop.guard import Continue, StopGuard, StopGuardContext

__all__ = ["Consultation", "Guardian"]


def _default_evaluator() -> Evaluator:
    # Imported here: the rule evaluator loads its coefficients, which an agent without a guardian never needs.
    from stopwise.guardian.evaluators.rule import RuleEvaluator

    evaluator: Evaluator = RuleEvaluator()
    return evaluator


@dataclass(frozen=True, slots=True)
class Guardian:
    """An agent's guardian. ``Agent(guardian=Guardian())`` asks the six default conditions every turn with the
    offline ``RuleEvaluator``; give another evaluator, conditions, costs or a judge to change that."""

    evaluator: Evaluator | None = None
    """Answers the questions; the offline ``RuleEvaluator`` when None."""
    conditions: QuestionSet = DEFAULT_CONDITIONS
    policy: ThresholdPolicy = field(default_factory=ThresholdPolicy)
    goal: str | None = None
    """The default goal of a run that states none (``Runner.run(..., goal=)`` overrides it); without either, the
    run's first user input. Resolved when a run starts and committed in its log: changing it later changes no
    run already started."""
    criteria: Sequence[str] = ()
    """The default acceptance criteria, with ``goal``: a run's own ``Goal`` replaces both."""
    judge: Evaluator | None = None
    """Settles what the evaluator left open (the uncertain band, unanswered or deferred questions), a System 2
    judge; it never overturns a clear answer. Without one an escalation suspends the run for a human."""
    on_unavailable: OnUnavailable | None = None
    """Overrides ``policy.on_unavailable``: what an unanswered question does (default: escalate, fail closed)."""
    timeout: float = 2.0
    """Seconds an evaluator call may take before its answers count as uncertain."""
    judge_timeout: float = 30.0
    """Seconds the judge may take: a System 2 model answering every question is slower than the evaluator."""
    history_steps: int = 6
    """Steps of the run the projection shows."""
    result_chars: int = 8000
    """Characters of each tool result the projection keeps: the rule evaluator's integrity check reads them all,
    in windows, so an instruction late in a long page shows (a model-based evaluator sees the rendered text,
    capped at ``max_chars``)."""
    max_chars: int = 8000
    step_chars: int | None = 32_000
    """Characters of tool results the projection keeps from one step, all its calls together (four whole
    results at the default ``result_chars``): a step of 500 calls costs the guardian what four long results
    cost. Past it each result keeps a fair share of its head (a short one whole, the longer ones an even split of
    the rest), so every result is still read. None: no limit (each result is still cut at ``result_chars``)."""

    def __post_init__(self) -> None:
        if self.evaluator is None:
            object.__setattr__(self, "evaluator", _default_evaluator())
        if not isinstance(self.conditions, QuestionSet):
            raise ConfigError("guardian.conditions", "must be a QuestionSet")
        for name in ("evaluator", "judge"):
            if getattr(self, name) is not None:
                check_async_method(f"guardian.{name}", getattr(self, name), "evaluate")
        if not isinstance(self.policy, ThresholdPolicy):
            raise ConfigError("guardian.policy", f"must be a ThresholdPolicy(...), got {type(self.policy).__name__}")
        if self.on_unavailable is not None:
            object.__setattr__(self, "policy", dataclasses.replace(self.policy, on_unavailable=self.on_unavailable))
        for name in ("timeout", "judge_timeout"):
            check_seconds(f"guardian.{name}", getattr(self, name), optional=False)
        for name in ("history_steps", "result_chars", "max_chars"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"guardian.{name}", f"must be an int >= 1, got {value!r}")
        step_chars = self.step_chars
        if step_chars is not None and (
            isinstance(step_chars, bool) or not isinstance(step_chars, int) or step_chars < 1
        ):
            raise ConfigError("guardian.step_chars", f"must be an int >= 1 or None, got {step_chars!r}")
        if self.goal is not None and not isinstance(self.goal, str):
            raise ConfigError("guardian.goal", f"must be a string or None, got {type(self.goal).__name__}")
        # Checked as a run's Goal checks them: a lone string would otherwise be one criterion per character.
        try:
            criteria = Goal(None, self.criteria).criteria
        except ConfigError as exc:
            raise ConfigError("guardian.criteria", exc.problem) from None
        object.__setattr__(self, "criteria", criteria)

    @property
    def default_goal(self) -> Goal | None:
        """The goal a run without one of its own gets: ``goal`` and ``criteria`` when either is set."""
        if not self.goal and not self.criteria:
            return None
        return Goal(self.goal or None, self.criteria)

    def project(
        self,
        rows: Sequence[Message],
        *,
        goal: str,
        criteria: Sequence[str] = (),
        risks: Mapping[str, str] | None = None,
        steps_before: int = 0,
        pending: ToolCall | None = None,
        final: str | None = None,
    ) -> Projection:
        """``projection.project`` of ``rows`` under this guardian's settings (``history_steps``, ``result_chars``,
        ``max_chars``, ``step_chars``): the one place they reach a projection, for the loop, the peer
        integrations and ``as_stop_guard`` alike."""
        return project(
            rows,
            goal=goal,
            criteria=criteria,
            last_k=self.history_steps,
            result_chars=self.result_chars,
            risks=risks,
            pending=pending,
            final=final,
            max_chars=self.max_chars,
            steps_before=steps_before,
            step_chars=self.step_chars,
        )

    def as_stop_guard(self, max_continues: int = 2) -> StopGuard:
        """A stop guard that asks ``goal_reached`` at a natural finish: when it is clearly not reached (below the
        uncertain band), the model is sent back with the goal and criteria as feedback; otherwise the finish
        stands (an unanswered question accepts: this guard nudges, it does not block). An evaluator that defers
        (the rule evaluator without acceptance criteria) hands the question to the judge when there is one, and
        otherwise lets the finish stand."""
        condition = self.conditions.by_name.get("goal_reached")
        if condition is None:
            raise ConfigError("guardian.conditions", "as_stop_guard() needs a goal_reached condition")
        guardian = self

        async def goal_reached(ctx: StopGuardContext) -> Continue | None:
            rows = list(ctx.run_messages)
            first = next((m.content for m in rows if m.role is Role.USER), "")
            # The run's logged goal; a run from before goals were logged has none, and falls back to this one's.
            stated = ctx.goal if ctx.goal is not None else guardian.default_goal
            goal = (stated.text if stated is not None else None) or first
            criteria = stated.criteria if stated is not None else ()
            projection = guardian.project(rows[:-1], goal=goal, criteria=criteria, final=ctx.reply.text)
            conditions = (condition,)
            questions = QuestionSet(conditions, guardian.conditions.version)
            assert guardian.evaluator is not None
            answers = await _ask(guardian.evaluator, projection, questions, conditions, guardian.timeout)
            ctx.report_usage(answers.usage)
            answer = answers.answers[condition.name]
            if answer.defer and not answer.uncertain and guardian.judge is not None:
                answers = await _ask(guardian.judge, projection, questions, conditions, guardian.judge_timeout)
                ctx.report_usage(answers.usage)
                answer = answers.answers[condition.name]
            # An evaluator that could not tell (a deferred base rate, no judge to ask) is no reason to send it back.
            if (
                answer.uncertain
                or answer.defer
                or answer.p(condition.fires_on) >= condition.threshold - condition.delta
            ):
                return None
            wanted = "; ".join(criteria) if criteria else goal
            return Continue(f"The goal is not reached yet. Still needed: {wanted}. Keep working, then answer.")

        return StopGuard(goal_reached, max_continues=max_continues, timeout=self.timeout * 2, name="guardian_goal")

    @property
    def turn_conditions(self) -> tuple[Condition, ...]:
        return self.conditions.turn()

    @property
    def call_conditions(self) -> tuple[Condition, ...]:
        return self.conditions.pre_execution()


@dataclass(frozen=True, slots=True)
class Consultation:
    """A decision and, when a judge settled an escalation, the labelled examples it produced."""

    decision: GuardianDecision
    labels: tuple[GuardianLabel, ...] = ()


async def _ask(
    evaluator: Evaluator,
    projection: Projection,
    questions: QuestionSet,
    conditions: tuple[Condition, ...],
    limit: float,
) -> Answers:
    """The evaluator's checked answers, never a raise: a timeout, an exception (a stray ``CancelledError``
    included), or a return value that is not a well-formed ``Answers`` makes every answer uncertain. The wait is
    bounded by ``limit`` even for an evaluator that swallows its cancellation: it is cancelled and left behind."""
    name = getattr(evaluator, "name", None)
    name = name if isinstance(name, str) and name else type(evaluator).__name__
    task = asyncio.ensure_future(_evaluate(evaluator, projection, questions))
    try:
        done, _ = await asyncio.wait((task,), timeout=limit)
    except asyncio.CancelledError:
        task.cancel()
        raise
    if not done:
        task.cancel()
        # Collect whatever it ends with, so that an evaluator finishing late is never an unretrieved exception.
        task.add_done_callback(_collect)
        note = f"{name} timed out after {limit:g}s"
    elif task.cancelled():
        note = f"{name} failed: it cancelled itself"
    elif (exc := task.exception()) is not None:
        note = f"{name} failed: {type(exc).__name__}: {exc}"
    else:
        answers = task.result()
        problem = _malformed(answers)
        if problem is None:
            assert isinstance(answers, Answers)
            try:
                return answers.checked(conditions)
            except Exception as exc:  # a Mapping or Answer of the evaluator's own that raises when read
                problem = f"answers that cannot be read: {type(exc).__name__}: {exc}"
        note = f"{name} returned {problem}"
    return Answers(name, "unavailable", {c.name: uncertain(note) for c in conditions})


async def _evaluate(evaluator: Evaluator, projection: Projection, questions: QuestionSet) -> object:
    # A coroutine of ours, so that a stray BaseException of the evaluator's (CancelledError) stays in the task.
    # An evaluator of the user's is handed a copy: what it changes in place reaches neither the run nor the
    # decision's record. Stopwise's own only read it, and are spared the copy (about 30 us a question set).
    ours = type(evaluator).__module__.startswith(_OUR_EVALUATORS)
    return await evaluator.evaluate(projection if ours else handed(projection), questions)


_OUR_EVALUATORS = "stopwise.guardian.evaluators."
"""The package of stopwise's evaluators; a subclass of one defined elsewhere is the user's code."""


def _collect(task: asyncio.Future[object]) -> None:
    if not task.cancelled():
        task.exception()


def _malformed(answers: object) -> str | None:
    """What is wrong with an evaluator's return value that would break the decision record, or None."""
    if not isinstance(answers, Answers):
        return f"{type(answers).__name__}, not Answers"
    if not isinstance(answers.evaluator, str) or not isinstance(answers.model_version, str):
        return "an evaluator name or model version that is not text"
    if not isinstance(answers.answers, Mapping):
        return f"answers as {type(answers.answers).__name__}, not a mapping"
    if not isinstance(answers.usage, Usage):
        return f"usage as {type(answers.usage).__name__}, not Usage"
    return None


async def consult(
    guardian: Guardian,
    projection: Projection,
    conditions: tuple[Condition, ...],
    inputs: PolicyInputs,
    *,
    run_id: str,
    step: int,
    kind: str,
    call_id: str | None = None,
    started: float | None = None,
) -> Consultation:
    """One consultation: ask, decide, and let the judge settle what the evaluator could not.

    The judge is asked only about the conditions the evaluator left open: an answer in the uncertain band, an
    unanswered question, or an answer the evaluator deferred. What the evaluator answered clearly stands, so a
    clear fire (a risk gate, an injection detection, two contradicting stops) is never the judge's to clear: it
    escalates to a human. A declared risk class is a floor no evaluator (nor the judge) can lower. Each condition
    the judge settles (its answer outside the band) is recorded as a labelled example.

    The decision's ``latency_ms`` is the whole consultation: from ``started`` (a ``time.perf_counter()`` reading
    the caller took before building the projection and the policy inputs; now when None) until the record is
    ready, the projection's rendering and hash included."""
    assert guardian.evaluator is not None
    if kind == "pre_execution" and projection.pending is not None and projection.pending_risk != "unknown":
        inputs = dataclasses.replace(inputs, declared_risk=projection.pending_risk)
    if started is None:
        started = time.perf_counter()
    questions = QuestionSet(conditions, guardian.conditions.version)
    answers = await _ask(guardian.evaluator, projection, questions, conditions, guardian.timeout)
    usage = answers.usage
    result = guardian.policy.decide(answers.answers, conditions, inputs)
    judged, judge_usage = await _judge_open(guardian, projection, conditions, inputs, answers, result, run_id, step)
    usage = usage + judge_usage
    resolved_by = None
    labels: tuple[GuardianLabel, ...] = ()
    if judged is not None:
        answers, result, labels = judged
        resolved_by = "judge"
    state_hash, specs = projection.state_hash, tuple(ConditionSpec.of(c) for c in conditions)
    # To the microsecond: finer is noise, and each digit is a byte of every decision in the log.
    latency = round((time.perf_counter() - started) * 1000, 3)
    decision = GuardianDecision(
        run_id=run_id,
        step=step,
        kind="pre_execution" if kind == "pre_execution" else "turn",
        call_id=call_id,
        state_hash=state_hash,
        question_set_version=guardian.conditions.version,
        evaluator=answers.evaluator,
        model_version=answers.model_version,
        answers=dict(answers.answers),
        conditions=specs,
        policy=guardian.policy.to_data(),
        inputs=inputs,
        outcome=result.outcome,
        reason=result.reason,
        latency_ms=latency,
        held={v.name: v.held for v in result.verdicts},
        resolved_by=resolved_by,
        escalated=result.escalated,
        state=projection.text if result.outcome is GuardianOutcome.ESCALATE else None,
        usage=usage,
    )
    return Consultation(decision, labels)


async def _judge_open(
    guardian: Guardian,
    projection: Projection,
    conditions: tuple[Condition, ...],
    inputs: PolicyInputs,
    answers: Answers,
    result: PolicyResult,
    run_id: str,
    step: int,
) -> tuple[tuple[Answers, PolicyResult, tuple[GuardianLabel, ...]] | None, Usage]:
    """Ask the judge about the conditions the evaluator left open (in the band, unanswered, deferred); the merged
    answers, the new result and the labelled examples when it settled any, else None; and what the judge's
    calls spent (counted whether or not it settled anything)."""
    deferred = {name for name, a in answers.answers.items() if a.defer and not a.uncertain}
    before = {v.name: v for v in result.verdicts}
    # A condition the policy settled itself (a declared floor; a stop taken because the budget is nearly spent) is
    # not open.
    open_ = tuple(
        c
        for c in conditions
        if not (before[c.name].declared or before[c.name].budget)
        and (before[c.name].in_band or before[c.name].uncertain or c.name in deferred)
    )
    if guardian.judge is None or not open_:
        return None, Usage()
    asked = QuestionSet(open_, guardian.conditions.version)
    judged_answers = await _ask(guardian.judge, projection, asked, open_, guardian.judge_timeout)
    spent = judged_answers.usage
    judged = guardian.policy.decide(judged_answers.answers, open_, inputs)
    # A deferred answer is the judge's, whatever it says; an open one only when the judge is clear about it.
    settled = [v for v in judged.verdicts if not v.uncertain and (not v.in_band or v.name in deferred)]
    if not settled:
        return None, spent
    merged = {**answers.answers, **{v.name: judged_answers.answers[v.name] for v in settled}}
    result = guardian.policy.decide(merged, conditions, inputs)
    after = {v.name: v for v in result.verdicts}
    labels = tuple(
        label(
            v.name, after[v.name].held, projection.text, projection.state_hash, "judge", run_id, step, before[v.name].p
        )
        for v in settled
        if not v.in_band
    )
    return (Answers(answers.evaluator, answers.model_version, merged), result, labels), spent


def label(
    condition: str,
    held: bool,
    state: str,
    state_hash: str,
    source: str,
    run_id: str,
    step: int,
    evaluator_p: float | None = None,
    reviewer: str | None = None,
) -> GuardianLabel:
    """A labelled example for the eval harness: the projection's text, the condition, what the resolver (``judge``
    or ``human``, and which reviewer) said, and what the evaluator had answered."""
    return GuardianLabel(condition, held, state, state_hash, source, run_id, step, evaluator_p, reviewer)
