"""Tools: typed Python functions the model can call.

``@tool`` reads the function's signature and docstring once, builds a pydantic model for its arguments and a
JSON schema for the model, and wraps the call so that every failure (arguments that are not JSON, the wrong
types, an exception, a timeout) becomes an error tool row the model can read. The run goes on.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol, get_type_hints, overload, runtime_checkable

from pydantic_core import ValidationError

from stopwise._checks import check_function, check_seconds, is_async_function
from stopwise.context import RunContext
from stopwise.errors import ConfigError
from stopwise.messages import Message, ToolCall, encode_tool_result, error_tool_result
from stopwise.models.base import ToolSpec
from stopwise.row_copies import own_args

if TYPE_CHECKING:
    from pydantic import BaseModel

__all__ = ["Risk", "Tool", "ToolError", "ToolSource", "ToolUnavailable", "tool"]


class ToolError(Exception):
    """Raise from a tool to fail the call with exactly this message: the model sees ``{"error": message}``."""


class ToolUnavailable(Exception):
    """Raise from a tool when the server behind it cannot be reached (it died, refused, hung up): not the call's
    failure, which the model could work around, but the run's, which fails with ``tool_unavailable`` and can be
    retried once the server is back."""


class Risk(StrEnum):
    """What a tool's effects are, declared by its author; the guardian's risk gate reads it."""

    READ_ONLY = "read_only"
    REVERSIBLE = "reversible"
    IRREVERSIBLE = "irreversible"
    REGULATED = "regulated"
    UNKNOWN = "unknown"
    """Not declared: treated with caution by anything that reads risk."""


@functools.cache
def _args_base() -> type[BaseModel]:
    """The base of every tool's arguments model: made when the first tool is, not at import (defining a pydantic
    model loads pydantic's model machinery and plugins, most of what importing this module would cost)."""
    from pydantic import BaseModel, ConfigDict

    class _ArgsBase(BaseModel):
        model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    return _ArgsBase


