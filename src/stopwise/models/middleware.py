"""Model middleware: wrappers applied to every model call an agent makes.

A middleware is ``async def mw(request, call_next) -> Reply``. Unlike a guardrail, which watches the run's
boundaries, middleware sees literally every request, forced-completion and wrap-up calls included: use it for
rules that must hold on each call (an always-on instruction, request logging, a redaction of what leaves
the process); use guardrails for run-level decisions you want recorded and able to stop things.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence
from typing import cast

from stopwise._checks import check_function
from stopwise.errors import ConfigError
from stopwise.messages import Reply
from stopwise.models.base import Model, ModelRequest

__all__ = ["Middleware", "wrap_model"]

CallNext = Callable[[ModelRequest], Awaitable[Reply]]
Middleware = Callable[[ModelRequest, CallNext], Awaitable[Reply]]


class _Wrapped:
    """A model whose calls pass through the middleware, outermost first."""

    def __init__(self, model: Model, middleware: tuple[Middleware, ...]) -> None:
        self.model = model
        self.middleware = middleware
        call: CallNext = model.generate
        for mw in reversed(middleware):
            call = _bind(mw, call)
        self._call = call

    async def generate(self, request: ModelRequest) -> Reply:
        return await self._call(request)


def _bind(mw: Middleware, call_next: CallNext) -> CallNext:
    async def call(request: ModelRequest) -> Reply:
        # A plain ``def`` middleware works too: one that answers itself returns a Reply, which is not awaited.
        reply = mw(request, call_next)
        if not inspect.isawaitable(reply):
            return cast(Reply, reply)
        return await reply

    return call


def wrap_model(model: Model, middleware: Sequence[Middleware]) -> Model:
    """``model`` with ``middleware`` applied in order (the first one sees the request first)."""
    chain = tuple(middleware)
    for i, mw in enumerate(chain):
        if not callable(mw):
            raise ConfigError("middleware", f"item {i} is not callable: {mw!r}")
        check_function("middleware", mw, "request", "call_next")
    return _Wrapped(model, chain) if chain else model
