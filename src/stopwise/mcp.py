"""MCP tool servers as a source of tools: ``Agent(tools=[MCPServer.stdio("notes-server")])``.

Needs the ``mcp`` extra (the official ``mcp`` SDK). A server's tools are listed once per run leg and cached until
the server says its list changed or the application calls ``refresh()``. Each listed tool is a ``Tool`` like one
made with ``@tool``: its arguments are validated against the server's JSON schema before the call, a failure, an
error result or a timeout becomes an error row the model reads, and its MCP annotations become a ``Risk`` the
guardian's risk gate reads (see ``risk_of``). A server that cannot be reached (it died, refused the connection,
did not finish its handshake within ``connect_timeout`` or its listing within ``timeout``) fails the run with
``tool_unavailable``, retryable: the next leg connects again. Each call carries its ``RunContext.idempotency_key``
in the request's ``_meta`` (``IDEMPOTENCY_META_KEY``), for a server to dedupe the call a retry repeats.

The connection is held by a task of its own: the SDK's transports are task groups that must be entered and left
by one task, and a request of a run must fail, not be cancelled, when the server goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar, cast

from pydantic import BaseModel, ConfigDict

from stopwise._checks import check_seconds
from stopwise.context import RunContext
from stopwise.errors import ConfigError
from stopwise.messages import Message, ToolCall, encode_tool_result, error_tool_result
from stopwise.models.base import ToolSpec
from stopwise.tools import Risk, Tool, ToolUnavailable, check_tool_name, parse_args

try:
    import anyio
    import httpx2
    import jsonschema
    import mcp_types
    from mcp import Client, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError("stopwise.mcp needs the 'mcp' extra: pip install 'stopwise[mcp]'") from exc

__all__ = ["IDEMPOTENCY_META_KEY", "MCPServer", "MCPTool", "ToolHints", "risk_of"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ToolHints:
    """A tool's MCP annotations as the server sent them; None where the server said nothing (the specification's
    defaults then apply: not read-only, destructive, not idempotent, open world)."""

    read_only: bool | None = None
    """``readOnlyHint``: the tool does not change its environment."""
    destructive: bool | None = None
    """``destructiveHint``: a change it makes may destroy something (meaningful only when not read-only)."""
    idempotent: bool | None = None
    """``idempotentHint``: calling it again with the same arguments has no further effect."""
    open_world: bool | None = None
    """``openWorldHint``: it reaches beyond a closed domain (the web, other people)."""
    title: str | None = None

    @classmethod
    def of(cls, annotations: mcp_types.ToolAnnotations | None) -> ToolHints:
        if annotations is None:
            return cls()
        a = annotations
        return cls(a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint, a.title)

    def implied_risk(self) -> Risk:
        """The risk class the hints imply, the specification's defaults filling what the server left out."""
        if self.read_only:
            return Risk.READ_ONLY
        return Risk.REVERSIBLE if self.destructive is False else Risk.IRREVERSIBLE


_ORDER = (Risk.READ_ONLY, Risk.REVERSIBLE, Risk.IRREVERSIBLE, Risk.REGULATED)


def risk_of(hints: ToolHints, *, declared: Risk | None = None, trust_annotations: bool = False) -> Risk:
    """The risk class of an MCP tool, for the guardian's risk gate.

    The application's declaration always wins. Otherwise the hints decide (an unannotated tool gets the MCP
    specification's defaults: destructive, so ``irreversible``). Hints come from the server: unless they are
    trusted, a hint can raise the risk but never lower it, so a hint below ``irreversible`` leaves the tool
    ``unknown`` and the guardian judges it by its name, as it does any undeclared tool.
    """
    if declared is not None:
        return declared
    implied = hints.implied_risk()
    if trust_annotations or _ORDER.index(implied) >= _ORDER.index(Risk.IRREVERSIBLE):
        return implied
    return Risk.UNKNOWN