@dataclass(frozen=True, slots=True)
class Tool:
    """A callable the model can use. Build one with ``@tool``; call it through ``invoke``."""

    name: str
    description: str
    fn: Callable[..., Any]
    args_model: type[BaseModel]
    timeout: float | None = None
    """Seconds before the call is abandoned and an error row is returned; None waits forever."""
    risk: Risk = Risk.UNKNOWN
    context_param: str | None = None
    """The name of the parameter that receives the ``RunContext``, if the function declares one."""
    needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False
    """True, or a predicate of the arguments: such a call suspends the run until a human decides."""
    approval_ttl: float | None = None
    """Seconds a pending approval stays valid; None never expires."""
    client: bool = False
    """The caller runs it (``@tool(client=True)``): a call suspends the run with the call in ``result.pending``, and
    ``runner.resume(agent, session, results={call_id: value})`` continues it. The function's body never runs: its
    signature and docstring describe the tool."""
    spec: ToolSpec = field(init=False)
    is_async: bool = field(init=False)

    def __post_init__(self) -> None:
        from pydantic import BaseModel

        check_tool_name(self.name)
        if not isinstance(self.description, str):
            raise ConfigError(f"tool {self.name!r}.description", f"must be a string, got {self.description!r}")
        if not callable(self.fn):
            raise ConfigError(f"tool {self.name!r}.fn", f"must be a function, got {self.fn!r}")
        if not (isinstance(self.args_model, type) and issubclass(self.args_model, BaseModel)):
            raise ConfigError(
                f"tool {self.name!r}.args_model", f"must be a pydantic model class, got {self.args_model!r}"
            )
        object.__setattr__(self, "is_async", inspect.iscoroutinefunction(self.fn))
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        object.__setattr__(self, "spec", ToolSpec(self.name, self.description, schema))

    def requires_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with these arguments must wait for a human (``needs_approval``)."""
        if callable(self.needs_approval):
            verdict = self.needs_approval(args)
            if inspect.isawaitable(verdict):
                getattr(verdict, "close", lambda: None)()  # no "never awaited" warning on top of this error
                raise TypeError(
                    f"needs_approval of tool {self.name!r} returned an awaitable: it must be a plain predicate"
                )
            return bool(verdict)
        return bool(self.needs_approval)

    async def invoke(
        self, call: ToolCall, ctx: RunContext, args: Mapping[str, Any] | None = None, *, limit: float | None = None
    ) -> Message:
        """Run the call and return its tool row; never raises for a failure of the call itself.

        ``args`` replaces the call's own arguments when given (a guardrail rewrite, a reviewer's change); the
        function is handed a copy of them, so what it changes in place is neither logged nor sent. ``limit``
        (the step's time budget, ``Limits.step_seconds``) bounds the call when it is tighter than the tool's own
        ``timeout``; past either, the row is a timeout error. A sync tool's worker thread cannot be interrupted:
        it runs to its end in the background and its result is dropped.
        """
        if args is None:
            parsed = parse_args(call, self.name)
            if isinstance(parsed, Message):
                return parsed
            args = parsed
        try:
            # The function is handed a copy of the arguments: pydantic passes an untyped (``Any``) or nested value
            # through as it is, and what the function changed of it would be the logged call's arguments, read by
            # the next request, the guardian's repeat count and a resumed leg.
            kwargs = dict(self.args_model.model_validate(own_args(args)).__dict__)
        except ValidationError as exc:
            return error_tool_result(
                f"Invalid arguments for tool '{self.name}': {_explain(exc)}", tool_call_id=call.id, origin="stopwise"
            )
        if self.context_param is not None:
            kwargs[self.context_param] = ctx
        try:
            # asyncio.timeout tells our limit apart from a TimeoutError the tool raised itself. Sync functions
            # run in a worker thread so a slow tool does not stall other runs on the event loop.
            running = self.fn(**kwargs) if self.is_async else asyncio.to_thread(self.fn, **kwargs)
            timeout = self.timeout if limit is None or (self.timeout is not None and self.timeout <= limit) else limit
            if timeout is None:
                value = await running
            else:
                async with asyncio.timeout(timeout) as scope:
                    value = await running
        except ToolError as exc:
            return error_tool_result(str(exc), tool_call_id=call.id)
        except ToolUnavailable:
            raise
        except TimeoutError as exc:
            if timeout is None or not scope.expired():
                return _raised(self.name, exc, call.id)
            if timeout != self.timeout:
                message = f"Tool '{self.name}' ran past the step's time limit ({timeout:g}s)"
                return error_tool_result(message, tool_call_id=call.id)
            return error_tool_result(f"Tool '{self.name}' timed out after {timeout:g}s", tool_call_id=call.id)
        except Exception as exc:
            return _raised(self.name, exc, call.id)
        try:
            return encode_tool_result(value, tool_call_id=call.id)
        except Exception as exc:
            return error_tool_result(
                f"Tool '{self.name}' returned a value that cannot be serialised to JSON "
                f"({type(value).__name__}): {exc}",
                tool_call_id=call.id,
            )


@runtime_checkable
class ToolSource(Protocol):
    """Tools known only at run time, such as an MCP server's: ``Agent(tools=[...])`` takes a source beside plain
    tools, and the runner lists it once at the start of each run leg (a run, a retry, a resume)."""

    @property
    def name(self) -> str:
        """A name for messages: which source failed or offered a clashing tool."""
        ...

    async def list_tools(self) -> Sequence[Tool]:
        """The tools to offer for this leg; raises ``ToolUnavailable`` when the source cannot be reached."""
        ...


def parse_args(call: ToolCall, tool_name: str) -> Mapping[str, Any] | Message:
    """The call's arguments as a mapping, or the error row the model reads when they are not a JSON object."""
    args: Any = call.args
    if isinstance(args, str):
        raw = args
        try:
            args = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError) as exc:
            return error_tool_result(
                f"Arguments for tool '{tool_name}' are not valid JSON ({exc}): {raw[:200]!r}",
                tool_call_id=call.id,
                origin="stopwise",
            )
    if type(args) is not dict and not isinstance(args, Mapping):
        return error_tool_result(
            f"Arguments for tool '{tool_name}' must be a JSON object, got {type(args).__name__}",
            tool_call_id=call.id,
            origin="stopwise",
        )
    return args


def _raised(name: str, exc: BaseException, call_id: str) -> Message:
    return error_tool_result(f"Tool '{name}' raised {type(exc).__name__}: {exc}", tool_call_id=call_id)


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(arguments)"
        parts.append(f"{loc}: {err['msg']}")
    return "; ".join(parts)


def _build(
    fn: Callable[..., Any],
    name: str | None,
    description: str | None,
    timeout: float | None,
    risk: Risk | str,
    needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
    approval_ttl: float | None = None,
    client: bool = False,
) -> Tool:
    if not callable(fn):
        raise ConfigError("tool", f"expected a function, got {type(fn).__name__}")
    tool_name = name if name is not None else getattr(fn, "__name__", "")
    if name is None and (not tool_name or tool_name == "<lambda>"):
        raise ConfigError("tool.name", "a lambda or nameless callable needs an explicit name=")
    check_tool_name(tool_name)
    if description is not None and not isinstance(description, str):
        raise ConfigError(f"tool {tool_name!r}.description", f"must be a string or None, got {description!r}")
    check_seconds(f"tool {tool_name!r}.timeout", timeout)
    if not (isinstance(needs_approval, bool) or callable(needs_approval)):
        raise ConfigError(f"tool {tool_name!r}.needs_approval", "must be a bool or a predicate of the arguments")
    if callable(needs_approval):
        check_function(f"tool {tool_name!r}.needs_approval", needs_approval, "args")
        if is_async_function(needs_approval):
            # Its coroutine would read as true: every call would wait for a human, whatever it decided.
            raise ConfigError(f"tool {tool_name!r}.needs_approval", "must be a plain (not async) predicate")
    if client and (needs_approval is not False or timeout is not None):
        raise ConfigError(
            f"tool {tool_name!r}.client", "a client tool runs at the caller: no needs_approval or timeout"
        )
    check_seconds(f"tool {tool_name!r}.approval_ttl", approval_ttl)
    try:
        risk = Risk(risk)
    except ValueError:
        raise ConfigError(
            f"tool {tool_name!r}.risk", f"must be one of {[r.value for r in Risk]}, got {risk!r}"
        ) from None

    from pydantic import create_model

    summary, fields, context_param = _signature(fn, tool_name)
    args_model = create_model(f"{tool_name}_arguments", __base__=_args_base(), **fields)
    _check_schema(tool_name, args_model, fields)
    return Tool(
        name=tool_name,
        description=description if description is not None else summary,
        fn=fn,
        args_model=args_model,
        timeout=timeout,
        risk=risk,
        context_param=context_param,
        needs_approval=needs_approval,
        approval_ttl=approval_ttl,
        client=client,
    )


