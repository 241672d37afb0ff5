"""Shared harness for the stopwise benchmarks: one adapter per agent framework.

Every adapter drives the same scripted conversation:

* the fake model is called once per step; on steps 1..N-1 it asks for one call of the
  tool ``bump(n)``, on step N it answers with the final text ``"done"``;
* the tool is the same instant ``async`` function in every framework (``n -> n + 1``),
  so no framework pays a thread hop that the others don't;
* the fake models keep no history scan: the step counter lives in a per-run
  :class:`Script` found through a :class:`contextvars.ContextVar`, so each model does the
  same O(1) work per step, and concurrent runs (``asyncio.gather``) each get their own
  counter because every task owns a copy of the context.

After each run the harness checks that the model was called exactly N times, the tool
exactly N-1 times, and that the run ended with the final answer, so a framework that
silently stops early (a turn limit, a recursion limit) is reported as an error rather than
as a fast result.

Peers are imported lazily, inside :meth:`Adapter.build`, so that a missing package only
skips that framework and never drags its import cost into another framework's numbers
(the concurrency benchmark runs each framework in its own process for the same reason).
"""

import asyncio
import contextvars
import importlib.metadata
import inspect
import json
import math
import os
import sqlite3
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

INSTALL_HINT = "not installed (pip install -e '.[bench]')"
TOOL_NAME = "bump"
FINAL_TEXT = "done"


class NotInstalled(Exception):
    """Raised by :meth:`Adapter.build` when the framework cannot be imported."""


class ScriptError(AssertionError):
    """A run did not follow the script (wrong number of model or tool calls, wrong answer)."""


# --------------------------------------------------------------------------------------
# The script shared by every framework
# --------------------------------------------------------------------------------------


@dataclass
class Script:
    """Per-run state: how many model and tool calls this run has made so far."""

    steps: int
    yield_per_step: bool = False
    model_calls: int = 0
    tool_calls: int = 0

    def next_action(self) -> int | None:
        """Advance one model step: the ``n`` to pass to the tool, or ``None`` for the final answer."""
        k = self.model_calls
        self.model_calls = k + 1
        return k if k < self.steps - 1 else None


_SCRIPT: contextvars.ContextVar[Script] = contextvars.ContextVar("stopwise_bench_script")


def current_script() -> Script:
    try:
        return _SCRIPT.get()
    except LookupError:  # pragma: no cover - would mean a framework dropped the task context
        raise ScriptError("fake model/tool called outside a scripted run (context was not propagated)") from None


async def scripted_step() -> int | None:
    """What every fake model does per call: advance the script, optionally yield to the loop.

    With ``yield_per_step`` the model suspends once (``asyncio.sleep(0)``), as a real model
    call over the network always does; without it nothing in an instant run need ever
    suspend, so ``asyncio.gather`` of many runs may execute them one after another.
    """
    script = current_script()
    if script.yield_per_step:
        await asyncio.sleep(0)
    return script.next_action()


async def bump_impl(n: int) -> int:
    """The instant tool body shared by every framework."""
    current_script().tool_calls += 1
    return n + 1


def dist_version(*names: str) -> str | None:
    for name in names:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


async def _maybe_await(value: Any) -> Any:
    if inspect.isawaitable(value):
        return await value
    return value


# --------------------------------------------------------------------------------------
# Adapters
# --------------------------------------------------------------------------------------


class Adapter:
    """One framework under test.  Subclasses implement :meth:`build` and :meth:`_invoke`."""

    key: str = ""  # short name used on the command line
    label: str = ""  # name printed in the tables
    dists: tuple[str, ...] = ()  # distribution names to read the version from
    is_peer: bool = True

    def __init__(self, steps: int, *, yield_per_step: bool = False) -> None:
        if steps < 1:
            raise ValueError("steps must be >= 1")
        self.steps = steps
        self.yield_per_step = yield_per_step

    @property
    def version(self) -> str:
        return dist_version(*self.dists) or "?"

    async def build(self) -> None:
        """Import the framework and construct the agent (raises :class:`NotInstalled`)."""
        raise NotImplementedError

    async def _invoke(self) -> Any:
        """Run the agent once to completion and return the final text."""
        raise NotImplementedError

    async def run_once(self) -> None:
        """One scripted run, verified against the script."""
        script = Script(self.steps, yield_per_step=self.yield_per_step)
        token = _SCRIPT.set(script)
        try:
            final = await self._invoke()
        finally:
            _SCRIPT.reset(token)
        if script.model_calls != self.steps or script.tool_calls != self.steps - 1:
            raise ScriptError(
                f"{self.label}: expected {self.steps} model calls and {self.steps - 1} tool calls, "
                f"got {script.model_calls} and {script.tool_calls}"
            )
        if final != FINAL_TEXT:
            raise ScriptError(f"{self.label}: expected final output {FINAL_TEXT!r}, got {final!r}")

    async def aclose(self) -> None:
        return None


