"""Deciding when a run stops: conditions, the resolver, stop guards and finish nudges."""

from stopwise._deprecated import aliases
from stopwise.stop.conditions import (
    StepView,
    StopCondition,
    has_tool_call,
    is_looping,
    step_count_is,
    text_contains,
)
from stopwise.stop.decision import Action, CompletionReason, StepSignals, StopDecision, resolve
from stopwise.stop.guard import Continue, Fail, Stop, StopGuard, StopGuardContext, StopGuardReport
from stopwise.stop.limits import LimitHit, LimitKind, Limits
from stopwise.stop.nudge import FinishEvidence, ToolTrace, finish_nudge

__all__ = [
    "Action",
    "CompletionReason",
    "Continue",
    "StopDecision",
    "Fail",
    "FinishEvidence",
    "LimitHit",
    "LimitKind",
    "Limits",
    "StepSignals",
    "StepView",
    "Stop",
    "StopCondition",
    "StopGuard",
    "StopGuardContext",
    "StopGuardReport",
    "ToolTrace",
    "finish_nudge",
    "has_tool_call",
    "is_looping",
    "resolve",
    "step_count_is",
    "text_contains",
]

__getattr__ = aliases(__name__, {"Decision": ("StopDecision", StopDecision)})
