"""Errors: exceptions for caller mistakes and bugs, ``ErrorDetail`` values for run outcomes.

A run that fails (a cut-off, a model error, a raising predicate) is not an exception: it ends with a
``RunResult`` whose ``error`` is an ``ErrorDetail``. Exceptions are reserved for misuse the caller must fix
(bad configuration, retrying a finished session) and for a store that refuses to work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

__all__ = [
    "ConfigError",
    "CyclicValue",
    "ErrorCategory",
    "ErrorCode",
    "ErrorDetail",
    "ForkNotAllowed",
    "ModelError",
    "ModelScriptExhausted",
    "NotAStopwiseLog",
    "RetryNotAllowed",
    "RunLeased",
    "SchemaTooNew",
    "StateNotSerializable",
    "StepConflict",
    "StopGuardExpired",
    "StopwiseError",
    "StoreError",
    "StoreReadOnly",
    "StoreRefused",
    "StoreUnavailable",
    "UnreadableEntry",
    "UnreadableRun",
    "UnreadableSuspension",
    "ErrorCopy",
    "UnreadableRecord",
]


class ErrorCategory(StrEnum):
    """Where a run failure came from, for alerting: a budget is not an outage."""

    FRAMEWORK = "framework"
    """A limit or rule of stopwise itself (the step cap, invalid output)."""
    MODEL = "model"
    """The model adapter raised, or the model ended its reply with an error stop reason."""
    CALLER = "caller"
    """Code the caller supplied (a stop_when predicate) raised."""
    TOOL = "tool"
    """The server behind a tool (an MCP server) could not be reached."""


class ErrorCode(StrEnum):
    """Stable codes for run failures; match on these, not on messages."""

    MAX_STEPS_EXHAUSTED = "max_steps_exhausted"
    OUTPUT_INVALID = "output_invalid"
    STOP_WHEN_RAISED = "stop_when_raised"
    MODEL_ERROR = "model_error"
    MAX_TOKENS = "max_tokens"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    NOT_SUPPORTED = "not_supported"
    STATE_INVALID = "state_invalid"
    STOP_GUARD_REJECTED = "stop_guard_rejected"
    STOP_GUARD_FAILED = "stop_guard_failed"
    TOOL_ERROR_STREAK = "tool_error_streak"
    GUARDRAIL_RAISED = "guardrail_raised"
    GUARDRAIL_INVALID = "guardrail_invalid"
    GUARDRAIL_TIMEOUT = "guardrail_timeout"
    APPROVAL_PREDICATE_RAISED = "approval_predicate_raised"
    APPROVAL_TERMINATED = "approval_terminated"
    INFEASIBLE = "infeasible"
    CANCELLED = "cancelled"
    TOOL_UNAVAILABLE = "tool_unavailable"
    TOOL_NAME_CLASH = "tool_name_clash"
    TOOL_SOURCE_FAILED = "tool_source_failed"
    TOOL_CALL_LIMIT = "tool_call_limit"
    TOKEN_LIMIT = "token_limit"
    COST_LIMIT = "cost_limit"
    TIME_LIMIT = "time_limit"
    OUTPUT_REJECTED = "output_rejected"
    OUTPUT_VALIDATOR_RAISED = "output_validator_raised"
    MAX_STEPS_HANDLER_RAISED = "max_steps_handler_raised"
    PREPARE_STEP_FAILED = "prepare_step_failed"
    HISTORY_PROCESSOR_FAILED = "history_processor_failed"
    APPROVAL_EXPIRED = "approval_expired"


@dataclass(frozen=True, slots=True)
class ErrorDetail:
    """Why a run failed: a stable ``code``, a human ``message``, a ``category`` and whether a retry may help."""

    code: str
    message: str
    category: str
    retryable: bool = False
    details: Mapping[str, Any] = field(default_factory=dict)
    """Structured facts about the failure as JSON data, e.g. a provider's ``status`` and ``request_id``."""


class StopwiseError(Exception):
    """Root of every exception stopwise raises."""


def _rebuilt(cls: type[StopwiseError], args: tuple[Any, ...], kwargs: dict[str, Any]) -> StopwiseError:
    """An error unpickled: built again with the arguments it was made with."""
    return cls(*args, **kwargs)


