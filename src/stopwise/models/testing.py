"""Test doubles that ship with the package: users test their agents with them."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable

from stopwise._checks import check_function
from stopwise.errors import ConfigError, ModelScriptExhausted
from stopwise.messages import Reply
from stopwise.models.base import ModelRequest

__all__ = ["FunctionModel", "ScriptedModel"]

ReplyFn = Callable[[ModelRequest], Reply | str | Awaitable[Reply | str]]


class ScriptedModel:
    """Returns the given replies in order; a plain string is a text reply.

    Every request is kept in ``requests`` so a test can assert what the model saw. Asking for more replies
    than were given raises ``ModelScriptExhausted`` naming the step.
    """

    def __init__(self, replies: Iterable[Reply | str]) -> None:
        if isinstance(replies, str | Reply) or not isinstance(replies, Iterable):
            # A lone string would otherwise be a script of one-character replies.
            raise ConfigError("ScriptedModel.replies", f"must be a list of replies, got {type(replies).__name__}")
        replies = list(replies)
        for i, r in enumerate(replies):
            if not isinstance(r, Reply | str):
                raise ConfigError("ScriptedModel.replies", f"item {i} must be a Reply or a str, got {type(r).__name__}")
        self._replies = [r if isinstance(r, Reply) else Reply(text=r) for r in replies]
        self._next = 0
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    async def generate(self, request: ModelRequest) -> Reply:
        self.requests.append(request)
        if self._next >= len(self._replies):
            raise ModelScriptExhausted(
                f"ScriptedModel has no reply left for step {request.step}: "
                f"it was given {len(self._replies)} and all were used"
            )
        reply = self._replies[self._next]
        self._next += 1
        return reply

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
        """The next reply as a stream: its whole text as one delta (when it has text), then the reply."""
        reply = await self.generate(request)
        if reply.text:
            yield reply.text
        yield reply


class FunctionModel:
    """Calls ``fn(request)`` (sync or async) for every request; it returns a ``Reply``, or a plain string for a
    text reply (as ``ScriptedModel`` takes strings)."""

    def __init__(self, fn: ReplyFn, *, name: str | None = None) -> None:
        if not callable(fn):
            raise ConfigError("FunctionModel.fn", f"must be a function of the request, got {fn!r}")
        check_function("FunctionModel.fn", fn, "request")
        self._fn = fn
        self.name = name or getattr(fn, "__name__", "function")

    async def generate(self, request: ModelRequest) -> Reply:
        result = self._fn(request)
        if inspect.isawaitable(result):
            result = await result
        if isinstance(result, str):
            return Reply(text=result)
        if not isinstance(result, Reply):
            raise TypeError(f"FunctionModel {self.name!r} returned {type(result).__name__}, expected Reply or str")
        return result

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
        """``fn``'s reply as a stream: its whole text as one delta (when it has text), then the reply."""
        reply = await self.generate(request)
        if reply.text:
            yield reply.text
        yield reply
