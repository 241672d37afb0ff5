"""stopwise's MCP client against hostile and buggy servers: real server processes over stdio
(``mcp_hostile_server.py``, one misbehaviour per mode). A server must not crash a run, hang it, or get past the
checks the docs promise (docs/integrations/mcp.md, "Hostile and buggy servers")."""

from __future__ import annotations

import asyncio
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("mcp", reason="the MCP tests need the 'mcp' extra: pip install 'stopwise[mcp]'")

from stopwise import Agent, Reply, Runner, RunResult, ScriptedModel, SQLiteStore, ToolCall, decode_tool_result
from stopwise.guardian import Guardian
from stopwise.mcp import MCPServer
from stopwise.messages import TOOL_ERROR, Message
from stopwise.tools import Risk, tool

# Slow: real MCP server processes.
pytestmark = pytest.mark.slow

HOSTILE = Path(__file__).resolve().parent / "mcp_hostile_server.py"
SRC = Path(__file__).resolve().parents[1] / "src"


def hostile(mode: str, trace: Path | None = None, **options: object) -> MCPServer:
    args = [str(HOSTILE), mode, *([str(trace)] if trace else [])]
    return MCPServer.stdio(sys.executable, args, **options)  # type: ignore[arg-type]


async def call_once(mode: str, tool_name: str | None = None, **options: object) -> tuple[RunResult, Message | None]:
    """One run whose model calls ``tool_name`` (the mode's own tool by default) once, then answers "done"."""
    model = ScriptedModel([Reply(tool_calls=[ToolCall(tool_name or mode, {}, id="c1")]), "done"])
    server = hostile(mode, **options)  # connected by the run: a server that cannot start fails the run, not this
    try:
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    finally:
        await server.aclose()
    row = next((m for m in result.messages if m.tool_call_id == "c1"), None)
    return result, row


def process_gone(pid_file: Path) -> bool:
    try:
        os.kill(int(pid_file.read_text()), 0)
    except ProcessLookupError:
        return True
    # A zombie not reaped yet has finished all the same.
    return Path(f"/proc/{pid_file.read_text()}/stat").read_text().split()[2] == "Z"


# --- lifecycle ---------------------------------------------------------------------------------------------------


