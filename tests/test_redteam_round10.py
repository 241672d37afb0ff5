"""Red team of round 10's stop machinery: the per-call token cap (``Limits.output_tokens`` / ``total_tokens`` as
``ModelRequest.max_output_tokens``) and cycle counting (``stop.repeats.Cycles``, ``is_looping``), attacked as a
hostile model, a careless provider and a demanding user would. Findings are fixed and pinned here; non-findings a
user would wonder about are pinned as they behave. The adapters talk to the local server that speaks the real wire
formats; runs log to SQLite on disk; the crash test kills a real child process."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import signal
import time
import tracemalloc
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("openai")
pytest.importorskip("anthropic")

from pydantic import BaseModel

from _pgcluster import HOW_TO_ENABLE
from provider_server import Answer, ProviderServer, chat_completion
from stopwise import (
    Agent,
    ConfigError,
    FunctionModel,
    Guardian,
    Limits,
    Message,
    Reply,
    Runner,
    RunResult,
    SQLiteStore,
    StopReason,
    Store,
    ToolCall,
    Usage,
    is_looping,
    step_count_is,
    tool,
)
from stopwise.errors import ModelError
from stopwise.events import RunFinished
from stopwise.guardian.conditions import DEFAULT_CONDITIONS
from stopwise.guardian.evaluators.judge import JudgeEvaluator
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.policy import ThresholdPolicy
from stopwise.messages import Role
from stopwise.models import AnthropicModel, ModelRequest, OpenAIModel
from stopwise.stop.guard import Continue, StopGuard, StopGuardContext
from stopwise.stop.repeats import MAX_PERIOD, Cycles, Repeats

ran: list[str] = []


@tool
def read_file(path: str) -> str:
    """Read a file."""
    ran.append(path)
    return f"contents of {path}"


@tool
def search(q: str) -> str:
    """Search."""
    ran.append(f"search {q}")
    return "https://yr.no/oslo"


@tool(name="open")
def open_page(url: str) -> str:
    """Open a page."""
    ran.append(f"open {url}")
    return "(the page did not load)"


@pytest.fixture
def store(tmp_path: Path) -> SQLiteStore:
    ran.clear()
    return SQLiteStore(tmp_path / "log.db")


def _openai(server: ProviderServer) -> OpenAIModel:
    return OpenAIModel("gpt-test", base_url=server.url + "/v1", api_key="sk-test")


def _anthropic(server: ProviderServer, **options: Any) -> AnthropicModel:
    return AnthropicModel("claude-test", base_url=server.url, api_key="sk-ant-test", **options)


def _completion(content: str | None, usage: dict[str, int], *, finish: str = "length", calls: Any = None) -> Any:
    body = chat_completion(content, finish=finish, model="gpt-test")
    if calls:
        body["choices"][0]["message"]["tool_calls"] = calls
    body["usage"] = usage
    return body


_HEAD = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-test"}


def _chunk(delta: dict[str, Any], finish: str | None = None) -> tuple[str | None, Any]:
    return (None, {**_HEAD, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})


async def _finished(runner: Runner, agent: Agent, text: str, **options: Any) -> RunResult:
    events = [e async for e in runner.stream(agent, text, **options) if isinstance(e, RunFinished)]
    return events[0].result


# --- the token cap: providers that do not play along -----------------------------------------------------------


@pytest.mark.parametrize(
    ("usage", "counted"),
    [
        ({"input_tokens": 11, "output_tokens": 50}, Usage(11, 50, 1)),  # the Responses API's names
        ({"input_tokens": 11, "output_tokens": 50, "total_tokens": 61}, Usage(11, 50, 1)),
        ({"total_tokens": 61}, Usage(0, 61, 1)),  # not split: counted as output, never as nothing
        ({"prompt_tokens": 11, "total_tokens": 61}, Usage(11, 50, 1)),
    ],
)
async def test_usage_a_compatible_server_reports_under_other_names_is_counted_and_its_cut_is_the_budgets(
    server: ProviderServer, store: SQLiteStore, usage: dict[str, int], counted: Usage
) -> None:
    """Before, such a usage read as 0 tokens: the budget never moved (a run could spend without end) and a cut at
    the budget's cap failed ``max_tokens``, retryable, as if the adapter's own maximum had cut it."""
    server.answer(Answer(body=_completion("a long ramble that was cut", usage)))
    result = await Runner(store).run(Agent("a", "", _openai(server), limits=Limits(output_tokens=50)), "go")
    assert result.usage == counted
    assert result.completion_reason == "token_limit"
    assert result.error is not None and result.error.code == "token_limit" and not result.error.retryable


async def test_an_openai_stream_that_drops_midway_fails_retryable_and_is_never_an_answer(
    server: ProviderServer, store: SQLiteStore
) -> None:
    """A connection that closes mid-reply ends the SSE stream as quietly as a finished one. Before, the fragment
    (``The answer is``) completed the run as its final answer."""
    server.answer(Answer(events=[_chunk({"role": "assistant", "content": "The answer is"})]))
    result = await _finished(Runner(store), Agent("a", "", _openai(server)), "go", session_id="s")
    assert result.status == "failed" and result.completion_reason == "error"
    assert result.error is not None and result.error.code == "model_error" and result.error.retryable
    assert "cut off" in result.error.message and result.output is None


async def test_an_openai_stream_that_drops_inside_a_tool_call_runs_no_tool(
    server: ProviderServer, store: SQLiteStore
) -> None:
    call = {"index": 0, "id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path"'}}
    more = {"index": 0, "function": {"arguments": ': "/etc/hosts"}'}}
    server.answer(
        Answer(events=[_chunk({"role": "assistant", "tool_calls": [call]}), _chunk({"tool_calls": [more]})]),
    )
    result = await _finished(Runner(store), Agent("a", "", _openai(server), tools=[read_file]), "go")
    assert result.error is not None and result.error.code == "model_error" and result.error.retryable
    assert ran == []


async def test_an_anthropic_stream_that_drops_midway_fails_retryable_and_is_never_an_answer(
    server: ProviderServer, store: SQLiteStore
) -> None:
    start: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 1},
    }
    delta = {"type": "text_delta", "text": "The answer is"}
    server.answer(
        Answer(
            events=[
                ("message_start", {"type": "message_start", "message": start}),
                (
                    "content_block_start",
                    {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                ),
                ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ]
        )
    )
    result = await _finished(Runner(store), Agent("a", "", _anthropic(server)), "go")
    assert result.status == "failed" and result.output is None
    assert result.error is not None and result.error.code == "model_error" and result.error.retryable


@pytest.mark.parametrize(("thinking", "cap", "sent"), [(4000, 2000, 1999), (4000, 900, None), (500, 900, 500)])
async def test_anthropic_extended_thinking_stays_below_a_capped_max_tokens(
    server: ProviderServer, thinking: int, cap: int, sent: int | None
) -> None:
    """The API refuses ``thinking.budget_tokens`` >= ``max_tokens``: before, a run with a token budget and
    extended thinking failed ``model_error`` as soon as less than the thinking budget was left."""
    body = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-test",
        "content": [{"type": "text", "text": "Hi"}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 20, "output_tokens": 3},
    }
    server.answer(Answer(body=body))
    settings = {"thinking": {"type": "enabled", "budget_tokens": thinking}}
    model = _anthropic(server, max_tokens=16000, settings=settings)
    request = ModelRequest(messages=(Message.user("Hi"),), tools=(), step=1, max_output_tokens=cap)
    await model.generate(request)
    sent_body = server.requests[0].body
    assert sent_body["max_tokens"] == cap
    if sent is None:
        assert "thinking" not in sent_body  # under the API's least thinking budget (1024): off for this call
    else:
        assert sent_body["thinking"] == {"type": "enabled", "budget_tokens": sent}
        assert sent_body["thinking"]["budget_tokens"] < sent_body["max_tokens"]


async def test_a_provider_that_ignores_the_cap_and_says_it_cut_is_held_to_the_budget_by_its_usage(
    server: ProviderServer, store: SQLiteStore
) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "/a"}'}}
    usage = {"prompt_tokens": 11, "completion_tokens": 900, "total_tokens": 911}
    server.answer(Answer(body=_completion(None, usage, calls=[call])))
    result = await Runner(store).run(
        Agent("a", "", _openai(server), tools=[read_file], limits=Limits(output_tokens=50)), "go"
    )
    assert server.requests[0].body["max_tokens"] == 50
    assert result.error is not None and result.error.details == {"limit": "output_tokens", "allowed": 50, "used": 900}
    assert ran == []


async def test_a_cut_reply_with_a_whole_and_an_unfinished_call_runs_neither_and_a_retry_reads_that_both_were_cut(
    server: ProviderServer, store: SQLiteStore
) -> None:
    whole = {"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "/a"}'}}
    cut = {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "/b'}}
    usage = {"prompt_tokens": 11, "completion_tokens": 40, "total_tokens": 51}
    server.answer(
        Answer(body=_completion(None, usage, calls=[whole, cut])),
        Answer(
            body=_completion("Both files again, later.", {"prompt_tokens": 30, "completion_tokens": 6}, finish="stop")
        ),
    )
    agent = Agent("a", "", _openai(server), tools=[read_file], limits=Limits(output_tokens=40))
    runner = Runner(store)
    first = await runner.run(agent, "read a and b", session_id="s")
    assert first.completion_reason == "token_limit" and ran == []
    second = await runner.retry(agent, "s")
    assert second.ok and ran == []
    sent = server.requests[1].body
    assert sent["max_tokens"] == 40  # a fresh budget
    rows = {m["tool_call_id"]: m["content"] for m in sent["messages"] if m["role"] == "tool"}
    assert set(rows) == {"c1", "c2"}
    # Both read why: the reply was cut at the budget. Before, the unfinished call's row said its arguments "are not
    # valid JSON", and the model, reading it on the retry, took the cut for a syntax error of its own.
    for row in rows.values():
        assert "Not run: the reply was cut off at the token budget's cap" in row
        assert "Output-token limit (40) reached" in row
    assert "not valid JSON" not in rows["c2"]


class Answerless(BaseModel):
    answer: str


async def test_a_forced_output_call_cut_at_the_cap_fails_token_limit_and_is_not_forced_again(
    store: SQLiteStore,
) -> None:
    caps: list[int | None] = []

    def model(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        if not request.forced_output:
            return Reply(tool_calls=[ToolCall("read_file", {"path": "/a"})], usage=Usage(10, 20))
        return Reply('{"answer": "the file sa', stop_reason=StopReason.MAX_TOKENS, usage=Usage(10, caps[-1] or 0))

    agent = Agent(
        "a",
        "",
        FunctionModel(model),
        tools=[read_file],
        output_type=Answerless,
        max_steps=1,
        limits=Limits(output_tokens=50),
    )
    result = await Runner(store).run(agent, "go")
    assert caps == [50, 30]
    assert result.completion_reason == "token_limit" and result.output is None
    assert result.error is not None and result.error.details == {"limit": "output_tokens", "allowed": 50, "used": 50}


async def test_a_budget_of_zero_allows_one_capped_call_and_ends_token_limit(store: SQLiteStore) -> None:
    caps: list[int | None] = []

    def model(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        return Reply(tool_calls=[ToolCall("read_file", {"path": "/a"})], usage=Usage(10, 1))

    for limits in (Limits(output_tokens=0), Limits(total_tokens=0)):
        result = await Runner(store).run(Agent("a", "", FunctionModel(model), tools=[read_file], limits=limits), "go")
        assert result.completion_reason == "token_limit" and result.steps == 1
    assert caps == [1, 1] and ran == []


async def test_a_budget_of_one_reached_exactly_runs_the_calls_then_the_next_call_goes_past(store: SQLiteStore) -> None:
    caps: list[int | None] = []

    def model(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        return Reply(tool_calls=[ToolCall("read_file", {"path": f"/{len(caps)}"})], usage=Usage(10, 1))

    agent = Agent("a", "", FunctionModel(model), tools=[read_file], limits=Limits(output_tokens=1))
    result = await Runner(store).run(agent, "go")
    assert caps == [1, 1] and ran == ["/1"]  # reaching the budget is within it; going past refuses the calls
    assert result.completion_reason == "token_limit" and result.error is not None
    assert result.error.details == {"limit": "output_tokens", "allowed": 1, "used": 2}


async def test_under_total_tokens_an_input_larger_than_what_is_left_is_caught_after_the_call(
    store: SQLiteStore,
) -> None:
    caps: list[int | None] = []

    def model(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        return Reply(tool_calls=[ToolCall("read_file", {"path": "/a"})], usage=Usage(5000, 3))

    agent = Agent("a", "", FunctionModel(model), tools=[read_file], limits=Limits(total_tokens=1000))
    result = await Runner(store).run(agent, "go")
    assert caps == [1000] and ran == []
    assert result.error is not None and result.error.details == {"limit": "total_tokens", "allowed": 1000, "used": 5003}


@pytest.mark.parametrize(("count_judges", "second_cap"), [(True, 93), (False, 95)])
async def test_the_cap_subtracts_the_judges_output_only_when_the_budget_counts_judges(
    store: SQLiteStore, count_judges: bool, second_cap: int
) -> None:
    caps: list[int | None] = []

    def actor(request: ModelRequest) -> Reply:
        caps.append(request.max_output_tokens)
        if len(caps) == 1:
            return Reply(tool_calls=[ToolCall("read_file", {"path": "/a"})], usage=Usage(10, 5))
        return Reply("done", usage=Usage(10, 5))

    judge = FunctionModel(lambda request: Reply(text="0 0.99", usage=Usage(100, 2, 1)), name="judge-model")
    guardian = Guardian(evaluator=JudgeEvaluator(judge), conditions=DEFAULT_CONDITIONS.only(["drift"]))
    limits = Limits(output_tokens=100, count_judges=count_judges)
    agent = Agent("a", "", FunctionModel(actor), tools=[read_file], guardian=guardian, limits=limits)
    result = await Runner(store).run(agent, "go")
    assert result.ok and caps == [100, second_cap]


# --- the cap after a crash: a real child killed mid-step --------------------------------------------------------


def _capping_reply(request: ModelRequest) -> Reply:
    """Depends only on the messages (a re-run step gets the same reply); logs the cap it was asked with."""
    log = os.environ["SW_CAPS"]
    with open(log, "a") as f:
        f.write(f"{request.max_output_tokens}\n")
    steps = sum(1 for m in request.messages if m.role is Role.ASSISTANT)
    if steps >= 3:
        return Reply("done", usage=Usage(10, 7))
    return Reply(tool_calls=[ToolCall("slow_read", {"path": f"/{steps}"}, id=f"c{steps}")], usage=Usage(10, 11 + steps))


@tool
def slow_read(path: str) -> str:
    """Read a file; the child dies here on the second step."""
    if os.environ.get("SW_KILL") == path:
        os.kill(os.getpid(), signal.SIGKILL)
    return f"contents of {path}"


def _capped_agent() -> Agent:
    return Agent("capped", "", FunctionModel(_capping_reply), tools=[slow_read], limits=Limits(output_tokens=100))


_LEASE = 30.0


def _after_lease() -> float:
    """The recovering runner's clock: past the killed child's lease, as a worker taking over a crashed run."""
    return time.time() + _LEASE + 1


def _open(where: tuple[str, ...]) -> Store:
    """A store from a picklable description: ``("sqlite", path)`` or ``("postgres", dsn, schema)``."""
    if where[0] == "sqlite":
        return SQLiteStore(where[1])
    from stopwise.store.postgres import PostgresStore

    return PostgresStore(where[1], schema=where[2], max_size=2)


async def _run_capped(where: tuple[str, ...]) -> None:
    store = _open(where)
    try:
        await Runner(store, lease_seconds=_LEASE).run(_capped_agent(), "read", session_id="s")
    finally:
        await store.close()


async def _retry_capped(where: tuple[str, ...]) -> RunResult:
    store = _open(where)
    try:
        return await Runner(store, clock=_after_lease).retry(_capped_agent(), "s")
    finally:
        await store.close()


def _child(where: tuple[str, ...], caps: str, kill: str) -> None:
    os.environ["SW_CAPS"], os.environ["SW_KILL"] = caps, kill
    asyncio.run(_run_capped(where))


def _caps(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_the_cap_after_a_sigkill_mid_step_is_the_cap_an_uncrashed_run_asks_with(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str
) -> None:
    """The child dies inside step 2's tool, after the step's intent (its reply and usage) committed and before its
    results: recovery must count that reply's usage once, so every later call is capped as without the crash
    (``Leg.output_cap`` reads only what the log keeps; DBOS rebuilds a leg with the same ``restore_leg``)."""

    def where(name: str) -> tuple[str, ...]:
        if backend == "sqlite":
            return ("sqlite", str(tmp_path / f"{name}.db"))
        dsn = request.getfixturevalue("pg_dsn")
        if dsn is None:
            pytest.skip(HOW_TO_ENABLE)
        return ("postgres", dsn, f"cap_{name}_{uuid.uuid4().hex[:10]}")

    ctx = multiprocessing.get_context("spawn")
    reference = tmp_path / "reference.caps"
    child = ctx.Process(target=_child, args=(where("ref"), str(reference), ""))
    child.start()
    child.join(60)
    assert child.exitcode == 0

    crashed, db = tmp_path / "crashed.caps", where("crash")
    child = ctx.Process(target=_child, args=(db, str(crashed), "/1"))
    child.start()
    child.join(60)
    assert child.exitcode == -signal.SIGKILL
    assert _caps(crashed) == _caps(reference)[:2]

    os.environ["SW_CAPS"] = str(crashed)
    try:
        result = asyncio.run(_retry_capped(db))
    finally:
        del os.environ["SW_CAPS"]
    assert result.ok
    # the retry carried out the recorded call without asking the model again; the calls after are capped alike
    assert _caps(crashed) == _caps(reference) == [100, 89, 77, 64]


# --- cycles ------------------------------------------------------------------------------------------------------


def _rows(*steps: list[ToolCall]) -> list[Message]:
    return [Message(Role.ASSISTANT, "", tuple(calls)) for calls in steps]


def _s(q: Any) -> ToolCall:
    return ToolCall("search", q if isinstance(q, dict) else {"q": q})


def _o(url: str = "https://yr.no/oslo") -> ToolCall:
    return ToolCall("open", {"url": url})


def test_a_nonce_in_each_call_dodges_the_cycle_count_and_is_left_to_stagnation() -> None:
    """Pinned, not "fixed": a changed argument is another call (docs/limits.md); the guardian's stagnation question
    reads near repeats (tests/test_redteam_stop.py)."""
    rows = _rows(*[[_s({"q": "oslo", "nonce": i})] if i % 2 == 0 else [_o()] for i in range(12)])
    repeats = Repeats().then(rows)
    assert repeats.cycles.latest is None and repeats.streak.count == 1


def test_key_order_spacing_and_1_vs_1_0_are_the_same_call_inside_a_cycle() -> None:
    variants = [{"q": "oslo", "page": 1}, {"page": 1.0, "q": "  oslo "}, {"q": "oslo\n", "page": 1}]
    rows = _rows(*[step for v in variants for step in ([_s(v)], [_o()])])
    cycle = Cycles().then(rows).latest
    assert cycle is not None and cycle.count == 3 and cycle.steps == (("search",), ("open",))
    assert Cycles.of(rows, at_most=3).latest == cycle


def test_a_true_is_not_1_and_breaks_the_cycle() -> None:
    rows = _rows(
        [_s({"q": "x", "all": 1})], [_o()], [_s({"q": "x", "all": True})], [_o()], [_s({"q": "x", "all": 1})], [_o()]
    )
    assert Cycles().then(rows).latest is None


def test_alternating_sets_of_parallel_calls_are_a_cycle_whatever_the_order_within_a_reply() -> None:
    read = ToolCall("read_file", {"path": "/a"})
    rows = _rows([_s("x"), _o()], [read], [_o(), _s("x")], [read], [_s("x"), _o()], [read])
    cycle = Cycles().then(rows).latest
    assert cycle is not None and cycle.count == 3
    assert cycle.reason == "the calls open + search, read_file were made in the same order 3 times in a row"


def test_ten_thousand_distinct_calls_keep_the_repeat_state_bounded() -> None:
    rows = _rows(*[[ToolCall("search", {"q": f"query {i}" * 20})] for i in range(10_000)])
    tracemalloc.start()
    try:
        state = Repeats()
        for row in rows:
            state = state.then([row])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(state.cycles.tail) == MAX_PERIOD and state.cycles.latest is None and state.streak.count == 1
    assert peak < 1_000_000  # a few steps' keys, not 10,000 of them (each key is ~200 bytes)


@pytest.mark.parametrize("bad", [1, 0, -3, 3.0, True, "3", None])
def test_is_looping_refuses_a_count_that_is_not_a_whole_number_of_at_least_two(bad: Any) -> None:
    with pytest.raises(ConfigError, match="is_looping"):
        is_looping(bad)


def _spinner(steps: int, *, raise_at: int | None = None) -> Callable[[ModelRequest], Reply]:
    """Alternates search / open; raises a retryable ModelError once, at model call ``raise_at``."""
    calls = {"n": 0}

    def model(request: ModelRequest) -> Reply:
        calls["n"] += 1
        if calls["n"] == raise_at:
            raise ModelError("overloaded", provider="test", status=529, retryable=True)
        made = sum(1 for m in request.messages if m.role is Role.ASSISTANT and m.tool_calls)
        if made >= steps:
            return Reply("I give up.")
        return Reply(tool_calls=[_s("oslo weather") if made % 2 == 0 else _o()])

    return model


async def test_is_looping_composed_with_or_and_and_keeps_the_reason_naming_the_calls(store: SQLiteStore) -> None:
    either = Agent(
        "a", "", FunctionModel(_spinner(20)), tools=[search, open_page], stop_when=is_looping(3) | step_count_is(40)
    )
    result = await Runner(store).run(either, "go")
    assert result.completion_reason == "stop_when" and result.steps == 6
    assert result.detail is not None and "the calls search, open were made in the same order 3 times" in result.detail

    both = Agent(
        "a", "", FunctionModel(_spinner(20)), tools=[search, open_page], stop_when=is_looping(2) & step_count_is(7)
    )
    result = await Runner(store).run(both, "go")
    assert result.completion_reason == "stop_when" and result.steps == 7
    assert result.detail is not None and result.detail.startswith("the calls open, search were made in the same order")


async def test_a_cycle_is_counted_across_a_retry_leg_of_the_same_run(store: SQLiteStore) -> None:
    """search, open, search, open; the fifth model call fails (retryable); retry() continues the same run, and the
    cycle's third repetition there stops it: a retry leg starts fresh budgets, not a fresh repeat count."""
    agent = Agent("a", "", FunctionModel(_spinner(20, raise_at=5)), tools=[search, open_page], stop_when=is_looping(3))
    runner = Runner(store)
    first = await runner.run(agent, "go", session_id="s")
    assert first.status == "failed" and first.steps == 4
    second = await runner.retry(agent, "s")
    assert second.run_id == first.run_id
    assert second.completion_reason == "stop_when" and second.steps == 6
    assert second.detail is not None and "3 times in a row" in second.detail


