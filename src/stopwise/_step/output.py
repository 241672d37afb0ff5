"""The application's code on the run's output: the output validators (``Agent.output_validators``) on an
accepted output, and the step cap's handler (``Agent.on_max_steps``)."""

from __future__ import annotations

import inspect
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from pydantic_core import ValidationError

from stopwise._leg import Leg
from stopwise._step.calls import CallerCodeFailed
from stopwise.errors import ErrorCategory, ErrorCode, ErrorDetail
from stopwise.messages import Message
from stopwise.output_validators import RetryOutput
from stopwise.row_copies import own_value
from stopwise.stop.max_steps import MaxStepsContext

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["run_max_steps_handler", "run_validators"]


async def run_validators(leg: Leg, value: Any, *, text: bool) -> tuple[Any, str | None]:
    """The output after every validator, in order, and None; or the first rejection's feedback. ``text`` says the
    output is the final text (a replacement must then be a string). Raises ``CallerCodeFailed`` when a validator
    raises anything but ``RetryOutput`` or returns a replacement of the wrong kind. Each validator is handed a
    copy of the output: what it changes in place is neither the output nor logged."""
    output_type = leg.agent.output_type
    for fn in leg.agent.output_validators:
        name = getattr(fn, "__name__", type(fn).__name__)
        try:
            result = fn(_handed(value, output_type))
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


def _handed(output: Any, output_type: type[BaseModel] | None) -> Any:
    """The copy of ``output`` (an ``output_type`` instance, or JSON data) a validator is handed: what it changes in
    place is not the output (None accepts the output as it was; a change is a replacement it returns)."""
    if output_type is not None and isinstance(output, output_type):
        return output.model_copy(deep=True)
    return own_value(output)


async def run_max_steps_handler(leg: Leg, rows: list[Message]) -> Any:
    """The step cap's handler's output, checked: an ``output_type`` instance (data is validated into one), or a
    string for an agent without an output type. Raises ``CallerCodeFailed`` when the handler raises or returns
    the wrong kind."""
    agent = leg.agent
    handler = agent.on_max_steps
    assert callable(handler) and agent.max_steps is not None
    name = getattr(handler, "__name__", type(handler).__name__)
    ctx = MaxStepsContext(agent.max_steps, leg.hook_history(rows), MappingProxyType(dict(leg.state)), agent.output_type)
    try:
        result = handler(ctx)
        if inspect.isawaitable(result):
            result = await result
        if agent.output_type is None:
            if not isinstance(result, str):
                raise TypeError(f"returned {type(result).__name__}, expected a str")
            return result
        return result if isinstance(result, agent.output_type) else agent.output_type.model_validate(result)
    except (Exception, ValidationError) as exc:
        message = f"on_max_steps handler {name} failed: {type(exc).__name__}: {exc}"
        error = ErrorDetail(ErrorCode.MAX_STEPS_HANDLER_RAISED, message, ErrorCategory.CALLER, retryable=False)
        raise CallerCodeFailed(error) from exc
