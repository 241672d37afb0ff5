"""Every exception stopwise raises survives pickling whole: DBOS records a workflow's error by pickling it and
``result()`` raises the unpickled copy, and a process pool hands errors across the same way. A class whose
``__init__`` takes other arguments than its message would otherwise unpickle as a ``TypeError``."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
from collections.abc import Callable, Iterator

import pytest

import stopwise
from stopwise._load import LoadError
from stopwise.approvals import ApprovalError
from stopwise.errors import (
    ConfigError,
    CyclicValue,
    ErrorCopy,
    ErrorDetail,
    ForkNotAllowed,
    ModelError,
    ModelScriptExhausted,
    NotAStopwiseLog,
    RetryNotAllowed,
    RunLeased,
    SchemaTooNew,
    StateNotSerializable,
    StepConflict,
    StopGuardExpired,
    StopwiseError,
    StoreError,
    StoreReadOnly,
    StoreRefused,
    StoreUnavailable,
    UnreadableEntry,
    UnreadableRecord,
    UnreadableRun,
    UnreadableSuspension,
)
from stopwise.evals.traces import LineProblem, TraceFormatError
from stopwise.guardian.evaluators.scripted import EvaluatorScriptExhausted
from stopwise.guardian.records import UnresolvedConfig
from stopwise.guardrails.verdicts import GuardrailError, GuardrailRaised, GuardrailTimeout, Hook
from stopwise.integrations import langgraph, openai_agents, pydantic_ai
from stopwise.integrations._base import RunFailed
from stopwise.output_validators import RetryOutput
from stopwise.runtime.local import SessionBusy
from stopwise.stop.guard import InvalidVerdict
from stopwise.tools import ToolError, ToolUnavailable

# One representative instance per class, built the way stopwise builds it (keyword fields set, not defaults).
SAMPLES: dict[type[BaseException], Callable[[], BaseException]] = {
    StopwiseError: lambda: StopwiseError("something went wrong"),
    ConfigError: lambda: ConfigError("max_steps", "must be at least 1, got 0"),
    CyclicValue: lambda: CyclicValue("the result of call c1", "[0] is the value itself"),
    ErrorCopy: lambda: ErrorCopy("app.errors.QuotaError", "quota 3 of 2 used"),
    ModelError: lambda: ModelError("rate limited", provider="openai", status=429, request_id="req_1", retryable=True),
    RetryNotAllowed: lambda: RetryNotAllowed("session s1 has no run to continue"),
    ForkNotAllowed: lambda: ForkNotAllowed("step 3 of run r1 is not committed"),
    RunLeased: lambda: RunLeased("r1", "worker-7", 1_790_000_000.25),
    ModelScriptExhausted: lambda: ModelScriptExhausted("asked for reply 3 of 2"),
    StoreError: lambda: StoreError("cannot store", operation="commit", session_id="s1"),
    StoreUnavailable: lambda: StoreUnavailable("disk I/O error", operation="commit", session_id="s1"),
    StoreReadOnly: lambda: StoreReadOnly("log.db is read-only", operation="commit", session_id="s1"),
    NotAStopwiseLog: lambda: NotAStopwiseLog("app.db", ("users",)),
    StoreRefused: lambda: StoreRefused("value too large", operation="commit", session_id="s1"),
    UnreadableEntry: lambda: UnreadableEntry("s1", 4, "unknown kind 'x'"),
    UnreadableRun: lambda: UnreadableRun("s1", "r1", "unknown status 'paused'"),
    UnreadableSuspension: lambda: UnreadableSuspension("s1", "r1", "no approval request"),
    UnreadableRecord: lambda: UnreadableRecord("a 'history' record: field step holds str, not an integer"),
    SchemaTooNew: lambda: SchemaTooNew("schema 9 > 3", operation="open"),
    StateNotSerializable: lambda: StateNotSerializable("state['n'] is not JSON"),
    StopGuardExpired: lambda: StopGuardExpired("write after the consultation ended"),
    StepConflict: lambda: StepConflict("entry (s1, 2) exists", operation="commit", session_id="s1"),
    LoadError: lambda: LoadError("agents.py: no such file"),
    ApprovalError: lambda: ApprovalError("unknown call c9"),
    SessionBusy: lambda: SessionBusy("session s1 is running"),
    EvaluatorScriptExhausted: lambda: EvaluatorScriptExhausted("asked for answer 2 of 1"),
    GuardrailRaised: lambda: GuardrailRaised("pii", Hook.TOOL_RESULT, ValueError("bad regex")),
    GuardrailTimeout: lambda: GuardrailTimeout("slow", Hook.INPUT, 2.5),
    GuardrailError: lambda: GuardrailError("pii", Hook.OUTPUT, "an input verdict on the output hook"),
    RunFailed: lambda: RunFailed(ErrorDetail("stop_guard_rejected", "no", "framework", False, {"step": 2})),
    openai_agents.NotInARun: lambda: openai_agents.NotInARun("run it with Stopwise.run"),
    openai_agents.UnsupportedVerdict: lambda: openai_agents.UnsupportedVerdict("cannot rewrite arguments"),
    pydantic_ai.UnsupportedVerdict: lambda: pydantic_ai.UnsupportedVerdict("cannot rewrite the input"),
    langgraph.UnsupportedVerdict: lambda: langgraph.UnsupportedVerdict("cannot rewrite the input"),
    langgraph.UnsupportedToolOutput: lambda: langgraph.UnsupportedToolOutput("a tool returned a Command"),
    ToolError: lambda: ToolError("no such file"),
    ToolUnavailable: lambda: ToolUnavailable("server hung up"),
    RetryOutput: lambda: RetryOutput("give a number"),
    InvalidVerdict: lambda: InvalidVerdict("returned None"),
    UnresolvedConfig: lambda: UnresolvedConfig("cfg-1"),
    TraceFormatError: lambda: TraceFormatError([LineProblem("t.jsonl", 3, "not JSON"), LineProblem("t.jsonl", 9, "x")]),
}


def _subclasses(cls: type[BaseException]) -> Iterator[type[BaseException]]:
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _raised_by_stopwise() -> set[type[BaseException]]:
    """Every public StopwiseError subclass, and every exception a public stopwise module exports."""
    found: set[type[BaseException]] = set()
    for info in pkgutil.walk_packages(stopwise.__path__, "stopwise."):
        module = importlib.import_module(info.name)
        if any(part.startswith("_") for part in info.name.split(".")):
            continue
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name, None)
            if inspect.isclass(value) and issubclass(value, BaseException):
                found.add(value)
    found.update(_subclasses(StopwiseError))
    # A private base (its name starts with "_") is never raised itself: its subclasses are.
    return {c for c in found if c.__module__.startswith("stopwise") and not c.__name__.startswith("_")}


def _facts(error: BaseException) -> dict[str, object]:
    """What a caller reads off an error: its fields, with an exception-valued field compared by type and args."""
    facts = {k: (type(v), v.args) if isinstance(v, BaseException) else v for k, v in vars(error).items()}
    return {"type": type(error), "message": str(error), "args": error.args, **facts}


def test_every_exception_stopwise_raises_has_a_sample_here() -> None:
    missing = sorted(c.__qualname__ for c in _raised_by_stopwise() - SAMPLES.keys())
    assert missing == [], f"add a sample for {missing} so its pickling is checked"


@pytest.mark.parametrize("cls", list(SAMPLES), ids=lambda c: f"{c.__module__}.{c.__qualname__}")
def test_error_unpickles_with_its_type_message_and_fields(cls: type[BaseException]) -> None:
    error = SAMPLES[cls]()
    assert type(error) is cls
    copy = pickle.loads(pickle.dumps(error))
    assert _facts(copy) == _facts(error)