# ---- stopwise ----------------------------------------------------------------------


class _StopwiseBase(Adapter):
    dists = ("stopwise",)
    is_peer = False
    use_sqlite = False
    offload = False

    async def build(self) -> None:
        try:
            import stopwise
            from stopwise import Agent, FunctionModel, Reply, Runner, ToolCall, tool
        except ImportError as exc:
            raise NotInstalled(f"not installed (pip install -e .): {exc}") from exc

        @tool
        async def bump(n: int) -> int:
            """Add one."""
            return await bump_impl(n)

        # Async like the peers' fake models (stopwise would call a plain ``def`` inline too).
        async def fn(request: Any) -> Any:
            k = await scripted_step()
            if k is not None:
                return Reply(tool_calls=[ToolCall(TOOL_NAME, {"n": k})])
            return Reply(text=FINAL_TEXT)

        self.agent = Agent(name="bench", instructions="x", model=FunctionModel(fn), tools=[bump], max_steps=None)
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        if self.use_sqlite:
            self._tmpdir = tempfile.TemporaryDirectory(prefix="stopwise-bench-")
            path = os.path.join(self._tmpdir.name, "bench.db")
            self.store = stopwise.SQLiteStore(path, offload=True) if self.offload else stopwise.SQLiteStore(path)
            self.runner = Runner(store=self.store)
        else:
            self.store = None
            self.runner = Runner()

    async def _invoke(self) -> Any:
        result = await self.runner.run(self.agent, "go")
        status = getattr(result, "status", None)
        status = getattr(status, "value", status)
        if status != "completed":
            raise ScriptError(f"{self.label}: run ended with status {status!r}")
        steps = getattr(result, "steps", None)
        if steps is not None and not isinstance(steps, int):
            steps = len(steps)
        if steps is not None and steps != self.steps:
            raise ScriptError(f"{self.label}: result.steps == {steps}, expected {self.steps}")
        for attr in ("output", "text", "final_text"):
            value = getattr(result, attr, None)
            if isinstance(value, str):
                return value
        return FINAL_TEXT  # no text attribute to check; the script counters still verified the run

    async def aclose(self) -> None:
        store = getattr(self, "store", None)
        if store is not None:
            close = getattr(store, "aclose", None) or getattr(store, "close", None)
            if close is not None:
                await _maybe_await(close())
        tmpdir = getattr(self, "_tmpdir", None)
        if tmpdir is not None:
            tmpdir.cleanup()


class StopwiseMemory(_StopwiseBase):
    key = "stopwise-memory"
    label = "stopwise (memory)"


class StopwiseSQLite(_StopwiseBase):
    key = "stopwise-sqlite"
    label = "stopwise (SQLite)"
    use_sqlite = True


class StopwiseSQLiteOffload(_StopwiseBase):
    """The SQLite store as it was before its step writes ran on the event loop's thread: every statement on the
    store's worker thread (``SQLiteStore(offload=True)``)."""

    key = "stopwise-sqlite-offload"
    label = "stopwise (SQLite, offload)"
    use_sqlite = True
    offload = True


# ---- pydantic-ai -------------------------------------------------------------------


