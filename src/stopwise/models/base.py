"""The ``Model`` protocol: one async call from a request to a reply."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from stopwise.errors import ConfigError
from stopwise.messages import Message, Reply

__all__ = ["Model", "ModelRequest", "StreamingModel", "ToolSpec", "stream_reply"]


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON schema of arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ModelRequest:
    """Everything the model sees for one call."""

    messages: Sequence[Message]
    """The context: system instructions first, then the session's log. An immutable sequence: a tuple, or (from
    the run loop) a ``stopwise.history_view.HistoryView`` that shares the run's history rather than copying it."""
    tools: tuple[ToolSpec, ...]
    """The tools offered on this call; empty during forced completion."""
    step: int
    """The step this call belongs to (1-based, within the run)."""
    output_schema: Mapping[str, Any] | None = None
    """JSON schema of the structured output the agent expects, if it declared one."""
    forced_output: bool = False
    """True on a forced-completion call: tools are off and the reply must be the structured output."""
    tool_choice: str | None = None
    """``"auto"``, ``"required"``, ``"none"``, or the name of the one tool to call; None leaves it to the provider
    (set by ``Agent.prepare_step``)."""
    max_output_tokens: int | None = None
    """The most output tokens this call may spend (at least 1), or None for no cap of the run's; the provider
    adapters pass it on, as the least of it and their own configured maximum. The run loop sets it to what is left
    of ``Limits.output_tokens`` / ``total_tokens`` (the lesser), and leaves it None without those budgets. A model
    that ignores it is still held to the budget after the call, by the usage its reply reports."""

    def __post_init__(self) -> None:
        cap = self.max_output_tokens
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int) or cap < 1):
            raise ConfigError("ModelRequest.max_output_tokens", f"must be an int >= 1 or None, got {cap!r}")


@runtime_checkable
class Model(Protocol):
    """Anything with ``async generate(request) -> Reply``.

    An exception from ``generate`` ends the run ``failed`` with code ``model_error``; committed steps stay.
    """

    async def generate(self, request: ModelRequest) -> Reply: ...


@runtime_checkable
class StreamingModel(Model, Protocol):
    """A ``Model`` that can also stream its reply: ``stream(request)`` is an async iterator (an ``async def``
    generator) that yields the text as it is generated, as non-empty ``str`` deltas, then exactly one ``Reply``,
    last: the same reply ``generate`` would have returned. Joined, the deltas are the reply's ``text``; tool calls
    are not streamed, they arrive with the ``Reply``. Failures raise as in ``generate`` (``ModelError``), possibly
    after some deltas were yielded. ``isinstance(model, StreamingModel)`` tells whether a model has ``stream``.
    """

    def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]: ...


async def stream_reply(model: Model, request: ModelRequest) -> AsyncIterator[str | Reply]:
    """Text deltas then the ``Reply`` from any model: ``model.stream`` when it is a ``StreamingModel``, else the
    reply of ``generate`` alone. Raises ``TypeError`` if a stream ends without a ``Reply`` or yields anything else.
    """
    if not isinstance(model, StreamingModel):
        yield await model.generate(request)
        return
    stream = model.stream(request)
    try:
        async for item in stream:
            if isinstance(item, Reply):
                yield item
                return
            if not isinstance(item, str):
                raise TypeError(f"{type(model).__name__}.stream yielded {type(item).__name__}, expected str or Reply")
            if item:
                yield item
    finally:
        # Close the model's generator now (its HTTP response with it), not whenever it is collected.
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
    raise TypeError(f"{type(model).__name__}.stream ended without yielding a Reply")