@dataclass(frozen=True, slots=True, kw_only=True)
class MCPTool(Tool):
    """A tool served by an MCP server. Built by ``MCPServer.list_tools``; behaves like any ``Tool``."""

    server: MCPServer
    input_schema: Mapping[str, Any]
    """The JSON schema the server published for the arguments; calls are validated against it."""
    hints: ToolHints = field(default_factory=ToolHints)
    """The server's annotations, kept as sent (``idempotent`` and ``open_world`` are not risk classes)."""
    validator: Any = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_async", True)
        object.__setattr__(self, "spec", ToolSpec(self.name, self.description, dict(self.input_schema)))
        cls = jsonschema.validators.validator_for(self.input_schema, default=jsonschema.Draft202012Validator)
        object.__setattr__(self, "validator", cls(self.input_schema))

    async def invoke(
        self, call: ToolCall, ctx: RunContext, args: Mapping[str, Any] | None = None, *, limit: float | None = None
    ) -> Message:
        """Validate the arguments, call the server, and return the tool row. Raises ``ToolUnavailable`` only when
        the server cannot be reached; everything else the call does wrong is an error row. ``limit`` (the step's
        time budget) bounds the call when it is tighter than the tool's own timeout."""
        if args is None:
            parsed = parse_args(call, self.name)
            if isinstance(parsed, Message):
                return parsed
            args = parsed
        problems = [
            f"{'.'.join(str(p) for p in e.absolute_path) or '(arguments)'}: {e.message}"
            for e in sorted(self.validator.iter_errors(dict(args)), key=lambda e: list(e.absolute_path))
        ]
        if problems:
            message = f"Invalid arguments for tool '{self.name}': {'; '.join(problems)}"
            return error_tool_result(message, tool_call_id=call.id, origin="stopwise")
        timeout = limit if self.timeout is None else self.timeout if limit is None else min(self.timeout, limit)
        try:
            async with asyncio.timeout(timeout):
                result = await self.server.call(self.name, dict(args), idempotency_key=ctx.idempotency_key)
        except TimeoutError:
            return error_tool_result(f"Tool '{self.name}' timed out after {timeout or 0:g}s", tool_call_id=call.id)
        except MCPError as exc:
            return error_tool_result(f"Tool '{self.name}' failed: {exc}", tool_call_id=call.id)
        except _OffSchema as exc:
            return error_tool_result(
                f"Tool '{self.name}' answered outside its output schema: {exc}", tool_call_id=call.id
            )
        text = _text_of(result.content)
        value = result.structured_content
        if not text and value is not None:  # no text beside it (no blocks, or empty ones): the typed result is it
            text = None
        if result.is_error:
            why = "" if value is None else f": {json.dumps(value, ensure_ascii=False, default=str)}"
            return error_tool_result(text or f"Tool '{self.name}' reported an error{why}", tool_call_id=call.id)
        if text is not None:
            return encode_tool_result(text, tool_call_id=call.id)
        if value is None:
            # Spelled as the spec spells them (``mimeType``), so the model reads the blocks the server sent.
            value = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content]
        try:
            return encode_tool_result(value, tool_call_id=call.id)
        except ValueError as exc:  # a server's JSON may spell NaN or Infinity, which the log does not keep
            message = f"Tool '{self.name}' returned a value that cannot be serialised to JSON: {exc}"
            return error_tool_result(message, tool_call_id=call.id)


def _text_of(content: Sequence[Any]) -> str | None:
    """The result's text when every block is text (most tools): the model reads it verbatim. No blocks at all read
    as "", which gives way to the result's structured content when it has one (the spec's typed result)."""
    if not all(isinstance(b, mcp_types.TextContent) for b in content):
        return None
    return "\n".join(b.text for b in content)