class PydanticAI(Adapter):
    key = "pydantic-ai"
    label = "pydantic-ai"
    dists = ("pydantic-ai-slim", "pydantic-ai")

    async def build(self) -> None:
        try:
            from pydantic_ai import Agent, Tool
            from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
            from pydantic_ai.models.function import FunctionModel
            from pydantic_ai.usage import RequestUsage, UsageLimits
        except ImportError as exc:
            raise NotInstalled(INSTALL_HINT) from exc

        async def bump(n: int) -> int:
            """Add one."""
            return await bump_impl(n)

        # An async function: FunctionModel runs a plain ``def`` in a worker thread.
        # Usage is reported explicitly, as a real provider does; otherwise FunctionModel
        # re-estimates token counts over the whole history on every step.
        async def model_fn(messages: list[Any], info: Any) -> Any:
            k = await scripted_step()
            if k is not None:
                part: Any = ToolCallPart(TOOL_NAME, {"n": k}, tool_call_id=f"call_{k}")
            else:
                part = TextPart(FINAL_TEXT)
            return ModelResponse(parts=[part], usage=RequestUsage(input_tokens=1, output_tokens=1))

        self.agent = Agent(
            FunctionModel(model_fn),
            instructions="x",
            tools=[Tool(bump, takes_ctx=False)],
            capabilities=self.capabilities(),
        )
        self.limits = UsageLimits(request_limit=None)

    def capabilities(self) -> list[Any]:
        """Capabilities attached to the agent: none for the bare peer (``bench_integrations.py`` adds stopwise)."""
        return []

    async def _invoke(self) -> Any:
        result = await self.agent.run("go", usage_limits=self.limits)
        return result.output


# ---- OpenAI Agents SDK -------------------------------------------------------------


class OpenAIAgents(Adapter):
    key = "openai-agents"
    label = "openai-agents"
    dists = ("openai-agents",)

    async def build(self) -> None:
        try:
            import agents
            from agents import Agent, Runner, function_tool, set_tracing_disabled
            from agents.items import ModelResponse
            from agents.models.interface import Model
            from agents.usage import Usage
            from openai.types.responses import (
                ResponseFunctionToolCall,
                ResponseOutputMessage,
                ResponseOutputText,
            )
        except ImportError as exc:
            raise NotInstalled(INSTALL_HINT) from exc
        del agents

        set_tracing_disabled(True)

        class ScriptedModel(Model):
            async def get_response(self, *args: Any, **kwargs: Any) -> Any:
                k = await scripted_step()
                if k is not None:
                    item: Any = ResponseFunctionToolCall(
                        type="function_call",
                        id=f"fc_{k}",
                        call_id=f"call_{k}",
                        name=TOOL_NAME,
                        arguments=json.dumps({"n": k}),
                    )
                else:
                    item = ResponseOutputMessage(
                        id="msg_final",
                        type="message",
                        role="assistant",
                        status="completed",
                        content=[ResponseOutputText(type="output_text", text=FINAL_TEXT, annotations=[])],
                    )
                return ModelResponse(
                    output=[item],
                    usage=Usage(requests=1, input_tokens=1, output_tokens=1, total_tokens=2),
                    response_id=None,
                )

            def stream_response(self, *args: Any, **kwargs: Any) -> Any:
                raise NotImplementedError("the benchmark does not stream")

        @function_tool
        async def bump(n: int) -> int:
            """Add one."""
            return await bump_impl(n)

        self._runner = Runner
        self.agent = Agent(name="bench", instructions="x", model=ScriptedModel(), tools=[bump])
        self.max_turns = self.steps + 10

    async def _invoke(self) -> Any:
        result = await self._runner.run(self.agent, "go", max_turns=self.max_turns)
        return result.final_output


# ---- LangGraph ---------------------------------------------------------------------


