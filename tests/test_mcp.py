"""MCP tool servers as a tool source: a real server process (the example's notes server) over stdio and over
streamable HTTP on loopback, the default guardian's risk gate on its annotated tools, and a server killed mid-run."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' extra: pip install 'stopwise[mcp]'")

from stopwise import Agent, FunctionModel, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, decode_tool_result
from stopwise.approvals import Approve
from stopwise.errors import ConfigError
from stopwise.guardian import Guardian, GuardianOutcome
from stopwise.guardian.records import replay
from stopwise.mcp import MCPServer, MCPTool, ToolHints, risk_of
from stopwise.messages import TOOL_ERROR
from stopwise.models import ModelRequest
from stopwise.tools import Risk, tool

# Slow: real MCP server processes. `pytest -m "not slow"` leaves them out; CI runs them.
pytestmark = pytest.mark.slow

SERVER = Path(__file__).resolve().parents[1] / "examples" / "mcp_notes_server.py"
HANDWRITTEN = Path(__file__).resolve().parent / "mcp_handwritten_server.py"


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "groceries.txt").write_text("eggs, flour, milk")
    (folder / "old_draft.txt").write_text("to be thrown away")
    return folder


@contextmanager
def http_process(folder: Path, port: int = 0) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """The notes server over streamable HTTP on a loopback socket bound here and inherited by the child: it
    listens before the child starts, so the first request queues instead of racing the server's start-up."""
    listening = socket.socket()
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", port))
    listening.listen(16)
    fd = listening.fileno()
    process = subprocess.Popen(
        [sys.executable, str(SERVER), str(folder), "--fd", str(fd)], pass_fds=(fd,), stderr=subprocess.DEVNULL
    )
    url = f"http://127.0.0.1:{listening.getsockname()[1]}/mcp"
    listening.close()  # the child holds the socket now: once it dies, nothing listens on the port
    try:
        yield process, url
    finally:
        process.kill()
        process.wait()


@pytest.fixture(params=["stdio", "http"])
async def server(request: pytest.FixtureRequest, notes: Path) -> AsyncIterator[MCPServer]:
    """The notes server over each transport, each a real process."""
    if request.param == "stdio":
        async with MCPServer.stdio(sys.executable, [str(SERVER), str(notes)]) as s:
            yield s
        return
    with http_process(notes) as (_, url):
        async with MCPServer.http(url) as s:
            yield s


def kill_server(folder: Path) -> None:
    os.kill(int((folder / "server.pid").read_text()), signal.SIGKILL)


async def test_a_servers_tools_are_listed_with_their_schemas_and_annotations_as_hints(server: MCPServer) -> None:
    tools = {t.name: t for t in await server.list_tools()}
    assert {"read_note", "delete_note", "write_note", "note_names", "notes_log", "purge_notes"} <= set(tools)
    read = tools["read_note"]
    assert isinstance(read, MCPTool)
    assert read.spec.parameters["required"] == ["name"]
    assert read.hints.read_only is True
    write = tools["write_note"]
    # idempotentHint and openWorldHint are not risk classes: they stay on the tool as the server sent them.
    assert write.hints == ToolHints(read_only=False, destructive=False, idempotent=True)
    assert tools["notes_log"].hints.open_world is False
    # The listing is cached: a second call asks the server nothing and returns the same tools.
    assert await server.list_tools() is await server.list_tools()
    server.refresh()
    assert [t.name for t in await server.list_tools()] == list(tools)


async def test_a_destructive_mcp_tool_is_escalated_by_the_default_guardian_and_runs_only_once_approved(
    server: MCPServer, notes: Path, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("delete_note", {"name": "old_draft"}, id="d1")]), "The draft is gone."]
    )
    agent = Agent("tidy", "Tidy the notes.", model, tools=[server], guardian=Guardian())
    runner = Runner(store=SQLiteStore(tmp_path / "log.db"))
    result = await runner.run(agent, "Delete my old draft.", session_id="s")
    assert result.status == "suspended"
    assert [p.call_id for p in result.pending] == ["d1"]
    assert (notes / "old_draft.txt").exists()
    (gate,) = [d for d in result.decisions if d.kind == "pre_execution"]
    assert gate.outcome is GuardianOutcome.ESCALATE and gate.escalated == ("risk",)
    assert gate.inputs.declared_risk == "irreversible"
    # The decision log replays to the same outcome, with no server, model or evaluator.
    assert replay(gate).outcome is GuardianOutcome.ESCALATE
    done = await runner.resume(agent, "s", {"d1": Approve()})
    assert done.status == "completed", done.error
    assert not (notes / "old_draft.txt").exists()
    (row,) = [m for m in done.messages if m.tool_call_id == "d1"]
    assert decode_tool_result(row) == "deleted old_draft"


