"""Stop guards: caller code consulted when a run would end on a natural finish.

A guard returns a verdict: ``None`` or ``Stop()`` lets the run end, ``Continue(feedback)`` sends the model back
for another step with feedback rows, ``Fail(message)`` fails the run. What the verdict *means* for the run is
decided by the resolver (``stop/decision.py``); running the guard (its time limit, its draft of the state) is
the loop's job. This module holds the values both share, and counts the budget from the log's records.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, ClassVar, Literal

from stopwise._checks import check_function, check_seconds
from stopwise._deprecated import aliases
from stopwise.errors import ConfigError, StopGuardExpired
from stopwise.goal import Goal
from stopwise.messages import AUTOMATED, AUTOMATED_LABEL, Message, Reply, Role, StopReason, Usage, automated_feedback
from stopwise.tool_switches import ToolSwitch

__all__ = [
    "Continue",
    "Fail",
    "InvalidVerdict",
    "Stop",
    "StopGuard",
    "StopGuardContext",
    "StopGuardRecord",
    "StopGuardReport",
    "StopGuardVerdict",
    "guard_budget",
    "guard_report",
]

GUARD_SOURCE = "stop_guard"
"""The ``source`` of rows a stop guard adds, and the ``type`` of its log records."""


@dataclass(frozen=True, slots=True)
class Stop:
    """Let the run end as it would have without a guard."""


@dataclass(frozen=True, slots=True)
class Continue:
    """Take one more step. Needs ``feedback`` or at least one context item (here or via ``add_context``): a row,
    or a ``ToolSwitch``."""

    feedback: str | None = None
    context: Sequence[str | Message | ToolSwitch] = ()

    def __post_init__(self) -> None:
        if self.feedback is not None and not isinstance(self.feedback, str):
            raise ConfigError("Continue.feedback", f"must be a string or None, got {type(self.feedback).__name__}")
        if isinstance(self.context, str | Message | ToolSwitch) or not isinstance(self.context, Iterable):
            # A lone string would otherwise be read as one context row per character.
            raise ConfigError("Continue.context", f"must be a list of items, got {type(self.context).__name__}")
        object.__setattr__(self, "context", tuple(self.context))


@dataclass(frozen=True, slots=True)
class Fail:
    """Fail the run with code ``stop_guard_rejected`` (not retryable), carrying ``message``."""

    message: str

    def __post_init__(self) -> None:
        if not isinstance(self.message, str):
            raise ConfigError("Fail.message", f"must be a string, got {type(self.message).__name__}")


StopGuardVerdict = Stop | Continue | Fail | None
GuardCheck = Callable[["StopGuardContext"], StopGuardVerdict | Awaitable[StopGuardVerdict]]


class InvalidVerdict(Exception):
    """A guard returned something the loop cannot act on; handled like a guard that raised."""


@dataclass(frozen=True, slots=True)
class StopGuardReport:
    """What the stop guard did in this run; also on the run record, so any reader sees the same."""

    continues_used: int = 0
    exhausted: bool = False
    """A Continue arrived with the budget spent, so the run ended anyway (``stop_guard_exhausted``)."""
    error: str | None = None
    """The guard's last failure (raised, timed out, invalid verdict), if any."""


@dataclass(frozen=True, slots=True)
class StopGuard:
    """Configuration of a stop guard: ``check(ctx)`` (sync or async) and its limits.

    ``max_continues`` bounds the continues per run (counted from the log, so crashes and retries keep the
    count); ``timeout`` cancels the call; ``on_error`` says whether a failing guard stops the run as a plain stop
    (``"stop"``, reason ``stop_guard_error``) or fails it (``"fail"``, code ``stop_guard_failed``).
    """

    check: GuardCheck
    max_continues: int = 3
    timeout: float | None = 30.0
    on_error: Literal["stop", "fail"] = "stop"
    name: str = ""
    """Shown in records and reports; defaults to the check's ``__name__``."""
    progress_note: str | None = None
    """What the user-facing stream shows when the guard continues (never the feedback itself)."""
    is_async: bool = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not callable(self.check):
            raise ConfigError("stop_guard.check", f"must be callable, got {type(self.check).__name__}")
        check_function("stop_guard.check", self.check, "ctx")
        if isinstance(self.max_continues, bool) or not isinstance(self.max_continues, int) or self.max_continues < 0:
            raise ConfigError("stop_guard.max_continues", f"must be an int >= 0, got {self.max_continues!r}")
        check_seconds("stop_guard.timeout", self.timeout)
        if self.on_error not in ("stop", "fail"):
            raise ConfigError("stop_guard.on_error", f"must be 'stop' or 'fail', got {self.on_error!r}")
        if not isinstance(self.name, str):
            raise ConfigError("stop_guard.name", f"must be a string, got {self.name!r}")
        if self.progress_note is not None and not isinstance(self.progress_note, str):
            raise ConfigError("stop_guard.progress_note", f"must be a string or None, got {self.progress_note!r}")
        if not self.name:
            label = getattr(self.check, "__name__", "") or type(self.check).__name__
            object.__setattr__(self, "name", "stop_guard" if label == "<lambda>" else label)
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.check))


