"""A secret a redacting guardrail removed reaches no other sink: not the model's next request, not the log's bytes
on disk (SQLite with its WAL, PostgreSQL rows), not a fork's copy, not the suspension of a call waiting for a
reviewer, not the guardian's records or its judge, not telemetry, not the CLI's ``show`` and ``report``, not the
run's result. Each case puts a real token of a real format (built at run time, so no scanner flags this file) on
one hook and runs end to end."""

from __future__ import annotations

import asyncio
import random
import string
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from _pgcluster import Server
from stopwise import Agent, Approve, Reject, Reply, Runner, ScriptedModel, SQLiteStore, Store, ToolCall, tool
from stopwise.cli import main
from stopwise.guardian import Guardian, JudgeEvaluator
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardrails import Block, Guardrails, Rewrite, ToolCallContext, block_pii, redact_pii, redact_secrets
from stopwise.models import FunctionModel, ModelRequest
from stopwise.result import RunResult, RunStatus
from stopwise.telemetry import RunTracer
from stopwise.tools import ToolError


def _github_token() -> str:
    """A GitHub personal access token: ``ghp_`` and 36 characters drawn at run time."""
    rng = random.Random(20261202)
    return "ghp" + "_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


SECRET = _github_token()
CARD = "4111 1111" + " 1111 1111"
RECEIVED: list[dict[str, Any]] = []
"""The arguments ``deploy`` ran with, per call."""


@tool
def deploy(token: str) -> str:
    """Deploy with a token.

    Args:
        token: The token.
    """
    RECEIVED.append({"token": token})
    return "deployed"


@tool
def read_env() -> str:
    """Read the environment file."""
    return f"GITHUB_TOKEN={SECRET}\nDEBUG=false\n"


@tool
def login() -> str:
    """Log in."""
    raise ToolError(f"the token {SECRET} was refused")


@tool(needs_approval=True)
def deploy_reviewed(token: str) -> str:
    """Deploy with a token, once a person approved.

    Args:
        token: The token.
    """
    RECEIVED.append({"token": token})
    return "deployed"


@dataclass(frozen=True)
class Case:
    """One hook with the secret in what it guards: the agent's replies and tools, and the task."""

    hook: str
    replies: tuple[Reply | str, ...]
    task: str
    tools: tuple[Any, ...] = ()

    def agent(self, model: Any, guardrail: Any = None, **kw: Any) -> Agent:
        guardrails = Guardrails(**{self.hook: guardrail or redact_secrets()})
        return Agent("ops", "Deploy carefully.", model, tools=list(self.tools), guardrails=guardrails, **kw)


CASES = {
    "input": Case("on_input", ("Deployed.",), f"Deploy with the token {SECRET} please."),
    "tool_call": Case(
        "on_tool_call", (Reply(tool_calls=[ToolCall("deploy", {"token": SECRET})]), "Deployed."), "Deploy.", (deploy,)
    ),
    "tool_result": Case(
        "on_tool_result", (Reply(tool_calls=[ToolCall("read_env", {})]), "The env sets a token."), "Read.", (read_env,)
    ),
    "tool_error": Case(
        "on_tool_result", (Reply(tool_calls=[ToolCall("login", {})]), "The login failed."), "Log in.", (login,)
    ),
    "output": Case("on_output", (f"Your token is {SECRET}.",), "Which token do I have?"),
}


def _disk(folder: Path) -> bytes:
    """Every byte of the SQLite database and its WAL and shared-memory files."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.name.startswith("log.db"))


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


def _tracer(exporter: InMemorySpanExporter) -> RunTracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return RunTracer(provider)


def _requests(model: ScriptedModel) -> str:
    return "\n".join(repr(m) for r in model.requests for m in r.messages)


async def _run(store: Store, case: Case, **runner: Any) -> tuple[RunResult, ScriptedModel]:
    model = ScriptedModel([*case.replies, "Forked."])
    result = await Runner(store, **runner).run(case.agent(model), case.task, session_id="s")
    assert result.status is RunStatus.COMPLETED, result.error
    assert any(g.action == "rewrite" for g in result.guardrails)
    return result, model


async def _run_and_fork(folder: Path, case: Case, tracer: RunTracer) -> tuple[RunResult, ScriptedModel, bytes]:
    """The run, its model, and the database's bytes while the store is open (its WAL not yet copied back)."""
    store = SQLiteStore(folder / "log.db")
    try:
        result, model = await _run(store, case, on_event=tracer)
        forked = await Runner(store).fork(case.agent(model), "s", result.steps, new_session_id="f", message="Again.")
        assert forked.status is RunStatus.COMPLETED
        assert (folder / "log.db-wal").exists()
        open_bytes = _disk(folder)
    finally:
        await store.close()
    return result, model, open_bytes