async def test_a_read_only_mcp_tool_runs_under_the_default_guardian_and_its_text_reaches_the_model(
    server: MCPServer,
) -> None:
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("read_note", {"name": "groceries"}, id="r1")]), "The list: eggs, flour, milk."]
    )
    agent = Agent("reader", "Answer from the notes.", model, tools=[server], guardian=Guardian())
    result = await Runner().run(agent, "Read my groceries note.")
    (gate,) = [d for d in result.decisions if d.kind == "pre_execution"]
    assert gate.outcome is GuardianOutcome.CONTINUE
    assert result.status == "completed", [d.reason for d in result.decisions]
    (row,) = [m for m in result.messages if m.tool_call_id == "r1"]
    assert row.content == "eggs, flour, milk" and row.metadata["content_encoding"] == "text"
    # The model was offered the server's tools with the server's schemas.
    offered = {t.name: t for t in model.requests[0].tools}
    assert offered["read_note"].parameters["properties"]["name"]["type"] == "string"


@pytest.mark.parametrize(
    ("hints", "declared", "trusted", "risk"),
    [
        (ToolHints(), None, False, Risk.IRREVERSIBLE),  # unannotated: the specification says destructive
        (ToolHints(read_only=False), None, False, Risk.IRREVERSIBLE),  # destructiveHint defaults to true
        (ToolHints(destructive=True), None, False, Risk.IRREVERSIBLE),
        (ToolHints(read_only=True), None, False, Risk.UNKNOWN),  # a lowering hint: judged by the name instead
        (ToolHints(read_only=False, destructive=False), None, False, Risk.UNKNOWN),
        (ToolHints(read_only=True), None, True, Risk.READ_ONLY),
        (ToolHints(read_only=False, destructive=False), None, True, Risk.REVERSIBLE),
        (ToolHints(destructive=True), Risk.READ_ONLY, False, Risk.READ_ONLY),  # the application's word wins
        (ToolHints(read_only=True), Risk.REGULATED, True, Risk.REGULATED),
    ],
)
def test_annotations_map_to_risk_classes_a_hint_raises_but_never_lowers_unless_trusted(
    hints: ToolHints, declared: Risk | None, trusted: bool, risk: Risk
) -> None:
    assert risk_of(hints, declared=declared, trust_annotations=trusted) is risk


async def test_a_read_only_hint_cannot_lower_a_destructive_name_unless_the_annotations_are_trusted(
    notes: Path,
) -> None:
    calls = [ToolCall("purge_notes", {}, id="p1")]
    async with MCPServer.stdio(sys.executable, [str(SERVER), str(notes)]) as s:
        tools = {t.name: t for t in await s.list_tools()}
        assert tools["purge_notes"].risk is Risk.UNKNOWN and tools["notes_log"].risk is Risk.UNKNOWN
        agent = Agent("a", "", ScriptedModel([Reply(tool_calls=calls)]), tools=[s], guardian=Guardian())
        result = await Runner().run(agent, "clean up")
        # Claimed read-only by the server, but named like a destroyer: the name-based default holds.
        assert result.status == "suspended" and (notes / "groceries.txt").exists()
    trusting = MCPServer.stdio(sys.executable, [str(SERVER), str(notes)], trust_annotations=True)
    async with trusting:
        tools = {t.name: t for t in await trusting.list_tools()}
        assert tools["notes_log"].risk is Risk.READ_ONLY and tools["note_names"].risk is Risk.IRREVERSIBLE
    declared = MCPServer.stdio(sys.executable, [str(SERVER), str(notes)], risks={"note_names": "read_only"})
    async with declared:
        tools = {t.name: t for t in await declared.list_tools()}
        assert tools["note_names"].risk is Risk.READ_ONLY


async def test_arguments_are_validated_against_the_servers_schema_before_the_call(server: MCPServer) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("read_note", {"title": "groceries"}, id="bad")]),
            Reply(tool_calls=[ToolCall("read_note", {"name": 7}, id="typed")]),
            "done",
        ]
    )
    result = await Runner().run(Agent("a", "", model, tools=[server]), "read")
    rows = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert rows["bad"].metadata["origin"] == "stopwise"
    assert "Invalid arguments for tool 'read_note'" in decode_tool_result(rows["bad"])["error"]
    assert "'name' is a required property" in decode_tool_result(rows["bad"])["error"]
    assert "name: 7 is not of type 'string'" in decode_tool_result(rows["typed"])["error"]