async def test_a_cycle_is_counted_across_a_stop_guards_continue(store: SQLiteStore) -> None:
    """search, open, then a final answer the stop guard sends back, then search, open, search, open: a reply
    without calls leaves the count as it was, so the third repetition stops the run."""
    made = {"n": 0}

    def model(request: ModelRequest) -> Reply:
        made["n"] += 1
        if made["n"] == 3:
            return Reply("Done, I think.")
        n = sum(1 for m in request.messages if m.role is Role.ASSISTANT and m.tool_calls)
        return Reply(tool_calls=[_s("oslo weather") if n % 2 == 0 else _o()])

    def guard(ctx: StopGuardContext) -> Continue | None:
        return Continue("Not yet: find the forecast.")

    agent = Agent(
        "a",
        "",
        FunctionModel(model),
        tools=[search, open_page],
        stop_when=is_looping(3),
        stop_guard=StopGuard(guard, max_continues=1),
    )
    result = await Runner(store).run(agent, "go")
    assert result.completion_reason == "stop_when" and result.steps == 7
    assert ran == ["search oslo weather", "open https://yr.no/oslo"] * 3


async def test_the_guardians_cycle_count_goes_on_across_a_retry_leg_of_the_same_run(store: SQLiteStore) -> None:
    """The guardian keeps its count on the leg (``Folded``); a retry builds a new leg from the log, which must read
    the whole run back, not start from the retry."""
    evaluator = ScriptedEvaluator([{"stagnation": 0.0}] * 20)
    guardian = Guardian(
        evaluator=evaluator, conditions=DEFAULT_CONDITIONS.only(["stagnation"]), policy=ThresholdPolicy()
    )
    agent = Agent("a", "", FunctionModel(_spinner(20, raise_at=5)), tools=[search, open_page], guardian=guardian)
    runner = Runner(store)
    first = await runner.run(agent, "go", session_id="s")
    assert first.status == "failed" and first.steps == 4
    second = await runner.retry(agent, "s")
    turns = [d for d in second.decisions if d.kind == "turn"]
    assert [d.step for d in turns][:6] == [1, 2, 3, 4, 5, 6]
    assert [d.outcome.value for d in turns[:6]] == ["continue"] * 5 + ["replan"]
    assert turns[5].reason == "replan: the calls search, open were made in the same order 3 times in a row"