@pytest.mark.parametrize("name", list(CASES))
def test_a_redacted_secret_reaches_no_sink(
    name: str, tmp_path: Path, exporter: InMemorySpanExporter, capsys: pytest.CaptureFixture[str]
) -> None:
    # Sync: the CLI runs its own event loop.
    result, model, open_bytes = asyncio.run(_run_and_fork(tmp_path, CASES[name], _tracer(exporter)))
    assert SECRET not in _requests(model), "the model's requests"
    assert SECRET not in repr(result), "the run's result"
    spans = exporter.get_finished_spans()
    assert spans and SECRET not in repr([(s.name, dict(s.attributes or {}), s.events) for s in spans]), "telemetry"
    assert SECRET.encode() not in open_bytes, "the SQLite file and its WAL, the store open"
    assert SECRET.encode() not in _disk(tmp_path), "the SQLite file, the store closed"
    for command in (["show", "s"], ["show", "s", "--json"], ["show", "f"]):
        assert main([*command, "--db", str(tmp_path / "log.db")]) == 0
        assert SECRET not in capsys.readouterr().out, command
    html = tmp_path / "report.html"
    assert main(["report", result.run_id, "--db", str(tmp_path / "log.db"), "-o", str(html)]) == 0
    assert SECRET not in html.read_text(encoding="utf-8"), "the HTML report"


async def test_a_redacted_tool_call_runs_and_is_logged_with_the_redacted_arguments(tmp_path: Path) -> None:
    RECEIVED.clear()
    store = SQLiteStore(tmp_path / "log.db")
    try:
        await _run(store, CASES["tool_call"])
        snapshot = await store.load_session("s")
    finally:
        await store.close()
    assert RECEIVED == [{"token": "[redacted]"}]
    assert snapshot is not None
    [call] = [c for e in snapshot.entries for m in e.messages for c in m.tool_calls]
    assert call.args == {"token": "[redacted]"}


async def test_a_call_waiting_for_approval_is_suspended_with_redacted_arguments_only(tmp_path: Path) -> None:
    RECEIVED.clear()
    call = ToolCall("deploy_reviewed", {"token": SECRET})
    case = Case("on_tool_call", (Reply(tool_calls=[call]), "Deployed."), "Deploy.", (deploy_reviewed,))
    model = ScriptedModel(list(case.replies))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        waiting = await Runner(store).run(case.agent(model), case.task, session_id="s")
        assert waiting.status is RunStatus.SUSPENDED
        [pending] = waiting.pending
        assert pending.args == {"token": "[redacted]"}
        suspended = _disk(tmp_path)
        done = await Runner(store).resume(case.agent(model), "s", {pending.call_id: Approve()})
    finally:
        await store.close()
    assert SECRET.encode() not in suspended, "the suspension record"
    assert done.status is RunStatus.COMPLETED
    assert RECEIVED == [{"token": "[redacted]"}]
    assert SECRET not in _requests(model) and SECRET.encode() not in _disk(tmp_path)


async def _suspend(folder: Path, agent: Agent, task: str) -> str:
    """A run of ``agent`` that waits for a reviewer, in ``folder/log.db``; its run id."""
    store = SQLiteStore(folder / "log.db")
    try:
        waiting = await Runner(store).run(agent, task, session_id="s")
    finally:
        await store.close()
    assert waiting.status is RunStatus.SUSPENDED
    return waiting.run_id