async def test_a_tool_error_and_a_timeout_are_error_rows_and_the_run_goes_on(notes: Path) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCall("read_broken", {}, id="e1"), ToolCall("read_slowly", {"seconds": 5}, id="t1")]),
            Reply(tool_calls=[ToolCall("read_note", {"name": "missing"}, id="e2")]),
            "done",
        ]
    )
    async with MCPServer.stdio(sys.executable, [str(SERVER), str(notes)], timeout=0.5) as s:
        result = await Runner().run(Agent("a", "", model, tools=[s]), "read")
    assert result.status == "completed", result.error
    rows = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert all(rows[c].metadata["tool_error"] for c in ("e1", "t1", "e2"))
    assert "read_broken" in decode_tool_result(rows["e1"])["error"]
    assert decode_tool_result(rows["t1"]) == {"error": "Tool 'read_slowly' timed out after 0.5s"}


def _kill_then_read(folder: Path) -> Callable[[ModelRequest], Reply | str]:
    """Reads a note, then (at step 2, the first time only) kills the server before asking for another read, then
    answers."""
    killed: list[bool] = []

    def model(request: ModelRequest) -> Reply | str:
        rows = [m for m in request.messages if m.role == "tool"]
        if not rows:
            return Reply(tool_calls=[ToolCall("read_note", {"name": "groceries"}, id="r1")])
        if len(rows) == 1:
            if not killed:
                kill_server(folder)
                killed.append(True)
            return Reply(tool_calls=[ToolCall("read_note", {"name": "old_draft"}, id="r2")])
        return "Read both."

    return model


async def test_a_stdio_server_killed_mid_run_fails_the_run_typed_and_a_retry_reconnects(
    notes: Path, tmp_path: Path
) -> None:
    runner = Runner(store=SQLiteStore(tmp_path / "log.db"))
    async with MCPServer.stdio(sys.executable, [str(SERVER), str(notes)]) as s:
        agent = Agent("reader", "", FunctionModel(_kill_then_read(notes)), tools=[s])
        result = await runner.run(agent, "read both", session_id="s")
        assert result.status == "failed"
        assert result.error is not None and result.error.code == "tool_unavailable"
        assert result.error.category == "tool" and result.error.retryable
        # The first step's read is kept; the failed step committed nothing.
        assert [m.tool_call_id for m in result.messages if m.role == "tool"] == ["r1"]
        again = await runner.retry(agent, "s")
    assert again.status == "completed", again.error
    assert [m.tool_call_id for m in again.messages if m.role == "tool"] == ["r1", "r2"]


async def test_an_http_server_killed_mid_run_fails_the_run_typed_and_a_retry_succeeds_once_it_is_back(
    notes: Path, tmp_path: Path
) -> None:
    runner = Runner(store=SQLiteStore(tmp_path / "log.db"))
    with http_process(notes) as (process, url):
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        async with MCPServer.http(url) as s:
            agent = Agent("reader", "", FunctionModel(_kill_then_read(notes)), tools=[s])
            result = await runner.run(agent, "read both", session_id="s")
            assert result.status == "failed" and process.wait() == -signal.SIGKILL
            assert result.error is not None and result.error.code == "tool_unavailable" and result.error.retryable
            # Still down: the retry's leg cannot list the tools, and fails the same typed way.
            down = await runner.retry(agent, "s")
            assert down.error is not None and down.error.code == "tool_unavailable"
            with http_process(notes, port):
                again = await runner.retry(agent, "s")
    assert again.status == "completed", again.error
    assert [m.tool_call_id for m in again.messages if m.role == "tool"] == ["r1", "r2"]


async def test_a_server_that_cannot_start_fails_the_run_typed_and_retryable(tmp_path: Path) -> None:
    missing = MCPServer.stdio(str(tmp_path / "no-such-server"))
    agent = Agent("a", "", ScriptedModel(["never asked"]), tools=[missing])
    result = await Runner().run(agent, "hi")
    assert result.status == "failed" and result.steps == 0
    assert result.error is not None and result.error.code == "tool_unavailable" and result.error.retryable


