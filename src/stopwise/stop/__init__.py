"""Deciding when a run stops: conditions, the resolver."""

from stopwise.stop.conditions import StepView, StopCondition, has_tool_call, step_count_is, text_contains
from stopwise.stop.decision import Action, CompletionReason, Decision, StepSignals, resolve

__all__ = [
    "Action",
    "CompletionReason",
    "Decision",
    "StepSignals",
    "StepView",
    "StopCondition",
    "has_tool_call",
    "resolve",
    "step_count_is",
    "text_contains",
]