def _guard_row(item: object) -> Message:
    if isinstance(item, str):
        if not item.strip():
            raise InvalidVerdict("a context item is an empty string")
        return automated_feedback(item, source=GUARD_SOURCE)
    if isinstance(item, Message):
        if item.role is not Role.USER:
            raise InvalidVerdict(f"a context message must have role 'user', got {item.role.value!r}")
        meta = {**item.metadata, AUTOMATED: True, "hidden": True, "external_input": True, "source": GUARD_SOURCE}
        # The model must never read a guard's words as the user's: a message gets the same label as feedback.
        content = item.content if item.content.startswith(AUTOMATED_LABEL) else AUTOMATED_LABEL + item.content
        return Message(Role.USER, content, metadata=meta)
    raise InvalidVerdict(f"a context item must be a str, a user Message or a ToolSwitch, got {type(item).__name__}")


def _add(items: Iterable[object], rows: list[Message], switches: list[ToolSwitch]) -> None:
    for item in items:
        if isinstance(item, ToolSwitch):
            switches.append(item)
        else:
            rows.append(_guard_row(item))


@dataclass(frozen=True, slots=True)
class GuardReply:
    text: str
    stop_reason: StopReason


class StopGuardContext:
    """What a guard sees and may change. Writes and rows commit with the reply's step, or not at all."""

    def __init__(
        self,
        *,
        session_id: str,
        run_id: str,
        step: int,
        attempt: int,
        reply: Reply,
        messages: Sequence[Message],
        run_start: int,
        state: Mapping[str, Any],
        continues_used: int,
        max_continues: int,
        goal: Goal | None = None,
    ) -> None:
        self.session_id = session_id
        self.run_id = run_id
        self.step = step
        self.guard_key = f"{run_id}:{step}:{attempt}"
        """Stable for one consultation: key your own side effects by it, the guard may run again after a crash."""
        self.reply = GuardReply(reply.text, reply.stop_reason)
        self.messages = messages
        """The session's log, this reply included."""
        self.run_messages = messages[run_start:]
        """The rows of this run only (its input onwards), this reply included."""
        self._draft: dict[str, Any] = copy.deepcopy(dict(state))
        self.state: Mapping[str, Any] = MappingProxyType(self._draft)
        """Read-only view of the state, with this guard's own updates applied."""
        self.continues_used = continues_used
        self.goal = goal
        """The run's goal and criteria as its log has them; None when the run stated none (its input is the goal)."""
        self.continues_left = max(0, max_continues - continues_used)
        self._rows: list[Message] = []
        self._switches: list[ToolSwitch] = []
        self._closed = False
        self._usage = Usage()

    @property
    def usage(self) -> Usage:
        """The model usage this guard reported (``report_usage``) so far."""
        return self._usage

    def report_usage(self, usage: Usage) -> None:
        """Say what a model call the guard made spent (a guard that asks an LLM): it is recorded with the
        consultation, counts toward the run's token budgets (``Limits.count_judges``) and is reported in
        ``RunResult.judge_usage``. Raises ``StopGuardExpired`` once the consultation has ended."""
        self._check_open()
        if not isinstance(usage, Usage):
            raise TypeError(f"report_usage() takes a Usage, got {type(usage).__name__}")
        self._usage = self._usage + usage

    def update_state(self, fn: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``fn`` to a draft of the state; the draft commits with the step unless the guard fails. Raises
        ``StopGuardExpired`` once the consultation has ended (a sync guard still running after its timeout)."""
        self._check_open()
        fn(self._draft)

    def add_context(self, items: Iterable[str | Message | ToolSwitch] | str | Message | ToolSwitch) -> None:
        """Rows for the model's next call: strings become labelled feedback rows; user-role messages get the same
        label. A ``ToolSwitch`` switches tools on or off for the rest of the run (seed 000: a guard may switch a
        tool back on); it commits like the rows. Raises ``StopGuardExpired`` once the consultation has ended."""
        self._check_open()
        if isinstance(items, (str, Message, ToolSwitch)):
            items = [items]
        _add(items, self._rows, self._switches)

    def close(self) -> None:
        """End the consultation: later writes raise ``StopGuardExpired`` and never reach the run. A sync guard
        cannot be cancelled in its thread, so this is what keeps a timed-out one from changing the run."""
        self._closed = True

    def _check_open(self) -> None:
        if self._closed:
            raise StopGuardExpired(f"stop guard consultation {self.guard_key} has ended; this write is discarded")


@dataclass(frozen=True, slots=True)
class StopGuardOutcome:
    """A consultation, settled: the verdict kind for the resolver, and what commits if the step does."""

    kind: Literal["stop", "continue", "fail", "error"]
    message: str = ""
    rows: tuple[Message, ...] = ()
    """The rows the guard added: they commit with the step whatever it decided, except a continue refused for
    budget (nobody would act on them) and a failed guard (nothing of it commits)."""
    state: dict[str, Any] | None = None
    """The guard's draft of the state; None when it failed (nothing of it commits)."""
    usage: Usage = field(default_factory=Usage)
    """What the guard's own model calls spent, as it reported them (``StopGuardContext.report_usage``)."""
    switches: tuple[ToolSwitch, ...] = ()
    """The tool switches the guard added: they commit with its rows, or not at all."""


def settle(verdict: object, ctx: StopGuardContext) -> StopGuardOutcome:
    """Check a verdict and turn it into an outcome; raises ``InvalidVerdict`` naming what is wrong."""
    switches = tuple(ctx._switches)
    if verdict is None or isinstance(verdict, Stop):
        return StopGuardOutcome("stop", rows=tuple(ctx._rows), state=ctx._draft, switches=switches, usage=ctx.usage)
    if isinstance(verdict, Fail):
        if not isinstance(verdict.message, str) or not verdict.message.strip():
            raise InvalidVerdict("Fail needs a non-empty message")
        return StopGuardOutcome(
            "fail", verdict.message, rows=tuple(ctx._rows), state=ctx._draft, switches=switches, usage=ctx.usage
        )
    if isinstance(verdict, Continue):
        rows, added = list(ctx._rows), list(switches)
        if verdict.feedback is not None:
            if not isinstance(verdict.feedback, str):
                raise InvalidVerdict(f"Continue.feedback must be a str, got {type(verdict.feedback).__name__}")
            if verdict.feedback.strip():
                rows.insert(0, automated_feedback(verdict.feedback, source=GUARD_SOURCE))
        _add(verdict.context, rows, added)
        if not rows and not added:
            raise InvalidVerdict("Continue needs feedback or at least one context item")
        return StopGuardOutcome("continue", rows=tuple(rows), state=ctx._draft, switches=tuple(added), usage=ctx.usage)
    raise InvalidVerdict(
        f"expected None, Stop(), Continue(...) or Fail(...), got {type(verdict).__name__}: {verdict!r}"
    )


GuardEvent = Literal["accepted", "rejected", "error", "continued", "exhausted"]


@dataclass(frozen=True, slots=True)
class StopGuardRecord:
    """One consultation of the stop guard, as the log keeps it: the budget and the report are counted from these."""

    TYPE: ClassVar[str] = GUARD_SOURCE
    event: GuardEvent
    """``continued`` spends one continue; ``exhausted`` is a continue refused for budget."""
    guard: str
    step: int
    message: str | None = None
    """Fail's message, or what went wrong for ``error``."""
    usage: Usage = field(default_factory=Usage)
    """What the guard's model calls spent, as it reported them."""

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "event": self.event, "guard": self.guard, "step": self.step}
        if self.message:
            data["message"] = self.message
        if self.usage != Usage():
            data["usage"] = self.usage.to_data()
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> StopGuardRecord:
        return cls(data["event"], data["guard"], data["step"], data.get("message"), Usage(**data.get("usage", {})))


def guard_budget(records: Iterable[object]) -> tuple[int, int]:
    """From a run's records: the continues its stop guard has used, and the number of the next consultation (one
    more than the guard's records so far). Every runtime counts a guard's budget this way, from the log."""
    guard_records = [r for r in records if isinstance(r, StopGuardRecord)]
    return guard_report(guard_records).continues_used, len(guard_records) + 1


def guard_report(records: Iterable[object]) -> StopGuardReport:
    """The report of a run, derived from its stop-guard log records (never from memory alone); other records are
    skipped."""
    used, exhausted, error = 0, False, None
    for r in records:
        if not isinstance(r, StopGuardRecord):
            continue
        if r.event == "continued":
            used += 1
        elif r.event == "exhausted":
            exhausted = True
        elif r.event == "error":
            error = r.message
    return StopGuardReport(used, exhausted, error)


def report_dict(report: StopGuardReport) -> dict[str, Any]:
    return {"continues_used": report.continues_used, "exhausted": report.exhausted, "error": report.error}


__getattr__ = aliases(
    __name__,
    {"Verdict": ("StopGuardVerdict", StopGuardVerdict), "GuardOutcome": ("StopGuardOutcome", StopGuardOutcome)},
)
