"""stopwise: run LLM agents that know when to stop.

The stop decision is one pure resolver; every step commits atomically to a durable log; every run ends with
a typed ``RunResult``.

``import stopwise`` loads what running an agent needs; the model adapters, the SQLite store, the guardian's
evaluators and the built-in guardrails are imported when first named (PEP 562), so every name below imports as
it always did.
"""

from typing import TYPE_CHECKING

from stopwise._deprecated import aliases
from stopwise._lazy import lazy
from stopwise.agent import Agent
from stopwise.approvals import ApprovalDecision, ApprovalError, Approve, Modify, PendingApproval, Reject, Terminate
from stopwise.context import RunContext
from stopwise.errors import (
    ConfigError,
    ErrorCategory,
    ErrorCode,
    ErrorDetail,
    ModelError,
    RetryNotAllowed,
    StopwiseError,
    StoreError,
)
from stopwise.events import (
    Event,
    GuardrailEvent,
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    StopGuardEvent,
    TextDelta,
    ToolCalled,
    ToolReturned,
)
from stopwise.goal import Goal
from stopwise.guardian import Guardian, GuardianDecision
from stopwise.guardrails import Block, GuardrailError, GuardrailRecord, Guardrails, Pass, Rewrite
from stopwise.messages import (
    Message,
    Reply,
    Role,
    StopReason,
    ToolCall,
    Usage,
    decode_tool_result,
    transcript,
)
from stopwise.models import FunctionModel, Model, ReplyLimits, ScriptedModel
from stopwise.output_validators import RetryOutput
from stopwise.result import RunResult, RunStatus
from stopwise.runtime import Runner, SessionBusy
from stopwise.stop import (
    CompletionReason,
    Continue,
    Fail,
    FinishEvidence,
    Limits,
    StepView,
    Stop,
    StopCondition,
    StopGuard,
    StopGuardContext,
    StopGuardReport,
    finish_nudge,
    has_tool_call,
    is_looping,
    step_count_is,
    text_contains,
)
from stopwise.store import MemoryStore, Store
from stopwise.tool_switches import ToolSwitch
from stopwise.tools import Risk, Tool, ToolError, tool

if TYPE_CHECKING:
    from stopwise.models.anthropic import AnthropicModel
    from stopwise.models.openai import OpenAIModel
    from stopwise.store.sqlite import SQLiteStore

__version__ = "0.1.0"

__all__ = [
    # agents and running them
    "Agent",
    "Runner",
    "RunContext",
    "RunResult",
    "RunStatus",
    "CompletionReason",
    # messages
    "Message",
    "Reply",
    "Role",
    "StopReason",
    "ToolCall",
    "Usage",
    "decode_tool_result",
    "transcript",
    # models
    "Model",
    "ScriptedModel",
    "FunctionModel",
    "OpenAIModel",
    "AnthropicModel",
    "ReplyLimits",
    # tools
    "tool",
    "Tool",
    "ToolError",
    "Risk",
    # stop conditions and the decision
    "StopCondition",
    "StepView",
    "step_count_is",
    "has_tool_call",
    "text_contains",
    "is_looping",
    "Limits",
    "RetryOutput",
    # stop guards and finish nudges
    "StopGuard",
    "StopGuardContext",
    "Stop",
    "Continue",
    "Fail",
    "StopGuardReport",
    "finish_nudge",
    "FinishEvidence",
    "ToolSwitch",
    # guardrails (built-ins in stopwise.guardrails)
    "Guardrails",
    "Pass",
    "Block",
    "Rewrite",
    "GuardrailRecord",
    "GuardrailError",
    # the guardian (its questions, evaluators and policy in stopwise.guardian)
    "Guardian",
    "GuardianDecision",
    "Goal",
    # approvals
    "Approve",
    "Reject",
    "Modify",
    "Terminate",
    "PendingApproval",
    "ApprovalDecision",
    "ApprovalError",
    # stores
    "Store",
    "MemoryStore",
    "SQLiteStore",
    # events
    "Event",
    "StepStarted",
    "StopGuardEvent",
    "GuardrailEvent",
    "TextDelta",
    "ModelReplied",
    "ToolCalled",
    "ToolReturned",
    "StepCommitted",
    "RunFinished",
    # errors
    "ErrorDetail",
    "ErrorCode",
    "ErrorCategory",
    "StopwiseError",
    "ConfigError",
    "RetryNotAllowed",
    "SessionBusy",
    "ModelError",
    "StoreError",
    "__version__",
]

# Names that moved out of the top level (see CHANGELOG.md): importing them from here still works for one minor
# release, with a DeprecationWarning naming their home.
import stopwise.errors as _errors
import stopwise.messages as _messages
import stopwise.models as _models
import stopwise.runtime as _runtime
import stopwise.store as _store

_renamed = aliases(
    __name__,
    {
        "Decision": ("stopwise.runtime.StopDecision", _runtime.StopDecision),
        "StepSignals": ("stopwise.runtime.StepSignals", _runtime.StepSignals),
        "resolve": ("stopwise.runtime.resolve", _runtime.resolve),
        "TokenLogprob": ("stopwise.messages.TokenLogprob", _messages.TokenLogprob),
        "ModelRequest": ("stopwise.models.ModelRequest", _models.ModelRequest),
        "ToolSpec": ("stopwise.models.ToolSpec", _models.ToolSpec),
        "StreamingModel": ("stopwise.models.StreamingModel", _models.StreamingModel),
        "ModelScriptExhausted": ("stopwise.errors.ModelScriptExhausted", _errors.ModelScriptExhausted),
        "SchemaTooNew": ("stopwise.errors.SchemaTooNew", _errors.SchemaTooNew),
        "StateNotSerializable": ("stopwise.errors.StateNotSerializable", _errors.StateNotSerializable),
        "StepConflict": ("stopwise.errors.StepConflict", _errors.StepConflict),
        "RunRecord": ("stopwise.store.RunRecord", _store.RunRecord),
    },
)

__getattr__ = lazy(
    __name__,
    {
        "AnthropicModel": "stopwise.models.anthropic",
        "OpenAIModel": "stopwise.models.openai",
        "SQLiteStore": "stopwise.store.sqlite",
    },
    _renamed,
)