class LangGraph(Adapter):
    key = "langgraph"
    label = "langgraph"
    dists = ("langgraph",)

    @property
    def version(self) -> str:
        lg = dist_version("langgraph") or "?"
        lc = dist_version("langchain-core") or "?"
        return f"{lg} (core {lc})"

    async def build(self) -> None:
        try:
            from langchain_core.language_models.chat_models import BaseChatModel
            from langchain_core.messages import AIMessage
            from langchain_core.outputs import ChatGeneration, ChatResult
            from langchain_core.tools import tool as lc_tool
            from langgraph.graph import END, MessagesState, StateGraph
        except ImportError as exc:
            raise NotInstalled(INSTALL_HINT) from exc

        async def scripted_result() -> Any:
            k = await scripted_step()
            if k is not None:
                msg = AIMessage(
                    content="",
                    tool_calls=[{"name": TOOL_NAME, "args": {"n": k}, "id": f"call_{k}", "type": "tool_call"}],
                )
            else:
                msg = AIMessage(content=FINAL_TEXT)
            return ChatResult(generations=[ChatGeneration(message=msg)])

        class ScriptedChatModel(BaseChatModel):
            @property
            def _llm_type(self) -> str:
                return "stopwise-bench-scripted"

            def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
                raise NotImplementedError("the benchmark only uses the async path")

            # Overridden so the async path does not hop to a thread (the default runs _generate
            # in an executor).
            async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any) -> Any:
                return await scripted_result()

            def bind_tools(self, tools: Any, **kw: Any) -> Any:
                return self

        @lc_tool
        async def bump(n: int) -> int:
            """Add one."""
            return await bump_impl(n)

        model = ScriptedChatModel().bind_tools([bump])

        async def call_model(state: MessagesState) -> dict[str, Any]:
            return {"messages": [await model.ainvoke(state["messages"])]}

        # Same decision as langgraph.prebuilt.tools_condition, but async: LangGraph runs a
        # sync router in a thread executor on every step, a hop the other frameworks don't pay.
        async def route(state: MessagesState) -> str:
            return "tools" if getattr(state["messages"][-1], "tool_calls", None) else END

        # The canonical hand-built tool loop (what create_react_agent builds, minus its
        # optional hooks): agent -> tools -> agent ... until the model stops calling tools.
        graph = StateGraph(MessagesState)
        graph.add_node("agent", call_model)
        self.wire(graph, [bump], route)
        self.app: Any = graph.compile()
        # Each step is two supersteps (agent, tools), three with a node between them.
        self.config = {"recursion_limit": 3 * self.steps + 10}

    def wire(self, graph: Any, tools: list[Any], route: Any) -> None:
        """Add the tool node and the edges after ``agent`` (``bench_integrations.py`` wires stopwise's)."""
        from langgraph.graph import END, START
        from langgraph.prebuilt import ToolNode

        graph.add_node("tools", ToolNode(tools))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", route, ["tools", END])
        graph.add_edge("tools", "agent")

    async def _invoke(self) -> Any:
        state = await self.app.ainvoke({"messages": [("user", "go")]}, config=self.config)
        return state["messages"][-1].content


ADAPTERS: tuple[type[Adapter], ...] = (
    StopwiseMemory,
    StopwiseSQLite,
    StopwiseSQLiteOffload,
    PydanticAI,
    OpenAIAgents,
    LangGraph,
)
ADAPTERS_BY_KEY: dict[str, type[Adapter]] = {a.key: a for a in ADAPTERS}


def select_adapters(keys: Sequence[str] | None) -> list[type[Adapter]]:
    if not keys:
        return list(ADAPTERS)
    unknown = [k for k in keys if k not in ADAPTERS_BY_KEY]
    if unknown:
        raise SystemExit(f"unknown framework(s) {unknown}; choose from {sorted(ADAPTERS_BY_KEY)}")
    return [ADAPTERS_BY_KEY[k] for k in keys]


# --------------------------------------------------------------------------------------
# Small statistics helpers (no numpy dependency)
# --------------------------------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile, ``q`` in [0, 100]."""
    if not values:
        return math.nan
    data = sorted(values)
    if len(data) == 1:
        return data[0]
    pos = (len(data) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = math.ceil(pos)
    return data[lo] + (data[hi] - data[lo]) * (pos - lo)


def raw_commit_ms(path: str, commits: int, clock: Callable[[], float] = time.perf_counter) -> float:
    """Milliseconds per raw two-row WAL commit: an insert of a step-sized log row and an update of the session
    (by ``clock``: wall time, or ``time.process_time`` for this process's CPU time)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS log (session_id TEXT, seq INTEGER, body TEXT, PRIMARY KEY (session_id, seq))"
    )
    conn.execute("CREATE TABLE IF NOT EXISTS sessions (session_id TEXT PRIMARY KEY, state TEXT)")
    conn.execute("INSERT OR IGNORE INTO sessions VALUES ('s', '{}')")
    start_seq = conn.execute("SELECT COALESCE(MAX(seq), 0) FROM log").fetchone()[0]
    body = "x" * 650  # about a plain tool step's log row
    start = clock()
    for i in range(commits):
        conn.execute("BEGIN")
        conn.execute("INSERT INTO log VALUES ('s', ?, ?)", (start_seq + i + 1, body))
        conn.execute("UPDATE sessions SET state = ? WHERE session_id = 's'", ("{}",))
        conn.execute("COMMIT")
    elapsed = clock() - start
    conn.close()
    return elapsed / commits * 1000


def median(values: Sequence[float]) -> float:
    return percentile(values, 50.0)


def describe_error(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    text = " ".join(text.split())
    return text if len(text) <= 160 else text[:157] + "..."


Printer = Callable[[str], None]