_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""The tool names every provider accepts: OpenAI's function names (Anthropic's allow as many characters or more)."""


def check_tool_name(name: object) -> None:
    """Raise ``ConfigError`` unless ``name`` is one a provider accepts (letters, digits, ``_`` and ``-``, at most
    64 of them): a name the model's API would refuse fails when the tool is defined, not at the first model call."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise ConfigError(
            "tool.name", f"must be 1 to 64 letters, digits, '_' or '-' (what model APIs accept), got {name!r}"
        )


def _check_schema(tool_name: str, args_model: type[BaseModel], fields: Mapping[str, Any]) -> None:
    """Raise ``ConfigError`` naming the parameter whose type has no JSON schema (the model could not be told how
    to fill it), rather than pydantic's error from deep in ``Tool``."""
    from pydantic import create_model
    from pydantic.errors import PydanticUserError

    try:
        args_model.model_json_schema()
    except PydanticUserError:
        for pname, spec in fields.items():
            try:
                create_model("probe", __base__=_args_base(), **{pname: spec}).model_json_schema()
            except PydanticUserError as exc:
                raise ConfigError(
                    f"tool {tool_name!r}",
                    f"parameter {pname!r}: its type has no JSON schema for the model ({str(exc).splitlines()[0]})",
                ) from None
        raise


def _signature(fn: Callable[..., Any], tool_name: str) -> tuple[str, dict[str, Any], str | None]:
    """The tool's description from its docstring, its argument fields, and the parameter that takes the
    ``RunContext`` (if any)."""
    import docstring_parser
    from pydantic import Field

    doc = docstring_parser.parse(inspect.getdoc(fn) or "")
    param_docs = {p.arg_name: p.description for p in doc.params}
    summary = "\n\n".join(s for s in (doc.short_description, doc.long_description) if s)
    try:
        # RunContext resolves even when the caller imported it locally under postponed annotations.
        hints = get_type_hints(fn, localns={"RunContext": RunContext})
    except NameError as exc:
        raise ConfigError(
            f"tool {tool_name!r}", f"cannot resolve a type hint ({exc}); define the types at module level"
        ) from None
    try:
        parameters = inspect.signature(fn).parameters
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"tool {tool_name!r}", f"cannot read the function's signature ({exc})") from None
    fields: dict[str, Any] = {}
    context_param = None
    for pname, param in parameters.items():
        annotation = hints.get(pname, Any)
        if annotation is RunContext:
            context_param = pname
            continue
        if pname.startswith("_"):
            raise ConfigError(f"tool {tool_name!r}", f"parameter {pname!r} starts with '_'; the model cannot set it")
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ConfigError(f"tool {tool_name!r}", f"*args/**kwargs parameter {pname!r} is not supported")
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[pname] = (annotation, Field(default, description=param_docs.get(pname)))
    return summary, fields, context_param


@overload
def tool(fn: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    risk: Risk | str = Risk.UNKNOWN,
    needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
    approval_ttl: float | None = None,
    client: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = None,
    risk: Risk | str = Risk.UNKNOWN,
    needs_approval: bool | Callable[[Mapping[str, Any]], bool] = False,
    approval_ttl: float | None = None,
    client: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a tool from a typed function, sync or async; use bare (``@tool``) or with options.

    The description is the docstring (its parameter sections describe the arguments) unless given. A
    parameter annotated ``RunContext`` receives the run's context and is hidden from the model.
    ``needs_approval`` (True, or a predicate of the arguments) makes a call wait for a human (``Runner.resume``).
    ``client=True`` makes a client-side tool: the caller runs it and resumes the run with its result.
    """
    if fn is not None:
        return _build(fn, name, description, timeout, risk, needs_approval, approval_ttl, client)

    def decorate(f: Callable[..., Any]) -> Tool:
        return _build(f, name, description, timeout, risk, needs_approval, approval_ttl, client)

    return decorate