@pytest.mark.slow  # a server process
def test_the_review_page_of_serve_shows_the_redacted_arguments_only(tmp_path: Path) -> None:
    call = ToolCall("deploy_reviewed", {"token": SECRET})
    case = Case("on_tool_call", (Reply(tool_calls=[call]),), "Deploy.", (deploy_reviewed,))
    run_id = asyncio.run(_suspend(tmp_path, case.agent(ScriptedModel(list(case.replies))), case.task))
    pages = _serve_pages(tmp_path, ("/", f"/runs/{run_id}"))
    assert "[redacted]" in pages[1]
    assert not any(SECRET in page for page in pages)


def _serve_pages(folder: Path, paths: tuple[str, ...]) -> list[str]:
    """The pages ``stopwise serve`` gives for ``paths`` over ``folder/log.db``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "stopwise", "serve", "log.db", "--port", "0"],
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().split()[-1]  # "stopwise serve: <url> ...": printed once it listens
        pages = []
        for path in paths:
            with urllib.request.urlopen(url.rstrip("/") + path, timeout=30) as resp:
                pages.append(resp.read().decode())
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return pages


@tool(client=True)
def browser_env() -> str:
    """Read the environment the browser sees (the application runs it and hands the result to ``resume``)."""
    raise AssertionError("a client tool runs at the caller")


async def test_a_client_tools_result_given_to_resume_is_redacted_like_any_tool_result(tmp_path: Path) -> None:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("browser_env", {})]), "The env sets a token."])
    agent = Agent("ops", "", model, tools=[browser_env], guardrails=Guardrails(on_tool_result=redact_secrets()))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        waiting = await Runner(store).run(agent, "Read the browser's env.", session_id="s")
        [pending] = waiting.pending
        done = await Runner(store).resume(agent, "s", results={pending.call_id: f"GITHUB_TOKEN={SECRET}"})
    finally:
        await store.close()
    assert done.status is RunStatus.COMPLETED
    assert [(g.hook.value, g.action) for g in done.guardrails] == [("tool_result", "rewrite")]
    assert "GITHUB_TOKEN=[redacted]" in _requests(model)
    assert SECRET not in _requests(model) and SECRET.encode() not in _disk(tmp_path)


async def test_a_sub_agents_session_keeps_only_what_the_parents_redaction_left(tmp_path: Path) -> None:
    child_model = ScriptedModel([Reply(tool_calls=[ToolCall("read_env", {})]), "The env sets a token."])
    child = Agent("reader", "Read the env.", child_model, tools=[read_env])
    model = ScriptedModel([Reply(tool_calls=[ToolCall("reader", {"input": "Read the env."})]), "Done."])
    parent = Agent("ops", "", model, tools=[child.as_tool()], guardrails=Guardrails(on_tool_result=redact_secrets()))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(parent, "What does the env set?", session_id="s")
    finally:
        await store.close()
    assert result.status is RunStatus.COMPLETED
    assert "GITHUB_TOKEN=[redacted]" in _requests(child_model)
    assert SECRET not in _requests(child_model) and SECRET.encode() not in _disk(tmp_path)


async def test_a_redacting_block_on_a_tool_call_keeps_no_copy_of_its_arguments(tmp_path: Path) -> None:
    def no_tokens(ctx: ToolCallContext) -> Block | None:
        return Block("the call carries a token", redacted=True) if "ghp_" in str(ctx.tool_call.args) else None

    RECEIVED.clear()
    case = CASES["tool_call"]
    model = ScriptedModel(list(case.replies))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(case.agent(model, no_tokens), case.task, session_id="s")
    finally:
        await store.close()
    assert [g.action for g in result.guardrails] == ["block"] and RECEIVED == []
    assert SECRET not in _requests(model) and SECRET.encode() not in _disk(tmp_path)


async def test_a_call_block_pii_refused_is_logged_without_its_arguments(tmp_path: Path) -> None:
    RECEIVED.clear()
    case = Case("on_tool_call", (Reply(tool_calls=[ToolCall("deploy", {"token": CARD})]), "Done."), "Go.", (deploy,))
    model = ScriptedModel(list(case.replies))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(case.agent(model, block_pii()), case.task, session_id="s")
    finally:
        await store.close()
    assert [(g.action, g.reason) for g in result.guardrails] == [
        ("block", "the call's arguments contain a payment card number")
    ]
    assert RECEIVED == []
    assert CARD not in _requests(model) and CARD.encode() not in _disk(tmp_path)


async def test_personal_data_redacted_from_a_tool_call_is_not_logged_either(tmp_path: Path) -> None:
    RECEIVED.clear()
    case = Case("on_tool_call", (Reply(tool_calls=[ToolCall("deploy", {"token": CARD})]), "Done."), "Go.", (deploy,))
    model = ScriptedModel(list(case.replies))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        await Runner(store).run(case.agent(model, redact_pii()), case.task, session_id="s")
    finally:
        await store.close()
    assert RECEIVED == [{"token": "[redacted card]"}]
    assert CARD not in _requests(model) and CARD.encode() not in _disk(tmp_path)


# Not the output hook: the guardian (its judge too) decides on the answer the model proposed, before the output hook
# (by design); what its records keep of that answer is tested below (``..._keep_the_redacted_projection``).
@pytest.mark.parametrize("name", ["input", "tool_call", "tool_result", "tool_error"])
async def test_the_guardians_judge_and_records_never_see_a_redacted_secret(name: str, tmp_path: Path) -> None:
    prompts: list[str] = []

    def judge(request: ModelRequest) -> Reply:
        prompts.extend(m.content for m in request.messages)
        return Reply(text="A 0.01")

    case = CASES[name]
    model = ScriptedModel(list(case.replies))
    agent = case.agent(model, guardian=Guardian(JudgeEvaluator(FunctionModel(judge))))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        await Runner(store).run(agent, case.task, session_id="s")
    finally:
        await store.close()
    assert prompts, "the judge was consulted"
    assert not any(SECRET in p for p in prompts), "the judge's projection"
    assert SECRET.encode() not in _disk(tmp_path), "the guardian's records"


async def _postgres_rows(dsn: str, schema: str) -> str:
    import psycopg

    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        tables = await conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
        )
        text = []
        for (table,) in await tables.fetchall():
            rows = await conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t')
            text += [r[0] for r in await rows.fetchall()]
    return "\n".join(text)


@pytest.mark.parametrize("name", list(CASES))
async def test_a_redacted_secret_is_in_no_postgresql_row(name: str, pg_server: Server) -> None:
    from stopwise.store.postgres import PostgresStore

    dsn = pg_server.new_database("leaks")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema, max_size=2)
    try:
        result, model = await _run(store, CASES[name])
        await Runner(store).fork(CASES[name].agent(model), "s", result.steps, new_session_id="f", message="Again.")
    finally:
        await store.close()
    rows = await _postgres_rows(dsn, schema)
    assert "[redacted]" in rows  # the redacted copy was stored, and read back here
    assert SECRET not in rows


# --- an answer the guardian escalates or fails: stored before (or without) the output hook's last word ----------

QUIET = {"integrity": 0.0, "goal_reached": 0.0, "stagnation": 0.0, "infeasible": 0.0, "drift": {"4": 1.0}}
IN_BAND = {**QUIET, "goal_reached": 0.8}
"""goal_reached at its threshold (t* = 0.8): too close to call, so the guardian escalates the answer to a human."""
ANSWER = f"Your token is {SECRET} (keep it safe)"


def _shout(ctx: Any) -> Rewrite:
    """A rewrite that is not a redaction: it decides after the review."""
    return Rewrite(text=ctx.text.upper())


def _escalating(evaluator: ScriptedEvaluator, guardrail: Any = None, **kw: Any) -> Agent:
    guardrails = Guardrails(on_output=guardrail or [redact_secrets(), _shout])
    return Agent("ops", "", ScriptedModel([ANSWER]), guardian=Guardian(evaluator, **kw), guardrails=guardrails)


async def _escalate_then_approve(store: Store, folder: Path | None = None) -> tuple[RunResult, RunResult, bytes]:
    """The run suspended on the escalated answer, the run once approved, and (with ``folder``) the SQLite bytes
    while the run waited for the reviewer."""
    evaluator = ScriptedEvaluator([IN_BAND])
    agent = _escalating(evaluator)
    waiting = await Runner(store).run(agent, "Which token do I have?", session_id="s")
    suspended = _disk(folder) if folder is not None else b""
    done = await Runner(store).resume(agent, "s", {"guardian:1": Approve()})
    [seen] = evaluator.seen
    assert seen.final == ANSWER  # the guardian decides first, on the answer as the model wrote it
    return waiting, done, suspended


def test_an_answer_the_guardian_escalated_is_stored_and_shown_as_the_redactions_leave_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    async def scenario() -> tuple[RunResult, RunResult, bytes, bytes]:
        store = SQLiteStore(tmp_path / "log.db")
        try:
            waiting, done, suspended = await _escalate_then_approve(store, tmp_path)
            assert (tmp_path / "log.db-wal").exists()
            return waiting, done, suspended, _disk(tmp_path)
        finally:
            await store.close()

    waiting, done, suspended, open_bytes = asyncio.run(scenario())
    # What a reviewer sees: the redaction, and only it (the other rewrite decides after the review).
    assert waiting.status is RunStatus.SUSPENDED and waiting.text == "Your token is [redacted] (keep it safe)"
    assert SECRET not in repr(waiting), "the suspension"
    assert SECRET.encode() not in suspended, "the SQLite file and its WAL while the run waits"
    # Once approved, the output hook has its last word: the redaction holds, the other rewrite applies.
    assert done.status is RunStatus.COMPLETED and done.text == "YOUR TOKEN IS [REDACTED] (KEEP IT SAFE)"
    assert [(g.action, g.name, g.redacted) for g in done.guardrails] == [
        ("rewrite", "redact_secrets", True),
        ("rewrite", "_shout", False),
    ]
    assert SECRET not in repr(done)
    assert SECRET.encode() not in open_bytes and SECRET.encode() not in _disk(tmp_path), "the log, open and closed"
    for command in (["show", "s"], ["show", "s", "--json"]):
        assert main([*command, "--db", str(tmp_path / "log.db")]) == 0
        out = capsys.readouterr().out
        assert SECRET not in out and "[redacted]" in out.lower(), command


async def test_a_rejected_escalation_sends_the_model_the_redacted_answer(tmp_path: Path) -> None:
    model = ScriptedModel([ANSWER, "I cannot say which token you have."])
    guardrails = Guardrails(on_output=redact_secrets())
    agent = Agent("ops", "", model, guardian=Guardian(ScriptedEvaluator([IN_BAND, QUIET])), guardrails=guardrails)
    store = SQLiteStore(tmp_path / "log.db")
    try:
        await Runner(store).run(agent, "Which token do I have?", session_id="s")
        done = await Runner(store).resume(agent, "s", {"guardian:1": Reject("Never repeat a token.")})
    finally:
        await store.close()
    assert done.status is RunStatus.COMPLETED and done.text == "I cannot say which token you have."
    assert "Your token is [redacted] (keep it safe)" in _requests(model)
    assert SECRET not in _requests(model) and SECRET.encode() not in _disk(tmp_path)


async def test_an_answer_block_pii_would_block_waits_for_review_as_its_replacement_and_the_block_decides_after(
    tmp_path: Path,
) -> None:
    agent = Agent(
        "ops",
        "",
        ScriptedModel([f"Your card is {CARD}."]),
        guardian=Guardian(ScriptedEvaluator([IN_BAND])),
        guardrails=Guardrails(on_output=block_pii()),
    )
    store = SQLiteStore(tmp_path / "log.db")
    try:
        waiting = await Runner(store).run(agent, "Which card do I have?", session_id="s")
        suspended = _disk(tmp_path)
        done = await Runner(store).resume(agent, "s", {"guardian:1": Approve()})
    finally:
        await store.close()
    assert waiting.status is RunStatus.SUSPENDED and waiting.text == ""
    assert CARD.encode() not in suspended and CARD.encode() not in _disk(tmp_path)
    assert (done.status, done.completion_reason, done.text) == (RunStatus.COMPLETED, "guardrail_output", "")
    assert [(g.action, g.name) for g in done.guardrails] == [("block", "block_pii")]


async def test_an_answer_the_guardian_fails_as_infeasible_is_stored_redacted(tmp_path: Path) -> None:
    agent = _escalating(ScriptedEvaluator([{**QUIET, "infeasible": 0.99}]), redact_secrets())
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(agent, "Which token do I have?", session_id="s")
    finally:
        await store.close()
    assert (result.status, result.completion_reason) == (RunStatus.FAILED, "infeasible")
    assert result.text == "Your token is [redacted] (keep it safe)"  # the actor's say-so, as the redaction left it
    assert SECRET not in repr(result) and SECRET.encode() not in _disk(tmp_path)


async def test_a_judges_labels_of_a_final_answer_keep_the_redacted_projection(tmp_path: Path) -> None:
    judge = ScriptedEvaluator([{**QUIET, "goal_reached": 0.99}])
    judge_prompts = judge.seen
    agent = _escalating(ScriptedEvaluator([IN_BAND]), redact_secrets(), judge=judge)
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(agent, "Which token do I have?", session_id="s")
        snapshot = await store.load_session("s")
    finally:
        await store.close()
    assert result.status is RunStatus.COMPLETED and result.text == "Your token is [redacted] (keep it safe)"
    assert [p.final for p in judge_prompts] == [ANSWER]  # the judge, a decider, reads the answer as proposed
    assert snapshot is not None
    labels = [r for e in snapshot.entries for r in e.records if r.get("type") == "guardian_label"]
    decisions = [r for e in snapshot.entries for r in e.records if r.get("type") == "guardian"]
    assert len(labels) == 1 and "Your token is [redacted] (keep it safe)" in labels[0]["state"]
    assert labels[0]["state_hash"] == decisions[0]["state_hash"]  # the eval export still pairs them
    assert SECRET.encode() not in _disk(tmp_path)


async def test_an_escalated_answer_is_in_no_postgresql_row(pg_server: Server) -> None:
    from stopwise.store.postgres import PostgresStore

    dsn = pg_server.new_database("leaks")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    store = PostgresStore(dsn, schema=schema, max_size=2)
    try:
        _, done, _ = await _escalate_then_approve(store)
    finally:
        await store.close()
    assert done.status is RunStatus.COMPLETED
    rows = await _postgres_rows(dsn, schema)
    assert "[redacted]" in rows and SECRET not in rows


@pytest.mark.slow  # a server process
def test_the_review_page_of_serve_shows_an_escalated_answer_redacted(tmp_path: Path) -> None:
    run_id = asyncio.run(_suspend(tmp_path, _escalating(ScriptedEvaluator([IN_BAND])), "Which token do I have?"))
    pages = _serve_pages(tmp_path, ("/", f"/runs/{run_id}"))
    assert "Your token is [redacted] (keep it safe)" in pages[1]
    assert not any(SECRET in page for page in pages)


# --- the guardian's repeat count and redacted arguments ------------------------------------------------------


def _token(seed: int) -> str:
    rng = random.Random(seed)
    return "ghp" + "_" + "".join(rng.choice(string.ascii_letters + string.digits) for _ in range(36))


async def _repeats(tokens: list[str]) -> list[int]:
    """The guardian's repeat count per turn of a run that deploys once with each token, then answers."""
    quiet = {**QUIET, "risk": {"read_only": 1.0}}

    def replies(request: ModelRequest) -> Reply:
        if request.step <= len(tokens):
            return Reply(tool_calls=[ToolCall("deploy", {"token": tokens[request.step - 1]})])
        return Reply(text="Deployed.")

    agent = Agent(
        "ops",
        "",
        FunctionModel(replies),
        tools=[deploy],
        guardian=Guardian(ScriptedEvaluator([quiet] * 20)),
        guardrails=Guardrails(on_tool_call=redact_secrets()),
    )
    result = await Runner().run(agent, "Deploy.", session_id="s")
    assert result.status is RunStatus.COMPLETED
    return [d.inputs.repeats for d in result.decisions if d.kind == "turn"]


async def test_calls_with_different_redacted_secrets_are_not_counted_as_repeats() -> None:
    # Logged, all three read deploy(token="[redacted]"): compared as logged, they were "the same call 3 times".
    assert await _repeats([_token(1), _token(2), _token(3)]) == [1, 1, 1, 1]


async def test_a_call_repeated_with_the_same_redacted_secret_still_counts_as_a_repeat() -> None:
    assert await _repeats([SECRET] * 3) == [1, 2, 3, 3]
