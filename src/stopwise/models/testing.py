"""Test doubles that ship with the package: users test their agents with them."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from stopwise._checks import check_function
from stopwise.errors import ConfigError, ModelScriptExhausted
from stopwise.messages import AUTOMATED, Message, Reply, Role
from stopwise.models.base import ModelRequest

__all__ = ["FunctionModel", "ScriptedModel"]

ReplyFn = Callable[[ModelRequest], Reply | str | Awaitable[Reply | str]]


class ScriptedModel:
    """Returns the given replies in order; a plain string is a text reply.

    Every request is kept in ``requests`` so a test can assert what the model saw. Asking for more replies
    than were given raises ``ModelScriptExhausted`` naming the step.

    A run carried on in another process (``stopwise resume``, a retry after a crash) goes on with the next reply,
    not the first: on its first request, a model finds the replies the run already holds (its assistant rows
    since the latest user input) and, when they are the script's first ones in order (text, tool names and
    arguments), carries on after them. From then on it counts its own replies in the process, so a script that
    serves several runs of a session in one process, a guardian judge (whose requests hold no replies), or an
    agent whose history processors drop replies, get the replies in order as before. A run whose replies are not
    the script's first ones (a new script for a resumed leg) starts at the first reply.
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
        self._placed = False
        """Whether the first request placed ``_next`` after the replies its run already held (see the class)."""
        self.requests: list[ModelRequest] = []

    @property
    def remaining(self) -> int:
        return len(self._replies) - self._next

    async def generate(self, request: ModelRequest) -> Reply:
        self.requests.append(request)
        if not self._placed:
            self._next, self._placed = self._given(request.messages), True
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

    def _given(self, messages: Sequence[Message]) -> int:
        """How many of the script's replies the run in ``messages`` already holds: its assistant rows since the
        latest user input (automated feedback rows do not start a run), when they are the script's first ones in
        order; else 0."""
        run: list[Message] = []
        for m in reversed(messages):
            if m.role is Role.USER and not m.metadata.get(AUTOMATED):
                break
            if m.role is Role.ASSISTANT:
                run.append(m)
        run.reverse()
        if len(run) > len(self._replies):
            return 0
        same = all(_is_reply(row, reply) for row, reply in zip(run, self._replies, strict=False))
        return len(run) if same else 0


def _is_reply(row: Message, reply: Reply) -> bool:
    """Whether the logged ``row`` is ``reply``: its text, and its calls' names and arguments (a call's id may have
    been made unique in the session when it was logged)."""
    return row.content == reply.text and [(c.name, c.args) for c in row.tool_calls] == [
        (c.name, c.args) for c in reply.tool_calls
    ]


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