class _Connection:
    """One live session with a server, entered and left by a task of its own."""

    def __init__(self) -> None:
        self.client: Client | None = None
        self._closing = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @classmethod
    async def open(cls, make: Callable[[], Client], within: float | None) -> _Connection:
        """Start the transport and the MCP handshake; ``TimeoutError`` when it takes longer than ``within`` seconds."""
        conn = cls()
        ready: asyncio.Future[Client] = asyncio.get_running_loop().create_future()
        conn._task = asyncio.create_task(conn._hold(make, ready))
        try:
            async with asyncio.timeout(within):
                conn.client = await asyncio.shield(ready)
        except BaseException:
            # A server that never answers ``initialize`` holds the handshake forever: the task is cancelled,
            # not asked to close, since it is not yet waiting for the close.
            conn._task.cancel()
            await asyncio.gather(conn._task, return_exceptions=True)
            raise
        return conn

    async def _hold(self, make: Callable[[], Client], ready: asyncio.Future[Client]) -> None:
        try:
            async with make() as client:
                ready.set_result(client)
                await self._closing.wait()
        except BaseException as exc:  # the transport's task group fails as a group when the server dies
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else ConnectionError(repr(exc)))
                ready.exception()  # retrieved: an opener that timed out no longer awaits it
            if isinstance(exc, asyncio.CancelledError) and not self._closing.is_set():
                raise

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def request(self, send: Callable[[Client], Awaitable[T]]) -> T:
        """``send`` on this connection; ``ToolUnavailable`` if the connection ends before the answer."""
        assert self.client is not None and self._task is not None
        pending = asyncio.ensure_future(send(self.client))
        try:
            await asyncio.wait({pending, self._task}, return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            pending.cancel()
            raise
        if not pending.done():
            pending.cancel()
            raise ToolUnavailable("the connection to the MCP server closed")
        return pending.result()

    async def close(self) -> None:
        self._closing.set()
        # A task left over from an event loop that has ended (``run_sync`` twice) is done already: nothing to wait.
        if self._task is not None and not self._task.done():
            # gather() hands back the task's failure instead of raising it; a cancellation of the closer still does.
            await asyncio.gather(self._task, return_exceptions=True)


_GONE = (OSError, EOFError, anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream)
"""What a transport raises when the other end has gone (``ConnectionError`` is an ``OSError``)."""


def _is_gone(exc: BaseException) -> bool:
    """Whether an error says the server cannot be reached (not that it answered with an error)."""
    if isinstance(exc, MCPError):
        return exc.error.code == mcp_types.CONNECTION_CLOSED
    if isinstance(exc, BaseExceptionGroup):
        return all(_is_gone(e) for e in exc.exceptions)
    return isinstance(exc, (*_GONE, httpx2.TransportError))


class MCPServer:
    """An MCP server whose tools an agent may call. Build one with ``MCPServer.stdio`` or ``MCPServer.http``,
    pass it in ``Agent(tools=[...])``, and close it when done (``async with server:`` or ``await
    server.aclose()``); it connects on first use and again after the server went away."""

    def __init__(
        self,
        name: str,
        transport: Callable[[], Any],
        *,
        trust_annotations: bool = False,
        risks: Mapping[str, Risk | str] | None = None,
        timeout: float | None = 30.0,
        connect_timeout: float | None = 60.0,
        needs_approval: Sequence[str] = (),
    ) -> None:
        if not isinstance(name, str) or not name.strip():
            raise ConfigError("mcp server name", f"must be a non-empty string, got {name!r}")
        check_seconds(f"mcp server {name!r}.timeout", timeout)
        check_seconds(f"mcp server {name!r}.connect_timeout", connect_timeout)
        if isinstance(needs_approval, str) or not all(isinstance(n, str) for n in needs_approval):
            # A lone name would otherwise be read as a set of one-letter names.
            raise ConfigError(
                f"mcp server {name!r}.needs_approval", f"must be a list of tool names, got {needs_approval!r}"
            )
        declared: dict[str, Risk] = {}
        for tool_name, risk in (risks or {}).items():
            try:
                declared[tool_name] = Risk(risk)
            except ValueError:
                raise ConfigError(
                    f"mcp server {name!r}.risks[{tool_name!r}]",
                    f"must be one of {[r.value for r in Risk]}, got {risk!r}",
                ) from None
        self._name = name
        self._transport = transport
        self.trust_annotations = trust_annotations
        """Whether the server's annotations may lower a tool's risk (see ``risk_of``)."""
        self.risks: Mapping[str, Risk] = declared
        """The application's own risk classes by tool name: they always win over the server's annotations."""
        self.timeout = timeout
        """Seconds a call may take before it becomes an error row, and a listing before the leg fails
        ``tool_unavailable``; None waits as long as the server does."""
        self.connect_timeout = connect_timeout
        """Seconds starting the server and the MCP handshake may take before the leg fails ``tool_unavailable``
        (a server started by ``npx`` or ``uvx`` may first download itself); None waits."""
        self.needs_approval = frozenset(needs_approval)
        """Tool names whose every call waits for a human, whatever the guardian says."""
        self._conn: _Connection | None = None
        self._lock = asyncio.Lock()
        self._listing: tuple[MCPTool, ...] | None = None
        self.left_out: tuple[str, ...] = ()
        """The names of the tools the last listing left out because model providers refuse them (see
        ``list_tools``)."""

    @classmethod
    def stdio(
        cls,
        command: str,
        args: Sequence[str] = (),
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        errlog: TextIO | None = None,
        name: str | None = None,
        **options: Any,
    ) -> MCPServer:
        """A server started as a child process that speaks MCP on its stdin and stdout; its stderr goes to
        ``errlog`` (this process's stderr by default). Options: see ``MCPServer``."""
        if not isinstance(command, str) or not command.strip():
            raise ConfigError(
                "MCPServer.stdio.command", f"must be the program to start, a non-empty string, got {command!r}"
            )
        if isinstance(args, str) or not all(isinstance(a, str) for a in args):
            # A lone string would otherwise be passed as one argument per character.
            raise ConfigError("MCPServer.stdio.args", f"must be a list of strings, got {args!r}")
        # Bytes that are not UTF-8 read as U+FFFD: a strict decoder would end the connection on one bad byte.
        params = StdioServerParameters(
            command=command,
            args=list(args),
            env=dict(env) if env else None,
            cwd=cwd,
            encoding_error_handler="replace",
        )
        label = name or " ".join([command, *args])
        return cls(label, lambda: stdio_client(params, errlog=errlog or sys.stderr), **options)

    @classmethod
    def http(
        cls, url: str, *, headers: Mapping[str, str] | None = None, name: str | None = None, **options: Any
    ) -> MCPServer:
        """A server reached over streamable HTTP at ``url`` (such as ``http://127.0.0.1:8000/mcp``), with these
        headers on every request (an ``Authorization``, say). Options: see ``MCPServer``."""
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            raise ConfigError("MCPServer.http.url", f"must be an http:// or https:// URL, got {url!r}")
        return cls(name or url, lambda: _http(url, dict(headers or {})), **options)

    @property
    def name(self) -> str:
        return self._name

    def __repr__(self) -> str:
        return f"MCPServer({self._name!r})"

    async def __aenter__(self) -> MCPServer:
        await self._connection()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection (a child process ends); the next use connects again."""
        conn, self._conn = self._conn, None
        if conn is not None:
            await conn.close()

    def refresh(self) -> None:
        """Forget the cached tool listing: the next run leg lists the server's tools again."""
        self._listing = None

    async def list_tools(self) -> tuple[MCPTool, ...]:
        """The server's tools, listed once and cached until ``refresh()``, a reconnection, or the server's
        ``tools/list_changed`` notice. Raises ``ToolUnavailable`` when the server cannot be reached and
        ``ConfigError`` when it publishes a tool whose input schema is not a valid JSON schema. A tool whose name
        model providers refuse (anything but 1 to 64 letters, digits, ``_`` and ``-``: OpenAI's rule, the
        strictest) is left out, named in ``left_out`` and in a warning on the ``stopwise`` logger: offered, it
        would fail every model request of the run."""
        if self._listing is not None and self._conn is not None and self._conn.alive:
            return self._listing
        await self._connection()  # bounded by its own timeout, whose error names the handshake
        tools: list[mcp_types.Tool] = []
        cursor: str | None = None
        while True:
            try:
                async with asyncio.timeout(self.timeout):
                    page = await self._request(functools.partial(_list_page, cursor=cursor))
            except TimeoutError:
                # A server stuck on its listing is likely stuck for good: the next leg starts a fresh one.
                if self._conn is not None:
                    await self._drop(self._conn)
                raise ToolUnavailable(
                    f"MCP server {self._name!r} did not list its tools within {self.timeout:g}s"
                ) from None
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                break
        offered = [t for t in tools if _offerable(t.name)]
        self.left_out = tuple(t.name for t in tools if not _offerable(t.name))
        if self.left_out:
            _log.warning(
                "stopwise: MCP server %r: %d tool(s) left out, their names are refused by model providers: %s",
                self._name,
                len(self.left_out),
                ", ".join(repr(n[:80]) for n in self.left_out),
            )
        self._listing = tuple(self._tool(t) for t in offered)
        return self._listing

    def _tool(self, t: mcp_types.Tool) -> MCPTool:
        schema = dict(t.input_schema)
        try:
            jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ConfigError(
                f"mcp server {self._name!r}: tool {t.name!r}.inputSchema", f"is not a valid JSON schema: {exc.message}"
            ) from None
        hints = ToolHints.of(t.annotations)
        return MCPTool(
            name=t.name,
            description=t.description or "",
            fn=_never_called,
            args_model=_NoArgs,
            timeout=self.timeout,
            risk=risk_of(hints, declared=self.risks.get(t.name), trust_annotations=self.trust_annotations),
            needs_approval=t.name in self.needs_approval,
            server=self,
            input_schema=schema,
            hints=hints,
        )

    async def call(
        self, tool: str, args: dict[str, Any], *, idempotency_key: str | None = None
    ) -> mcp_types.CallToolResult:
        """Call one tool. Raises ``ToolUnavailable`` when the server cannot be reached, ``MCPError`` when it
        answers with a protocol error. ``idempotency_key``, when given, travels in the request's ``_meta`` as
        ``IDEMPOTENCY_META_KEY``: a server that dedupes on it runs a call a retry repeats once."""
        meta: mcp_types.RequestParamsMeta | None = None
        if idempotency_key is not None:
            meta = cast("mcp_types.RequestParamsMeta", {IDEMPOTENCY_META_KEY: idempotency_key})
        return await self._request(functools.partial(_call, tool=tool, args=args, meta=meta))

    async def _request(self, send: Callable[[Client], Awaitable[T]]) -> T:
        conn = await self._connection()
        try:
            return await conn.request(send)
        except ToolUnavailable as exc:
            await self._drop(conn)
            raise ToolUnavailable(f"MCP server {self._name!r}: {exc}") from exc
        except BaseException as exc:
            if not _is_gone(exc):
                raise
            await self._drop(conn)
            raise ToolUnavailable(f"MCP server {self._name!r} cannot be reached: {_describe(exc)}") from exc

    async def _connection(self) -> _Connection:
        async with self._lock:
            if self._conn is not None and self._conn.alive:
                return self._conn
            if self._conn is not None:
                await self._drop(self._conn)
            try:
                self._conn = await _Connection.open(self._client, self.connect_timeout)
            except TimeoutError:
                raise ToolUnavailable(
                    f"MCP server {self._name!r} did not complete the MCP handshake within {self.connect_timeout:g}s"
                ) from None
            except Exception as exc:
                raise ToolUnavailable(f"MCP server {self._name!r} cannot be reached: {_describe(exc)}") from exc
            return self._conn

    async def _drop(self, conn: _Connection) -> None:
        if self._conn is conn:
            self._conn, self._listing = None, None
        await conn.close()

    def _client(self) -> Client:
        # The SDK's response cache is off: this class caches the listing itself, and a call must reach the server.
        return Client(self._transport(), message_handler=self._on_message, cache=None)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, mcp_types.ToolListChangedNotification):
            self._listing = None


