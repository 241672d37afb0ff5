"""Running the application's output validators (``Agent.output_validators``) on an accepted output."""

from __future__ import annotations

import inspect
from typing import Any

from stopwise._leg import Leg
from stopwise._step.calls import CallerCodeFailed
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.output_validators import RetryOutput

__all__ = ["run_validators"]


async def run_validators(leg: Leg, value: Any, *, text: bool) -> tuple[Any, str | None]:
    """The output after every validator, in order, and None; or the first rejection's feedback. ``text`` says the
    output is the final text (a replacement must then be a string). Raises ``CallerCodeFailed`` when a validator
    raises anything but ``RetryOutput`` or returns a replacement of the wrong kind."""
    output_type = leg.agent.output_type
    for fn in leg.agent.output_validators:
        name = getattr(fn, "__name__", type(fn).__name__)
        try:
            result = fn(value)
            if inspect.isawaitable(result):
                result = await result
        except RetryOutput as exc:
            return value, exc.feedback or f"output validator {name} rejected the output"
        except Exception as exc:
            message = f"output validator {name} raised {type(exc).__name__}: {exc}"
            error = ErrorDetail(ErrorCode.OUTPUT_VALIDATOR_RAISED, message, ErrorCategory.CALLER, retryable=False)
            raise CallerCodeFailed(error) from exc
        if result is None:
            continue
        wrong = not isinstance(result, str) if text else output_type is not None and not isinstance(result, output_type)
        if wrong:
            expected = "a str" if text or output_type is None else output_type.__name__
            message = f"output validator {name} returned {type(result).__name__}, expected {expected} or None"
            raise CallerCodeFailed(ErrorDetail(ErrorCode.OUTPUT_VALIDATOR_RAISED, message, ErrorCategory.CALLER))
        value = result
    return value, None
