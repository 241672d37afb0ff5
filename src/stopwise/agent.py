"""``Agent``: an immutable definition of what runs; the ``Runner`` decides where and how."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, TypeAdapter

from stopwise.context import RunContext
from stopwise.errors import ConfigError
from stopwise.guardian.guardian import Guardian
from stopwise.guardrails.hooks import Guardrails
from stopwise.models._registry import resolve_model
from stopwise.models.base import Model, ToolSpec
from stopwise.models.middleware import Middleware, wrap_model
from stopwise.stop.conditions import StopCondition, as_condition
from stopwise.stop.guard import StopGuard
from stopwise.tools import Risk, Tool, _build

__all__ = ["Agent"]


@dataclass(frozen=True, slots=True, eq=False)
class Agent:
    """An agent definition. Invalid configuration raises ``ConfigError`` naming the field, here, not mid-run."""

    name: str
    instructions: str = ""
    """The system prompt; empty (the default) sends none."""
    model: Model | str | None = None
    """A ``Model``, or a model string such as ``"openai:gpt-4.1-mini"`` (see ``stopwise.models.resolve_model``).
    Required: the default ``None`` only lets ``instructions`` be omitted (``Agent("x", model=m)``). A string is
    resolved when the agent is defined, so after construction the attribute holds the ``Model``."""
    tools: Sequence[Tool] = ()
    """The tools the model may call (kept as a tuple)."""
    max_steps: int | None = 50
    """Model calls allowed per run leg; ``None`` disables the cap."""
    stop_when: Any = None
    """A predicate of the step, a ``StopCondition``, or a list of them (any true stops)."""
    output_type: type[BaseModel] | None = None
    """A pydantic model the final answer must validate against; the cap then enters forced completion."""
    max_completion_retries: int = 2
    """Forced-completion calls allowed when output is missing or invalid."""
    stop_guard: StopGuard | None = None
    """Code consulted on a natural finish: stop, continue with feedback, or fail (see ``StopGuard``)."""
    on_max_steps: Literal["fail", "wrap_up"] = "fail"
    """At the cap without an output type: ``"fail"`` is a typed cut-off; ``"wrap_up"`` makes one tool-less call
    asking for a final answer (reason ``max_steps_wrapped_up``)."""
    guardrails: Guardrails | None = None
    """Checks at the run's four boundaries: input, tool call, tool result, output (see ``Guardrails``)."""
    max_tool_errors: int = 3
    """Consecutive failed results from one tool that end the run (``tool_error_streak``)."""
    middleware: Sequence[Middleware] = ()
    """Wrappers applied to every model call of this agent, forced-completion and wrap-up calls included."""
    guardian: Guardian | None = None
    """An independent evaluator asked typed questions every turn, with a threshold policy in code."""

    stop_condition: StopCondition | None = field(init=False, repr=False)
    tool_map: Mapping[str, Tool] = field(init=False, repr=False)
    tool_specs: tuple[ToolSpec, ...] = field(init=False, repr=False)
    output_schema: Mapping[str, Any] | None = field(init=False, repr=False)
    caller: Model = field(init=False, repr=False)
    """The model with the middleware applied: what the loop calls."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("name", "must be a non-empty string")
        if not isinstance(self.instructions, str):
            raise ConfigError("instructions", f"must be a string, got {type(self.instructions).__name__}")
        if self.model is None:
            raise ConfigError("model", "is required: pass model=... (a Model, or a string such as 'openai:gpt-4.1')")
        # A model string ("openai:gpt-4.1-mini") is resolved here, so a bad one or a missing key fails now.
        model = resolve_model(self.model) if isinstance(self.model, str) else self.model
        object.__setattr__(self, "model", model)
        if not callable(getattr(model, "generate", None)):
            raise ConfigError(
                "model", f"must have an async generate(request) method or be a model string, got {self.model!r}"
            )
        if self.max_steps is not None and (
            isinstance(self.max_steps, bool) or not isinstance(self.max_steps, int) or self.max_steps < 1
        ):
            raise ConfigError("max_steps", f"must be an int >= 1 or None, got {self.max_steps!r}")
        retries = self.max_completion_retries
        if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
            raise ConfigError("max_completion_retries", f"must be an int >= 0, got {self.max_completion_retries!r}")
        if self.stop_guard is not None and not isinstance(self.stop_guard, StopGuard):
            raise ConfigError("stop_guard", f"must be a StopGuard, got {type(self.stop_guard).__name__}")
        if self.on_max_steps not in ("fail", "wrap_up"):
            raise ConfigError("on_max_steps", f"must be 'fail' or 'wrap_up', got {self.on_max_steps!r}")
        if self.guardrails is not None and not isinstance(self.guardrails, Guardrails):
            raise ConfigError("guardrails", f"must be a Guardrails(...), got {type(self.guardrails).__name__}")
        if self.guardian is not None and not isinstance(self.guardian, Guardian):
            raise ConfigError("guardian", f"must be a Guardian(...), got {type(self.guardian).__name__}")
        errors = self.max_tool_errors
        if isinstance(errors, bool) or not isinstance(errors, int) or errors < 1:
            raise ConfigError("max_tool_errors", f"must be an int >= 1, got {errors!r}")
        object.__setattr__(self, "middleware", tuple(self.middleware))
        object.__setattr__(self, "caller", wrap_model(model, self.middleware))
        tools = tuple(self.tools) if isinstance(self.tools, Iterable) else None
        if tools is None:
            raise ConfigError("tools", "must be a list of tools")
        tool_map: dict[str, Tool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise ConfigError("tools", f"{t!r} is not a Tool: decorate the function with @tool")
            if t.name in tool_map:
                raise ConfigError("tools", f"duplicate tool name {t.name!r}")
            tool_map[t.name] = t
        object.__setattr__(self, "tools", tools)
        object.__setattr__(self, "tool_map", tool_map)
        object.__setattr__(self, "tool_specs", tuple(t.spec for t in tools))
        condition = None if self.stop_when is None else as_condition(self.stop_when)
        object.__setattr__(self, "stop_condition", condition)
        schema = None
        if self.output_type is not None:
            if not (isinstance(self.output_type, type) and issubclass(self.output_type, BaseModel)):
                raise ConfigError("output_type", f"must be a pydantic model class, got {self.output_type!r}")
            schema = TypeAdapter(self.output_type).json_schema()
        object.__setattr__(self, "output_schema", schema)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        timeout: float | None = None,
        risk: Risk | str = Risk.UNKNOWN,
        needs_approval: bool = False,
    ) -> Tool:
        """This agent as a tool of another. It runs on the parent's runner and store, in a child session
        keyed on the parent's session and call, so a re-run step reuses a child that already finished.

        A child that fails (a cut-off included) reaches the parent's model as ``{"error": message}``.
        """
        child = self

        async def run_agent(input: str, ctx: RunContext) -> Any:
            return await ctx.runner.run_child(child, input, ctx)

        run_agent.__name__ = name or self.name
        doc = description or f"Delegate a task to the agent {self.name!r}. Pass the task as `input`."
        return _build(run_agent, name or self.name, doc, timeout, risk, needs_approval)