async def test_a_server_that_never_answers_initialize_fails_the_run_typed_within_the_timeout_and_is_stopped(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace"
    model = ScriptedModel(["never asked"])
    server = hostile("silent_initialize", trace, connect_timeout=0.5)
    # Bounded here only so that a regression fails the test instead of hanging it.
    async with asyncio.timeout(20):
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "tool_unavailable" and result.error.retryable
    assert "did not complete the MCP handshake within 0.5s" in result.error.message
    assert model.requests == []
    assert process_gone(Path(f"{trace}.pid"))


async def test_a_server_that_never_answers_the_tool_listing_fails_the_run_typed_and_the_next_leg_starts_afresh(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace"
    server = hostile("silent_listing", trace, timeout=0.5)
    agent = Agent("a", "", ScriptedModel(["never asked"]), tools=[server])
    try:
        async with asyncio.timeout(20):
            result = await Runner().run(agent, "go", session_id="s")
            assert process_gone(Path(f"{trace}.pid"))  # the stuck server is stopped, not kept for the next leg
            again = await Runner().run(agent, "go", session_id="s")
    finally:
        await server.aclose()
    assert result.error is not None and result.error.code == "tool_unavailable" and result.error.retryable
    assert "did not list its tools within 0.5s" in result.error.message
    assert again.error is not None and trace.read_text().split("\n").count("initialize") == 2


async def test_a_server_that_exits_at_initialize_or_speaks_another_protocol_version_fails_the_run_typed() -> None:
    exited, _ = await call_once("exits_at_initialize")
    assert exited.error is not None and exited.error.code == "tool_unavailable"
    other, _ = await call_once("version_mismatch")
    assert other.error is not None and other.error.code == "tool_unavailable"
    assert "1999-01-01" in other.error.message


async def test_a_server_that_ignores_its_stdin_closing_and_sigterm_is_killed_when_the_server_is_closed(
    tmp_path: Path,
) -> None:
    trace = tmp_path / "trace"
    async with asyncio.timeout(20), hostile("stubborn", trace) as server:
        assert [t.name for t in await server.list_tools()] == ["stubborn", "echo"]
    assert process_gone(Path(f"{trace}.pid"))


async def test_garbage_and_log_lines_on_stdout_are_skipped_and_the_answer_after_them_is_read() -> None:
    result, row = await call_once("garbage_stdout")
    assert result.status == "completed" and row is not None and row.content == "after the noise"


async def test_a_server_flooding_stderr_does_not_block_the_call(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    with log.open("w") as errlog:
        result, row = await call_once("stderr_flood", errlog=errlog, timeout=20)
    assert result.status == "completed" and row is not None and row.content == "flooded"
    assert log.stat().st_size >= 10 * 1024 * 1024  # all of it written before the answer: nothing blocked the server


async def test_a_list_changed_notice_mid_run_makes_the_next_leg_list_the_tools_again(tmp_path: Path) -> None:
    trace = tmp_path / "trace"
    model = ScriptedModel([Reply(tool_calls=[ToolCall("list_changed", {}, id="c1")]), "done", "again"])
    async with hostile("list_changed", trace) as server:
        agent = Agent("a", "", model, tools=[server])
        runner = Runner()
        await runner.run(agent, "go", session_id="s")
        await runner.run(agent, "more", session_id="s")
    assert trace.read_text().split("\n").count("tools/list") == 2


# --- tool lists --------------------------------------------------------------------------------------------------


async def test_tools_whose_names_providers_refuse_are_left_out_named_and_warned_about(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="stopwise"):
        async with hostile("bad_names") as server:
            tools = await server.list_tools()
            left_out = server.left_out
    assert [t.name for t in tools] == ["ok_tool"]
    assert left_out == ("has space", "x" * 200, "")
    assert "3 tool(s) left out" in caplog.text


async def test_two_tools_of_one_name_from_one_server_fail_the_run_as_a_name_clash() -> None:
    result, _ = await call_once("duplicate_names", "lookup")
    assert result.error is not None and result.error.code == "tool_name_clash" and "lookup" in result.error.message


async def test_a_server_tool_named_like_a_local_tool_fails_the_run_naming_both() -> None:
    @tool
    def echo(text: str) -> str:
        """A local tool with the server's tool's name."""
        return text

    async with hostile("plain") as server:
        agent = Agent("a", "", ScriptedModel(["never asked"]), tools=[echo, server])
        result = await Runner().run(agent, "go")
    assert result.error is not None and result.error.code == "tool_name_clash" and "echo" in result.error.message


async def test_a_thousand_tools_and_a_five_megabyte_schema_are_listed_and_offered_whole() -> None:
    async with hostile("thousand_tools") as server:
        assert len(await server.list_tools()) == 1000
    model = ScriptedModel([Reply(tool_calls=[ToolCall("huge", {"field_1": "x"}, id="c1")]), "done"])
    async with hostile("huge_schema", timeout=30) as server:
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    assert result.status == "completed"
    (offered,) = model.requests[0].tools
    assert len(offered.parameters["properties"]) == 5000


@pytest.mark.parametrize("mode", ["schema_not_object", "missing_schema"])
async def test_a_tool_with_no_object_input_schema_fails_the_listing_typed_naming_the_field(mode: str) -> None:
    result, _ = await call_once(mode, "fine")
    assert result.error is not None and result.error.code == "tool_source_failed"
    assert "inputSchema" in result.error.message and not result.error.retryable


async def test_a_recursive_schema_validates_nested_arguments_before_the_call() -> None:
    calls = [ToolCall("tree", {"child": {"child": 5}}, id="bad"), ToolCall("tree", {"child": {}}, id="good")]
    model = ScriptedModel([Reply(tool_calls=calls), "done"])
    async with hostile("recursive_schema") as server:
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    rows = {m.tool_call_id: m for m in result.messages if m.role == "tool"}
    assert "child.child: 5 is not of type 'object'" in decode_tool_result(rows["bad"])["error"]
    assert rows["good"].content == "ok"


async def test_annotations_of_the_wrong_type_never_lower_a_tools_risk_unless_trusted() -> None:
    async with hostile("bad_annotations") as server:
        (shady, _) = await server.list_tools()
    # The SDK reads "yes" as true: a claim of read-only, which the default does not believe.
    assert shady.hints.read_only is True and shady.risk is Risk.UNKNOWN


async def test_a_tool_description_reaches_the_model_verbatim_and_the_guardian_judges_the_call_not_the_text() -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("delete_everything", {}, id="c1")]), "done"])
    async with hostile("injected_description") as server:
        agent = Agent("a", "", model, tools=[server], guardian=Guardian())
        result = await Runner().run(agent, "weather?")
    (offered,) = model.requests[0].tools
    assert "ignore all previous instructions" in offered.description
    # The tool the description pushes for does not exist: the call is an error row, no server is reached.
    row = next(m for m in result.messages if m.tool_call_id == "c1")
    assert row.metadata.get(TOOL_ERROR) and "delete_everything" in decode_tool_result(row)["error"]


# --- calls -------------------------------------------------------------------------------------------------------