async def _list_page(client: Client, *, cursor: str | None) -> mcp_types.ListToolsResult:
    return await client.list_tools(cursor=cursor)


def _offerable(name: str) -> bool:
    """Whether a model provider takes ``name`` as a tool's name: the rule a stopwise tool's name is held to
    (``check_tool_name``: OpenAI's, the strictest of the providers stopwise speaks to)."""
    try:
        check_tool_name(name)
    except ConfigError:
        return False
    return True


_log = logging.getLogger("stopwise")

IDEMPOTENCY_META_KEY = "io.stopwise/idempotency-key"
"""The ``_meta`` key of a ``tools/call`` request that carries the call's ``RunContext.idempotency_key``."""


class _OffSchema(Exception):
    """The server's structured content does not match the output schema it published for the tool."""


async def _call(
    client: Client, *, tool: str, args: dict[str, Any], meta: mcp_types.RequestParamsMeta | None
) -> mcp_types.CallToolResult:
    try:
        return await client.call_tool(tool, args, meta=meta)
    except RuntimeError as exc:
        first = str(exc).splitlines()[0] if str(exc) else ""
        if not first.startswith(_OFF_SCHEMA_MESSAGES) and "has an output schema but" not in first:
            raise
        raise _OffSchema(first) from exc


_OFF_SCHEMA_MESSAGES = ("Invalid structured content returned by tool", "Invalid schema for tool")
"""How the SDK's ``validate_tool_result`` words a result outside the tool's ``outputSchema`` (a ``RuntimeError``,
beside "Tool X has an output schema but did not return structured content")."""


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup):
        return "; ".join(_describe(e) for e in exc.exceptions)
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


@contextlib.asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    # The SDK's own defaults: 30 s to connect or write, 300 s to read (a server may hold a stream open).
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


async def _never_called(**_: Any) -> Any:  # pragma: no cover - MCPTool.invoke calls the server instead
    raise RuntimeError("an MCP tool is called through its server")


class _NoArgs(BaseModel):
    """Stands in for ``Tool.args_model``: an MCP tool's arguments are validated against the server's schema."""

    model_config = ConfigDict(extra="allow")