async def test_a_server_tool_named_like_one_of_the_agents_own_fails_the_run_naming_both(server: MCPServer) -> None:
    @tool
    def read_note(name: str) -> str:
        """A local tool with the server's tool's name."""
        return name

    agent = Agent("a", "", ScriptedModel(["never asked"]), tools=[read_note, server])
    result = await Runner().run(agent, "hi")
    assert result.error is not None and result.error.code == "tool_name_clash"
    assert "read_note" in result.error.message and server.name in result.error.message


def test_bad_server_options_are_config_errors_naming_the_field() -> None:
    with pytest.raises(ConfigError, match=r"risks\['x'\]"):
        MCPServer.stdio("server", risks={"x": "harmless"})
    with pytest.raises(ConfigError, match="timeout"):
        MCPServer.http("http://127.0.0.1:1/mcp", timeout=0)
    with pytest.raises(ConfigError, match="connect_timeout"):
        MCPServer.stdio("server", connect_timeout=-1)


async def test_the_decision_log_of_an_mcp_run_replays_with_the_cli(
    server: MCPServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from stopwise.cli import main

    model = ScriptedModel([Reply(tool_calls=[ToolCall("delete_note", {"name": "old_draft"}, id="d1")])])
    db = tmp_path / "log.db"
    agent = Agent("tidy", "", model, tools=[server], guardian=Guardian())
    store = SQLiteStore(db)
    await Runner(store=store).run(agent, "delete the draft")
    await store.close()
    # The command runs its own event loop, so it runs in a thread of its own here.
    assert await asyncio.to_thread(main, ["replay", str(db)]) == 0
    assert "every outcome agrees with the log" in capsys.readouterr().out
    assert await asyncio.to_thread(main, ["guardian", "stats", str(db)]) == 0


async def test_tools_the_application_names_wait_for_a_human_even_without_a_guardian(notes: Path) -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("write_note", {"name": "todo", "text": "milk"}, id="w1")])])
    async with MCPServer.stdio(sys.executable, [str(SERVER), str(notes)], needs_approval=["write_note"]) as s:
        result = await Runner().run(Agent("a", "", model, tools=[s]), "note milk")
    assert result.status == "suspended" and [p.call_id for p in result.pending] == ["w1"]
    assert not (notes / "todo.txt").exists()


async def test_a_result_whose_json_holds_nan_is_an_error_row_the_model_reads_and_the_run_goes_on() -> None:
    """Python's and pydantic's JSON parsers accept a bare NaN, which JSON does not have: a server written without an
    SDK may send one, and the log keeps strict JSON only."""
    model = ScriptedModel([Reply(tool_calls=[ToolCall("reading", {}, id="r1")]), "no reading"])
    async with MCPServer.stdio(sys.executable, [str(HANDWRITTEN)]) as s:
        result = await Runner().run(Agent("a", "", model, tools=[s]), "read the sensor")
    assert result.status == "completed" and result.output == "no reading"
    row = next(m for m in result.messages if m.tool_call_id == "r1")
    assert "cannot be serialised to JSON: NaN is not a JSON number" in decode_tool_result(row)["error"]


async def test_a_result_with_no_content_blocks_is_read_from_its_structured_content() -> None:
    """The spec's typed result: a server may leave ``content`` empty and answer only in ``structuredContent``;
    the model gets that JSON, not an empty text."""
    model = ScriptedModel([Reply(tool_calls=[ToolCall("stats", {}, id="s1")]), "three"])
    async with MCPServer.stdio(sys.executable, [str(HANDWRITTEN)]) as s:
        result = await Runner().run(Agent("a", "", model, tools=[s]), "how many")
    row = next(m for m in result.messages if m.tool_call_id == "s1")
    assert decode_tool_result(row) == {"count": 3, "mean": 1.5, "tags": ["a", "b"]}
    assert not row.metadata.get(TOOL_ERROR)


async def test_an_error_with_no_content_blocks_names_its_structured_content_and_one_with_nothing_reads_empty() -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("refuse", {}, id="e1"), ToolCall("silent", {}, id="q1")]), "ok"])
    async with MCPServer.stdio(sys.executable, [str(HANDWRITTEN)]) as s:
        result = await Runner().run(Agent("a", "", model, tools=[s]), "go")
    error = next(m for m in result.messages if m.tool_call_id == "e1")
    assert error.metadata.get(TOOL_ERROR)
    assert decode_tool_result(error) == {
        "error": """Tool 'refuse' reported an error: {"code": "quota", "retry_after": 30}"""
    }
    silent = next(m for m in result.messages if m.tool_call_id == "q1")
    assert decode_tool_result(silent) == "" and not silent.metadata.get(TOOL_ERROR)