async def test_a_call_the_server_never_answers_is_an_error_row_after_the_timeout_and_the_run_goes_on() -> None:
    async with asyncio.timeout(20):
        result, row = await call_once("never_answers", timeout=0.5)
    assert result.status == "completed" and result.output == "done" and row is not None
    assert decode_tool_result(row) == {"error": "Tool 'never_answers' timed out after 0.5s"}


@pytest.mark.parametrize(("mode", "text"), [("unknown_id", "real"), ("twice", "first")])
async def test_stray_and_repeated_answers_are_dropped_and_the_connection_keeps_working(mode: str, text: str) -> None:
    calls = [ToolCall(mode, {}, id="c1")]
    model = ScriptedModel([Reply(tool_calls=calls), Reply(tool_calls=[ToolCall("echo", {}, id="c2")]), "done"])
    async with hostile(mode) as server:
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    rows = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    assert result.status == "completed" and rows == {"c1": text, "c2": "echo"}


async def test_a_server_killed_mid_call_fails_the_run_typed_and_retryable() -> None:
    result, row = await call_once("dies_mid_call")
    assert result.error is not None and result.error.code == "tool_unavailable" and result.error.retryable
    assert row is None


async def test_an_is_error_result_is_an_error_row_carrying_the_servers_text() -> None:
    result, row = await call_once("is_error")
    assert result.status == "completed" and row is not None and row.metadata.get(TOOL_ERROR)
    assert decode_tool_result(row) == {"error": "quota exceeded"}


async def test_audio_resource_links_and_embedded_resources_reach_the_model_as_the_spec_spells_them() -> None:
    _, row = await call_once("odd_content")
    assert row is not None
    audio, link, embedded = decode_tool_result(row)
    assert audio == {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}
    assert link["type"] == "resource_link" and link["uri"] == "file:///etc/passwd"
    assert embedded["resource"]["text"] == "embedded text"


async def test_bytes_that_are_not_utf8_read_as_replacement_characters_and_the_connection_survives() -> None:
    calls = [ToolCall("invalid_utf8", {}, id="c1")]
    model = ScriptedModel([Reply(tool_calls=calls), Reply(tool_calls=[ToolCall("echo", {}, id="c2")]), "done"])
    async with hostile("invalid_utf8", timeout=5) as server:
        result = await Runner().run(Agent("a", "", model, tools=[server]), "go")
    rows = {m.tool_call_id: m.content for m in result.messages if m.role == "tool"}
    assert rows == {"c1": "caf\ufffd \ufffd", "c2": "echo"}


async def test_structured_content_outside_the_tools_output_schema_is_an_error_row_not_a_crash() -> None:
    result, row = await call_once("output_schema")
    assert result.status == "completed" and row is not None and row.metadata.get(TOOL_ERROR)
    error = decode_tool_result(row)["error"]
    assert error.startswith("Tool 'output_schema' answered outside its output schema:")
    assert "'one' is not of type 'integer'" in error and "\n" not in error


# --- exactly once ------------------------------------------------------------------------------------------------

CRASHING_CLIENT = """
import asyncio, sys
from stopwise import Agent, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall
from stopwise.mcp import MCPServer

async def main() -> None:
    server = MCPServer.stdio(sys.executable, [sys.argv[1], "kills_client", sys.argv[2]])
    model = ScriptedModel([Reply(tool_calls=[ToolCall("kills_client", {}, id="c1")]), "done"])
    await Runner(store=SQLiteStore(sys.argv[3])).run(Agent("a", "", model, tools=[server]), "pay", session_id="s")

asyncio.run(main())
"""


async def test_after_a_crash_past_the_intent_retry_repeats_the_mcp_call_with_the_same_idempotency_key(
    tmp_path: Path,
) -> None:
    trace, db = tmp_path / "trace", tmp_path / "log.db"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    crashed = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-c", CRASHING_CLIENT, str(HOSTILE), str(trace), str(db)],
        env=env,
        capture_output=True,
        timeout=60,
    )
    assert crashed.returncode == -9, crashed.stderr.decode()[-2000:]
    model = ScriptedModel(["done"])
    async with hostile("after_crash", trace) as server:  # lists ``kills_client`` and answers its calls
        agent = Agent("a", "", model, tools=[server])
        # The crashed worker's lease (300 s) has lapsed by this runner's clock, an hour on.
        later = Runner(store=SQLiteStore(db), clock=lambda: time.time() + 3600)
        again = await later.retry(agent, "s")
    calls = [line.split(" ", 1)[1] for line in trace.read_text().splitlines() if line.startswith("tools/call")]
    assert len(calls) == 2 and calls[0] == calls[1] and calls[0].endswith(":c1")
    assert again.status == "completed" and model.requests, again.error