async def test_a_cut_without_usage_cannot_be_told_from_the_adapters_own_and_fails_max_tokens(
    server: ProviderServer, store: SQLiteStore
) -> None:
    """Pinned (docs/limits.md, "what stays after the fact"): with no usage the loop cannot tell a cut at the budget
    from one at the adapter's own maximum, and the budget never moves."""
    body = chat_completion("a ramble", finish="length", model="gpt-test")
    body.pop("usage", None)
    server.answer(Answer(body=body))
    result = await Runner(store).run(Agent("a", "", _openai(server), limits=Limits(output_tokens=50)), "go")
    assert server.requests[0].body["max_tokens"] == 50
    assert result.completion_reason == "max_tokens" and result.error is not None and result.error.retryable
    assert result.usage.output_tokens == 0


async def test_is_looping_counts_a_call_the_budget_refused_and_its_stop_completes_the_run(store: SQLiteStore) -> None:
    """Pinned: the sixth call (the cycle's third repetition) is refused by ``tool_calls=5``; the cycle counts the
    calls the model asked for, run or not (as the guardian's repeat limit does), and a ``stop_when`` that fires on
    the step that spent a budget wins (docs/limits.md, "what still wins")."""
    agent = Agent(
        "a",
        "",
        FunctionModel(_spinner(20)),
        tools=[search, open_page],
        stop_when=is_looping(3),
        limits=Limits(tool_calls=5),
    )
    result = await Runner(store).run(agent, "go")
    assert len(ran) == 5
    assert result.status == "completed" and result.completion_reason == "stop_when" and result.steps == 6
