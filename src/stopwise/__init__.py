"""stopwise: run LLM agents that know when to stop.

The stop decision is one pure resolver; every step commits atomically to a durable log; every run ends with
a typed ``RunResult``.
"""

from stopwise.agent import Agent
from stopwise.approvals import ApprovalError, Approve, Modify, PendingApproval, Reject, Terminate
from stopwise.context import RunContext
from stopwise.errors import (
    ConfigError,
    ErrorCategory,
    ErrorCode,
    ErrorDetail,
    ModelError,
    ModelScriptExhausted,
    RetryNotAllowed,
    SchemaTooNew,
    StateNotSerializable,
    StepConflict,
    StopwiseError,
    StoreError,
    StoreRefused,
    StoreUnavailable,
    UnreadableEntry,
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
from stopwise.guardrails import Block, GuardrailError, GuardrailRecord, Guardrails, Pass, Rewrite
from stopwise.messages import (
    Message,
    Reply,
    Role,
    StopReason,
    TokenLogprob,
    ToolCall,
    Usage,
    decode_tool_result,
    transcript,
)
from stopwise.models import (
    AnthropicModel,
    FunctionModel,
    Model,
    ModelRequest,
    OpenAIModel,
    ReplyLimits,
    ScriptedModel,
    StreamingModel,
    ToolSpec,
)
from stopwise.result import RunResult, RunStatus
from stopwise.runtime import Runner, SessionBusy
from stopwise.stop import (
    CompletionReason,
    Continue,
    Decision,
    Fail,
    FinishEvidence,
    StepSignals,
    StepView,
    Stop,
    StopCondition,
    StopGuard,
    StopGuardContext,
    StopGuardReport,
    finish_nudge,
    has_tool_call,
    resolve,
    step_count_is,
    text_contains,
)
from stopwise.store import MemoryStore, RunRecord, SQLiteStore, Store
from stopwise.tools import Risk, Tool, ToolError, tool

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
    "TokenLogprob",
    "ToolCall",
    "Usage",
    "decode_tool_result",
    "transcript",
    # models
    "Model",
    "ModelRequest",
    "ToolSpec",
    "ScriptedModel",
    "FunctionModel",
    "StreamingModel",
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
    "StepSignals",
    "Decision",
    "resolve",
    # stop guards and finish nudges
    "StopGuard",
    "StopGuardContext",
    "Stop",
    "Continue",
    "Fail",
    "StopGuardReport",
    "finish_nudge",
    "FinishEvidence",
    # guardrails (built-ins in stopwise.guardrails)
    "Guardrails",
    "Pass",
    "Block",
    "Rewrite",
    "GuardrailRecord",
    "GuardrailError",
    # approvals
    "Approve",
    "Reject",
    "Modify",
    "Terminate",
    "PendingApproval",
    "ApprovalError",
    # stores
    "Store",
    "MemoryStore",
    "SQLiteStore",
    "RunRecord",
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
    "ModelScriptExhausted",
    "StoreError",
    "StoreUnavailable",
    "StoreRefused",
    "UnreadableEntry",
    "SchemaTooNew",
    "StateNotSerializable",
    "StepConflict",
    "__version__",
]
