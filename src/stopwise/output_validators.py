"""Output validators: the application's semantic checks of a run's final output, which may send the model back.

A validator is ``fn(output)`` (sync or ``async def``): ``output`` is the validated ``output_type`` instance, or the
final text when the agent has no output type (also a stop-at tool's result). It returns None to accept the output
as is, or a replacement of the same kind; it raises ``RetryOutput("feedback")`` to reject it. A rejection sends the
model the feedback (marked as coming from the application) and counts against ``Agent.max_completion_retries``; once
those are spent the run fails ``output_rejected``. Any other exception fails the run (``output_validator_raised``).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias

__all__ = ["OutputValidator", "RetryOutput"]


class RetryOutput(Exception):
    """Raise from an output validator to reject the output: the model gets ``feedback`` and tries again."""

    def __init__(self, feedback: str) -> None:
        super().__init__(feedback)
        self.feedback = feedback


OutputValidator: TypeAlias = Callable[[Any], "Any | Awaitable[Any]"]
"""``fn(output) -> None | replacement``, sync or async; raises ``RetryOutput`` to reject."""