class ConfigError(StopwiseError, ValueError):
    """An agent, tool or runner was configured wrongly; the message names the field."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field
        self.problem = problem

    def __reduce__(self) -> tuple[type[ConfigError], tuple[str, str]]:
        # Pickled whole (DBOS records a workflow's error so, and ``result`` raises it): the default would call
        # ConfigError(message) and fail with a TypeError in the caller's place.
        return (type(self), (self.field, self.problem))


class ModelError(StopwiseError):
    """Raised by a model adapter when the provider fails; the run ends ``model_error`` with these facts.

    ``status`` is the provider's HTTP status (None for a transport failure), ``request_id`` its request id.
    """

    def __init__(
        self,
        message: str,
        *,
        provider: str,
        status: int | None = None,
        request_id: str | None = None,
        retryable: bool = False,
    ) -> None:
        super().__init__(message)
        self.provider = provider
        self.status = status
        self.request_id = request_id
        self.retryable = retryable

    def __reduce__(self) -> tuple[Any, ...]:
        facts = {"provider": self.provider, "status": self.status, "request_id": self.request_id}
        return (_rebuilt, (type(self), self.args, {**facts, "retryable": self.retryable}))


class RetryNotAllowed(StopwiseError):
    """``retry()`` was asked for a session that has nothing to continue."""


class ForkNotAllowed(RetryNotAllowed):
    """``fork()`` was asked for a step the run cannot be continued from (not committed, or suspended), into a
    session that already exists, or ``retry()`` for a fork that was not completely written. Nothing was written."""


class RunLeased(StopwiseError):
    """``retry()`` or ``resume()`` was refused before anything ran: another worker holds the run's lease.

    ``owner`` names the holder and ``until`` (Unix seconds, by the clock of the runner that took it) is when the
    lease lapses unless its holder renews it. A run whose worker crashed is continued by ``retry()`` once then.
    """

    def __init__(self, run_id: str, owner: str, until: float) -> None:
        super().__init__(
            f"run {run_id} is leased to {owner} until {until:.3f} (Unix time): it is live in that worker; "
            "if that worker crashed, retry() continues the run once the lease has lapsed"
        )
        self.run_id = run_id
        self.owner = owner
        self.until = until

    def __reduce__(self) -> tuple[type[RunLeased], tuple[str, str, float]]:
        # Pickled whole (DBOS records a workflow's error so): the default rebuilds it from the message alone.
        return (type(self), (self.run_id, self.owner, self.until))


class ModelScriptExhausted(StopwiseError):
    """A ``ScriptedModel`` was asked for more replies than it was given."""


class StoreError(StopwiseError):
    """The store cannot do what was asked.

    ``operation`` names the store method that failed (``commit``, ``load_session``, ...) and ``session_id`` the
    session it was for, when there was one; both are None where unknown. A write that raised wrote nothing.
    """

    def __init__(self, message: str, *, operation: str | None = None, session_id: str | None = None) -> None:
        super().__init__(message)
        self.operation = operation
        self.session_id = session_id


class StoreUnavailable(StoreError):
    """The database could not do the operation: disk full, an I/O error, a lost or closed connection, a lock held
    too long. Nothing of the operation was written; the same call may succeed once the cause is gone (a run
    whose step failed to commit is still ``running`` in the store, and ``retry()`` continues it)."""


class StoreRefused(StoreError):
    """The database refused the data (a constraint, or a value the backend cannot hold). Nothing was written."""


class StoreReadOnly(StoreError):
    """A store opened read-only was asked to write (``operation`` names the method), or a log opened read-only
    needs a migration first (``operation`` is ``"migrate"``: open it writable once). Nothing was written."""


class NotAStopwiseLog(StoreError):
    """The file is another program's SQLite database (it has tables, none or not all of them stopwise's):
    ``path`` names it and ``tables`` lists what it holds. Raised on open, before anything is written to the file
    (no journal switch, no tables), so the file is left byte for byte as it was."""

    def __init__(self, path: str, tables: tuple[str, ...]) -> None:
        shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
        super().__init__(
            f"{path}: not a stopwise log: an SQLite database of another program (tables: {shown}); nothing was "
            "written to it: give stopwise a file of its own",
            operation="open",
        )
        self.path = path
        self.tables = tables

    def __reduce__(self) -> tuple[type[NotAStopwiseLog], tuple[str, tuple[str, ...]]]:
        return (type(self), (self.path, self.tables))


class UnreadableEntry(StoreError):
    """A committed log entry this version of stopwise cannot read: ``session_id``, ``seq`` and ``why`` name it.
    Loading that session raises this; the rest of the database stays readable."""

    def __init__(self, session_id: str, seq: int, why: str) -> None:
        super().__init__(
            f"session {session_id!r}: log entry {seq} cannot be read: {why}",
            operation="load_session",
            session_id=session_id,
        )
        self.seq = seq
        self.why = why

    def __reduce__(self) -> tuple[type[UnreadableEntry], tuple[str, int, str]]:
        # Pickled whole (DBOS records a workflow's error so): rebuilt from the fields, not from the message.
        return (type(self), (str(self.session_id), self.seq, self.why))


class _UnreadableOfRun(UnreadableEntry):
    """What cannot be read belongs to one run, not to one log entry: ``session_id``, ``run_id`` and ``why`` name it
    (``seq`` is 0). Subclasses say what could not be read (``_WHAT``, formatted with the run id) and in which
    operation."""

    _WHAT = ""
    _OPERATION = ""

    def __init__(self, session_id: str, run_id: str, why: str) -> None:
        StoreError.__init__(
            self,
            f"session {session_id!r}: {self._WHAT.format(run_id)}: {why}",
            operation=self._OPERATION,
            session_id=session_id,
        )
        self.seq = 0
        self.why = why
        self.run_id = run_id

    def __reduce__(self) -> tuple[type[UnreadableEntry], tuple[str, str, str]]:  # type: ignore[override]
        return (type(self), (str(self.session_id), self.run_id, self.why))


class UnreadableRun(_UnreadableOfRun):
    """A run record this version of stopwise cannot read (say, a status or completion reason a newer release
    wrote): ``session_id``, ``run_id`` and ``why`` name it (``seq`` is 0). An ``UnreadableEntry``, so whatever skips
    a session with an unreadable entry skips this one too; the rest of the database stays readable."""

    _WHAT = "run record {} cannot be read"
    _OPERATION = "load_session"


class UnreadableSuspension(_UnreadableOfRun):
    """A suspended run whose log no longer holds what settling its step needs (the approval request, or the
    model's reply that asked for the calls): ``session_id``, ``run_id`` and ``why`` name it (``seq`` is 0).
    Raised by ``resume``, ``approve`` and ``expire`` of that run, before anything is written; an
    ``UnreadableEntry``, so whatever skips a session with an unreadable entry skips this one too."""

    _WHAT = "suspended run {} cannot be settled"
    _OPERATION = "resume"


class SchemaTooNew(StoreError):
    """The database was written by a newer stopwise; it is not opened so nothing is written to it."""


class CyclicValue(StopwiseError, ValueError):
    """A value that contains itself (a list, dict or dataclass reachable from inside itself) was handed where
    stopwise keeps values (a tool result, a message, a log record): it has no JSON form. ``where`` names the value
    and ``path`` the cycle, as ``"[0]['next'] is the value itself"``. A ``ValueError``, so a tool result that is one
    becomes the error row of an unserialisable result."""

    def __init__(self, where: str, path: str) -> None:
        super().__init__(f"{where} contains itself: {path}")
        self.where = where
        self.path = path

    def __reduce__(self) -> tuple[type[CyclicValue], tuple[str, str]]:
        return (type(self), (self.where, self.path))


class StateNotSerializable(StopwiseError, TypeError):
    """The session state holds a value that is not JSON-serialisable, so it cannot be committed."""


class StopGuardExpired(StopwiseError, RuntimeError):
    """A stop guard wrote to its context after its consultation ended (it timed out, or a task it started
    outlived it): the write is discarded, since the run has moved on without it."""


class StepConflict(StoreError):
    """A log entry with this (session, seq) already exists: another writer got there first."""


class ErrorCopy(StopwiseError):
    """An error that cannot be pickled whole (it holds a lock, its ``__init__`` takes other arguments than its
    message, its class is local to a function), as a stopwise error that wraps it pickles it: ``kind`` is the
    original's class (``module.QualifiedName``), ``message`` its text. What crosses a process (DBOS records a
    workflow's error by pickling it) is then still the error's kind and text, never a ``TypeError`` of pickle's."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message

    def __reduce__(self) -> tuple[type[ErrorCopy], tuple[str, str]]:
        return (type(self), (self.kind, self.message))


class UnreadableRecord(StopwiseError, ValueError):
    """A log record's JSON data this version of stopwise cannot read (a field missing or of another type: a damaged
    log, or a record a newer version wrote): ``why`` names the record's type and the field.
    ``stopwise.records.parse_records`` raises it; reading a log entry (``stopwise.records.parse_entry``, and every
    read of a session) raises it as the ``UnreadableEntry`` naming the session and the entry."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why

    def __reduce__(self) -> tuple[type[UnreadableRecord], tuple[str]]:
        return (type(self), (self.why,))
