"""``Agent``: an immutable definition of what runs; the ``Runner`` decides where and how."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from stopwise._checks import check_async_method, check_function, check_model
from stopwise.context import RunContext
from stopwise.errors import ConfigError
from stopwise.guardian.guardian import Guardian
from stopwise.guardrails.hooks import Guardrails
from stopwise.history import HistoryProcessor
from stopwise.models._registry import resolve_model
from stopwise.models._validate import ReplyLimits
from stopwise.models.base import Model, ToolSpec
from stopwise.models.middleware import Middleware, wrap_model
from stopwise.models.prices import Pricer, pricer_for
from stopwise.output_validators import OutputValidator
from stopwise.step_plan import PrepareStep
from stopwise.stop.conditions import StopCondition, as_condition
from stopwise.stop.guard import StopGuard
from stopwise.stop.limits import Limits
from stopwise.stop.max_steps import MaxStepsHandler
from stopwise.tools import Risk, Tool, ToolSource, _build, check_tool_name

if TYPE_CHECKING:
    from pydantic import BaseModel

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
    tools: Sequence[Tool | ToolSource] = ()
    """The tools the model may call, and sources of tools listed at run time such as an ``MCPServer`` (kept as a
    tuple of the plain tools; the sources go to ``tool_sources``)."""
    max_steps: int | None = 50
    """Model calls allowed per run leg; ``None`` disables the cap."""
    stop_when: Any = None
    """A predicate of the step, a ``StopCondition``, or a list of them (any true stops)."""
    output_type: type[BaseModel] | None = None
    """A pydantic model the final answer must validate against; the cap then enters forced completion."""
    max_completion_retries: int = 2
    """Forced-completion calls allowed when output is missing or invalid, and retries an output validator may ask
    for (both count against it)."""
    output_validators: Sequence[OutputValidator] = ()
    """The application's checks of the final output (``@agent.output_validator``; see
    ``stopwise.output_validators``), run in order before the output guardrails. Kept as a tuple."""
    stop_guard: StopGuard | None = None
    """Code consulted on a natural finish: stop, continue with feedback, or fail (see ``StopGuard``)."""
    on_max_steps: Literal["fail", "wrap_up"] | MaxStepsHandler = "fail"
    """At the cap: ``"fail"`` is a typed cut-off (with an output type: forced completion first); ``"wrap_up"``
    makes one tool-less call asking for a final answer (reason ``max_steps_wrapped_up``; text agents only); a
    function ``handler(ctx: MaxStepsContext)`` returns the final output with no model call (reason
    ``max_steps_handled``, see ``stopwise.stop.max_steps``)."""
    forced_calls_at_cap: int = 1
    """With an output type and no handler: forced-output calls allowed once the cap is reached (at most
    ``max_completion_retries``). One by default, so a capped run ends right after its cap; 0 fails at the cap."""
    guardrails: Guardrails | None = None
    """Checks at the run's four boundaries: input, tool call, tool result, output (see ``Guardrails``)."""
    max_tool_errors: int = 3
    """Consecutive failed results from one tool that end the run (``tool_error_streak``)."""
    middleware: Sequence[Middleware] = ()
    """Wrappers applied to every model call of this agent, forced-completion and wrap-up calls included."""
    guardian: Guardian | None = None
    """An independent evaluator asked typed questions every turn, with a threshold policy in code."""
    reply_limits: ReplyLimits = field(default_factory=ReplyLimits)
    """Bounds on one model reply: argument nesting (64 levels) and size (1 MB); beyond them the run ends
    ``model_error`` before anything of the reply is committed (see ``ReplyLimits``)."""
    stop_at_tools: Sequence[str | Tool] | Literal["any"] | None = None
    """Tools (or tool names) whose successful result ends the run as its output (reason ``tool_output``),
    validated against ``output_type`` when there is one; ``"any"`` stops at whichever tool succeeds first. A call
    that failed does not stop the run: the model reads the error and may call again. Kept as a tuple of names."""
    prepare_step: PrepareStep | None = None
    """Called before each model call to choose its model, tools, tool choice and instructions (see
    ``stopwise.step_plan``); what it chose is recorded in the step's log entry."""
    history_processors: Sequence[HistoryProcessor] = ()
    """Applied in order to the history before every model call: what the model is sent (the log keeps it all;
    see ``stopwise.history``). Kept as a tuple."""
    limits: Limits | None = None
    """Budgets besides ``max_steps``: tool calls, tokens, cost, wall time (see ``Limits``)."""
    end_strategy: Literal["early", "exhaustive"] = "early"
    """What happens to the other calls of a batch that holds a stop-at call: ``"early"`` runs only the first
    stop-at call and answers the others "not run" (if that call fails, the model reads all of it and goes on);
    ``"exhaustive"`` runs the whole batch, and the first stop-at call (in call order) that succeeded ends the run."""
    run_unapproved_siblings: bool = False
    """When a batch holds calls that wait for approval: ``False`` (the default) runs nothing of the batch until
    every call is decided; ``True`` runs the calls that need no approval in the same step (write-ahead, as any
    step's calls), then suspends on the others, as the Vercel AI SDK's tool approval does. The model reads all the
    results together once the last pending call is settled."""

    stop_condition: StopCondition | None = field(init=False, repr=False)
    tool_sources: tuple[ToolSource, ...] = field(init=False, repr=False)
    """Sources listed once at the start of each run leg; their tools join the plain ones for that leg only."""
    tool_map: Mapping[str, Tool] = field(init=False, repr=False)
    tool_specs: tuple[ToolSpec, ...] = field(init=False, repr=False)
    output_schema: Mapping[str, Any] | None = field(init=False, repr=False)
    caller: Model = field(init=False, repr=False)
    """The model with the middleware applied: what the loop calls."""
    pricer: Pricer | None = field(init=False, repr=False)
    """Prices the run's usage when ``limits`` has a cost budget (or names ``priced_as``); None otherwise."""

    def __post_init__(self) -> None:
        # Checked when the agent is defined, in the order a reader meets the fields; each helper names the field.
        self._check_settings()
        model = self._resolve_model()
        self._check_hooks(model)
        self._check_tools()
        self._check_limits(model)
        condition = None if self.stop_when is None else as_condition(self.stop_when)
        object.__setattr__(self, "stop_condition", condition)
        schema = None
        if self.output_type is not None:
            from pydantic import BaseModel, TypeAdapter  # here, not at import: only an output type needs them

            if not (isinstance(self.output_type, type) and issubclass(self.output_type, BaseModel)):
                raise ConfigError("output_type", f"must be a pydantic model class, got {self.output_type!r}")
            schema = TypeAdapter(self.output_type).json_schema()
        object.__setattr__(self, "output_schema", schema)

    def _check_settings(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise ConfigError("name", "must be a non-empty string")
        if not isinstance(self.instructions, str):
            raise ConfigError("instructions", f"must be a string, got {type(self.instructions).__name__}")
        if self.max_steps is not None:
            _check_int("max_steps", self.max_steps, 1, " or None")
        _check_int("max_completion_retries", self.max_completion_retries, 0)
        _check_int("forced_calls_at_cap", self.forced_calls_at_cap, 0)
        _check_int("max_tool_errors", self.max_tool_errors, 1)
        if self.on_max_steps not in ("fail", "wrap_up"):
            if not callable(self.on_max_steps):
                raise ConfigError(
                    "on_max_steps", f"must be 'fail', 'wrap_up' or a handler function, got {self.on_max_steps!r}"
                )
            check_function("on_max_steps", self.on_max_steps, "ctx")
        for field_name, cls in (
            ("stop_guard", StopGuard),
            ("guardrails", Guardrails),
            ("guardian", Guardian),
            ("limits", Limits),
        ):
            value = getattr(self, field_name)
            if value is not None and not isinstance(value, cls):
                raise ConfigError(field_name, f"must be a {cls.__name__}(...), got {type(value).__name__}")
        if not isinstance(self.reply_limits, ReplyLimits):
            raise ConfigError("reply_limits", f"must be a ReplyLimits(...), got {type(self.reply_limits).__name__}")
        if not isinstance(self.run_unapproved_siblings, bool):
            raise ConfigError("run_unapproved_siblings", f"must be True or False, got {self.run_unapproved_siblings!r}")
        if self.end_strategy not in ("early", "exhaustive"):
            raise ConfigError("end_strategy", f"must be 'early' or 'exhaustive', got {self.end_strategy!r}")
        if self.prepare_step is not None:
            if not callable(self.prepare_step):
                raise ConfigError("prepare_step", f"must be a function of the step, got {self.prepare_step!r}")
            check_function("prepare_step", self.prepare_step, "ctx")

    def _resolve_model(self) -> Model:
        if self.model is None:
            raise ConfigError("model", "is required: pass model=... (a Model, or a string such as 'openai:gpt-4.1')")
        # A model string ("openai:gpt-4.1-mini") is resolved here, so a bad one or a missing key fails now.
        model = resolve_model(self.model) if isinstance(self.model, str) else self.model
        object.__setattr__(self, "model", model)
        check_model("model", model)
        return model

    def _check_hooks(self, model: Model) -> None:
        if not isinstance(self.middleware, Iterable) or isinstance(self.middleware, str):
            raise ConfigError("middleware", f"must be a list of middleware functions, got {self.middleware!r}")
        object.__setattr__(self, "middleware", tuple(self.middleware))
        for field_name, what in (("output_validators", "the output"), ("history_processors", "the messages")):
            value = getattr(self, field_name)
            functions = tuple(value) if isinstance(value, Iterable) else None
            if functions is None or not all(callable(f) for f in functions):
                raise ConfigError(field_name, f"must be a list of functions of {what}")
            for f in functions:
                check_function(field_name, f, what.removeprefix("the "))
            object.__setattr__(self, field_name, functions)
        object.__setattr__(self, "caller", wrap_model(model, self.middleware))

    def _check_tools(self) -> None:
        tools = tuple(self.tools) if isinstance(self.tools, Iterable) else None
        if tools is None:
            raise ConfigError("tools", "must be a list of tools")
        tool_map: dict[str, Tool] = {}
        sources = tuple(t for t in tools if isinstance(t, ToolSource))
        for source in sources:
            check_async_method("tools", source, "list_tools")
        for t in (t for t in tools if not isinstance(t, ToolSource)):
            if not isinstance(t, Tool):
                raise ConfigError(
                    "tools", f"{t!r} is not a Tool: decorate the function with @tool (or pass a source: an MCPServer)"
                )
            if t.name in tool_map:
                raise ConfigError("tools", f"duplicate tool name {t.name!r}")
            tool_map[t.name] = t
        object.__setattr__(self, "tools", tuple(tool_map.values()))
        object.__setattr__(self, "tool_sources", sources)
        object.__setattr__(self, "tool_map", tool_map)
        object.__setattr__(self, "tool_specs", tuple(t.spec for t in tool_map.values()))
        object.__setattr__(self, "stop_at_tools", _stop_at_names(self.stop_at_tools, tool_map))

    def _check_limits(self, model: Model) -> None:
        limits = self.limits
        priced = limits is not None and (limits.cost is not None or limits.priced_as is not None)
        pricer = pricer_for(model, limits.priced_as) if priced and limits is not None else None
        object.__setattr__(self, "pricer", pricer)

    def output_validator(self, fn: OutputValidator) -> OutputValidator:
        """Decorator: add ``fn`` to ``output_validators``. Register validators while defining the agent, before
        its first run: the agent is otherwise immutable."""
        if not callable(fn):
            raise ConfigError("output_validators", f"{fn!r} is not a function")
        check_function("output_validators", fn, "output")
        object.__setattr__(self, "output_validators", (*self.output_validators, fn))
        return fn

    def stops_at(self, tool_name: str) -> bool:
        """Whether a successful call of ``tool_name`` ends the run (``stop_at_tools``)."""
        stop_at = self.stop_at_tools
        return stop_at is not None and (stop_at == "any" or tool_name in stop_at)

    def as_tool(
        self,
        name: str | None = None,
        description: str | None = None,
        *,
        timeout: float | None = None,
        risk: Risk | str = Risk.UNKNOWN,
        needs_approval: bool = False,
        inherit_guardrails: bool = True,
        persistent: bool = False,
    ) -> Tool:
        """This agent as a tool of another. It runs on the parent's runner and store, in a child session
        keyed on the parent's session and call, so a re-run step reuses a child that already finished.

        The child sees the parent's ``runtime_context``, and its guardrail contexts carry its sub-agent path
        (``agent_path``). With ``inherit_guardrails`` (the default) the parent loop's tool-call and tool-result
        guardrails run in the child's loop before its own (``guardrails.hooks.for_sub_agent``); ``False`` keeps
        only the child's own.

        ``persistent=True`` makes the child a persistent companion of the parent's session: every call is a new
        run in one companion session, so the child remembers earlier rounds; a companion whose last run did not
        complete (a cut-off fails it) is re-spawned fresh, without that memory, on the next call (seed 002).

        A child that fails (a cut-off included) reaches the parent's model as ``{"error": message}``.
        """
        child = self
        for flag, value in (("inherit_guardrails", inherit_guardrails), ("persistent", persistent)):
            if not isinstance(value, bool):
                raise ConfigError(f"as_tool.{flag}", f"must be True or False, got {value!r}")
        try:
            check_tool_name(self.name if name is None else name)
        except ConfigError as exc:
            hint = "" if name is not None else f" (the agent's name {self.name!r}): pass as_tool(name=...)"
            raise ConfigError("as_tool.name", exc.problem + hint) from None
        companion = (name or self.name) if persistent else None

        async def run_agent(input: str, ctx: RunContext) -> Any:
            return await ctx.runner.run_child(
                child, input, ctx, inherit_guardrails=inherit_guardrails, companion=companion
            )

        run_agent.__name__ = name or self.name
        doc = description or f"Delegate a task to the agent {self.name!r}. Pass the task as `input`."
        return _build(run_agent, name or self.name, doc, timeout, risk, needs_approval)


def _check_int(field_name: str, value: object, least: int, or_else: str = "") -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ConfigError(field_name, f"must be an int >= {least}{or_else}, got {value!r}")


def _stop_at_names(value: object, tool_map: Mapping[str, Tool]) -> tuple[str, ...] | Literal["any"] | None:
    if value is None or value == "any":
        return value
    if isinstance(value, str) or not isinstance(value, Iterable):
        raise ConfigError("stop_at_tools", f"must be a list of tools or tool names, or 'any', got {value!r}")
    names = tuple(v.name if isinstance(v, Tool) else v for v in value)
    if not names:
        raise ConfigError("stop_at_tools", "an empty list never stops; pass None instead")
    unknown = [n for n in names if n not in tool_map]
    if unknown:
        raise ConfigError("stop_at_tools", f"names tools the agent does not have: {', '.join(map(repr, unknown))}")
    return names
