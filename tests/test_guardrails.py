"""Guardrails (seed 003): four hooks, three verdicts, the ordering rules, the denial path, built-ins, reporting."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest
from pydantic import BaseModel

from stopwise import (
    Agent,
    Continue,
    FunctionModel,
    Message,
    Reply,
    RunContext,
    Runner,
    ScriptedModel,
    StopGuard,
    Store,
    ToolCall,
    decode_tool_result,
    tool,
)
from stopwise.errors import ConfigError
from stopwise.events import GuardrailEvent
from stopwise.guardrails import (
    PROMPT_INJECTION_POLICY,
    Block,
    Guardrails,
    GuardrailTimeout,
    Hook,
    InputContext,
    OutputContext,
    Pass,
    Rewrite,
    ToolCallContext,
    ToolResultContext,
    block_pii,
    max_output_length,
    max_tool_result_length,
    named,
    prompt_injection_guardrail,
    redact_secrets,
)
from stopwise.guardrails.hooks import run_chain
from stopwise.models import ModelRequest


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return f"ran: {command}"


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return {"/env": "OPENAI_API_KEY=sk-live1234567890abcdefXYZ", "/big": "x" * 100}.get(path, "contents")


@tool
def flaky(n: int) -> str:
    """Fails unless n is 0."""
    if n:
        raise RuntimeError(f"flaky failure {n}")
    return "ok"


@tool
def search(query: str, limit: int = 10) -> dict[str, Any]:
    """Search documents."""
    return {"query": query, "limit": limit}


def calls(*pairs: tuple[str, dict[str, Any]]) -> Reply:
    return Reply(tool_calls=[ToolCall(name, args) for name, args in pairs])


def agent(model: Any, g: Guardrails | None = None, **kw: Any) -> Agent:
    return Agent("g", "Be careful.", model, tools=[shell, read_file, flaky, search], guardrails=g, **kw)


def no_shell(ctx: ToolCallContext) -> Block | None:
    return Block("shell is disabled") if ctx.tool_call.name == "shell" else None


# --- ordering rules ------------------------------------------------------------------------------------------


async def test_a_list_runs_in_order_and_rewrites_chain() -> None:
    seen: list[str] = []

    def first(ctx: OutputContext) -> Rewrite:
        seen.append(f"first saw {ctx.text}")
        return Rewrite(text=ctx.text + " +1")

    def second(ctx: OutputContext) -> Rewrite:
        seen.append(f"second saw {ctx.text}")
        return Rewrite(text=ctx.text + " +2")

    result = await Runner().run(agent(ScriptedModel(["base"]), Guardrails(on_output=[first, second])), "q")
    assert seen == ["first saw base", "second saw base +1"]
    assert result.output == "base +1 +2"


async def test_the_first_block_short_circuits_the_rest_of_that_hook() -> None:
    later: list[str] = []

    def blocker(ctx: OutputContext) -> Block:
        return Block("nope", replacement="Redacted.")

    def never(ctx: OutputContext) -> None:
        later.append("ran")

    result = await Runner().run(agent(ScriptedModel(["secret"]), Guardrails(on_output=[blocker, never])), "q")
    assert later == [] and result.output == "Redacted."


async def test_pass_is_silent_none_and_pass_leave_no_record() -> None:
    g = Guardrails(on_output=[lambda ctx: None, lambda ctx: Pass()], on_input=lambda ctx: Pass())
    result = await Runner().run(agent(ScriptedModel(["fine"]), g), "q")
    assert result.guardrails == () and result.output == "fine"


async def test_a_raising_guardrail_propagates_the_run_fails_with_its_detail_steps_intact(store: Store) -> None:
    def broken(ctx: ToolCallContext) -> None:
        raise ValueError("policy service down")

    model = ScriptedModel([calls(("search", {"query": "a"})), calls(("shell", {"command": "ls"}))])
    g = Guardrails(on_tool_call=lambda ctx: None if ctx.tool_call.name == "search" else broken(ctx))
    result = await Runner(store).run(agent(model, g), "q", session_id="s")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "guardrail_raised" and "policy service down" in result.error.message
    assert "tool_call" in result.error.message
    snapshot = await store.load_session("s")
    assert snapshot is not None and [m.role for m in snapshot.messages()] == ["user", "assistant", "tool"]


async def test_tool_hook_rules_apply_per_call_one_block_does_not_skip_another_call() -> None:
    seen: list[str] = []

    def watch(ctx: ToolCallContext) -> Block | None:
        seen.append(ctx.tool_call.name)
        return no_shell(ctx)

    model = ScriptedModel([calls(("shell", {"command": "ls"}), ("search", {"query": "x"})), "done"])
    result = await Runner().run(agent(model, Guardrails(on_tool_call=watch)), "q")
    assert seen == ["shell", "search"]
    rows = [m for m in result.messages if m.role == "tool"]
    assert "Blocked by guardrail" in rows[0].content and decode_tool_result(rows[1])["query"] == "x"


@pytest.mark.parametrize(
    ("hook", "verdict", "fragment"),
    [
        ("on_output", Rewrite(args={"a": 1}), "Rewrite(text=...)"),
        ("on_tool_call", Rewrite(text="x"), "Rewrite(args=...)"),
        ("on_input", Rewrite(text="x"), "Rewrite(messages=...)"),
        ("on_output", "block", "expected None, Pass(), Block(...) or Rewrite(...)"),
        ("on_tool_result", Rewrite(result=1, text="x"), "Rewrite(result=...)"),
    ],
)
async def test_a_wrong_verdict_fails_the_run_naming_the_guardrail_and_the_hook(
    hook: str, verdict: Any, fragment: str
) -> None:
    def misconfigured(ctx: Any) -> Any:
        return verdict

    model = ScriptedModel([calls(("search", {"query": "x"})), "done"])
    result = await Runner().run(agent(model, Guardrails(**{hook: misconfigured})), "q")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "guardrail_invalid"
    assert "'misconfigured'" in result.error.message and hook.removeprefix("on_") in result.error.message
    assert fragment in result.error.message


# --- input ---------------------------------------------------------------------------------------------------


async def test_input_block_means_no_model_call_and_reason_guardrail_input(store: Store) -> None:
    model = ScriptedModel(["never"])
    g = Guardrails(on_input=named("tenant_check", lambda ctx: Block("tenant suspended", replacement="Sorry.")))
    result = await Runner(store).run(agent(model, g), "hello", session_id="s")
    assert model.requests == []
    assert result.status == "completed" and result.completion_reason == "guardrail_input"
    assert result.output == "Sorry." and result.detail == "tenant suspended"
    assert [(r.hook, r.action, r.name, r.step) for r in result.guardrails] == [("input", "block", "tenant_check", None)]
    record = await store.get_run(result.run_id)
    assert record is not None and record.completion_reason == "guardrail_input"


async def test_input_rewrite_is_what_the_model_and_the_log_see(store: Store) -> None:
    def strip_names(ctx: InputContext) -> Rewrite:
        return Rewrite(messages=[Message(m.role, m.content.replace("Alice", "[name]")) for m in ctx.messages])

    model = ScriptedModel(["ok"])
    result = await Runner(store).run(agent(model, Guardrails(on_input=strip_names)), "Alice asks", session_id="s")
    assert model.requests[0].messages[-1].content == "[name] asks"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    assert all("Alice" not in m.content for m in snapshot.messages())
    assert result.guardrails[0].action == "rewrite" and result.guardrails[0].reason is None


async def test_input_runs_once_per_leg_after_retry_restored_the_log(store: Store) -> None:
    seen: list[int] = []

    def count(ctx: InputContext) -> None:
        seen.append(len(ctx.messages))

    runner = Runner(store)
    a = agent(FunctionModel(lambda r: calls(("search", {"query": "x"}))), Guardrails(on_input=count), max_steps=2)
    await runner.run(a, "q", session_id="s")
    await runner.retry(a, "s")
    assert seen == [1, 5]  # the retry leg sees the restored log: user + 2 x (assistant, tool)


# --- tool call -----------------------------------------------------------------------------------------------


async def test_a_blocked_call_becomes_an_error_result_naming_the_rule_and_the_run_goes_on() -> None:
    model = ScriptedModel([calls(("shell", {"command": "rm -rf /"})), "I will not do that."])
    result = await Runner().run(agent(model, Guardrails(on_tool_call=no_shell)), "clean up")
    row = result.messages[2]
    assert json.loads(row.content) == {"error": "Blocked by guardrail 'no_shell': shell is disabled"}
    assert row.metadata["tool_error"] is True and row.metadata["denied"] is True
    assert result.status == "completed" and model.requests[1].messages[-1] == row


async def test_blocked_calls_do_not_count_toward_the_runaway_error_guard() -> None:
    model = FunctionModel(
        lambda r: calls(("shell", {"command": "ls"})) if r.step <= 4 else Reply("gave up on the shell")
    )
    result = await Runner().run(agent(model, Guardrails(on_tool_call=no_shell), max_tool_errors=3), "q")
    assert result.status == "completed" and result.steps == 5


async def test_a_blocked_call_never_reaches_approval() -> None:
    @tool(needs_approval=True)
    def deploy(env: str) -> str:
        """Deploy."""
        return "deployed"

    g = Guardrails(on_tool_call=lambda ctx: Block("frozen") if ctx.tool_call.name == "deploy" else None)
    a = Agent("d", "", ScriptedModel([calls(("deploy", {"env": "prod"})), "ok"]), tools=[deploy], guardrails=g)
    result = await Runner().run(a, "q")
    assert result.status == "completed" and result.pending == ()


async def test_a_rewrite_changes_what_runs_while_the_log_keeps_the_models_arguments() -> None:
    def clamp_limit(ctx: ToolCallContext) -> Rewrite | None:
        args = dict(ctx.tool_call.args)  # type: ignore[arg-type]
        if args.get("limit", 0) <= 50:
            return None
        return Rewrite(args={**args, "limit": 50})

    model = ScriptedModel([calls(("search", {"query": "q", "limit": 500})), "done"])
    result = await Runner().run(agent(model, Guardrails(on_tool_call=clamp_limit)), "q")
    assert result.messages[1].tool_calls[0].args == {"query": "q", "limit": 500}
    assert decode_tool_result(result.messages[2]) == {"query": "q", "limit": 50}
    assert [(r.hook, r.action, r.name, r.tool_call_id) for r in result.guardrails] == [
        ("tool_call", "rewrite", "clamp_limit", result.messages[1].tool_calls[0].id)
    ]


# --- tool result ---------------------------------------------------------------------------------------------


async def test_a_result_rewrite_is_authoritative_and_a_redaction_receipt_keeps_the_redacted_copy(
    store: Store,
) -> None:
    model = ScriptedModel([calls(("read_file", {"path": "/env"})), "It sets an API key."])
    result = await Runner(store).run(agent(model, Guardrails(on_tool_result=redact_secrets())), "q", session_id="s")
    row = result.messages[2]
    assert row.content == "OPENAI_API_KEY=[redacted]" and row.metadata["content_encoding"] == "text"
    assert model.requests[1].messages[-1].content == "OPENAI_API_KEY=[redacted]"
    snapshot = await store.load_session("s")
    assert snapshot is not None and "sk-live" not in json.dumps([m.content for m in snapshot.messages()])
    receipt = next(r for e in snapshot.entries for r in e.records if r.get("type") == "tool_receipt")
    assert "raw" not in receipt and receipt["redacted"] == "OPENAI_API_KEY=[redacted]"
    assert "sk-live" not in json.dumps([e.records for e in snapshot.entries])


async def test_results_are_guarded_in_call_order_after_the_whole_batch_settled() -> None:
    order: list[str] = []
    finished = asyncio.Event()

    @tool
    async def slow(name: str) -> str:
        """Finish after the other call."""
        await finished.wait()
        return name

    @tool
    async def fast(name: str) -> str:
        """Finish first."""
        finished.set()
        return name

    def watch(ctx: ToolResultContext) -> None:
        order.append(ctx.result)

    model = ScriptedModel([calls(("slow", {"name": "a"}), ("fast", {"name": "b"})), "done"])
    a = Agent("o", "", model, tools=[slow, fast], guardrails=Guardrails(on_tool_result=watch))
    await Runner().run(a, "q")
    assert order == ["a", "b"]


async def test_a_result_block_counts_toward_the_runaway_error_guard() -> None:
    model = FunctionModel(lambda r: calls(("search", {"query": str(r.step)})))
    g = Guardrails(on_tool_result=lambda ctx: Block("withheld"))
    result = await Runner().run(agent(model, g, max_tool_errors=3), "q")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "tool_error_streak" and result.steps == 3


async def test_result_hook_sees_the_rewritten_call_and_error_flag_but_not_framework_errors() -> None:
    seen: list[tuple[str, Any, bool]] = []

    def watch(ctx: ToolResultContext) -> None:
        seen.append((ctx.tool_call.name, ctx.tool_call.args, ctx.is_error))

    model = ScriptedModel(
        [calls(("flaky", {"n": 1}), ("nope", {}), ("search", {"query": 5}), ("search", {"query": "q"})), "done"]
    )
    g = Guardrails(
        on_tool_call=lambda ctx: (
            Rewrite(args={"query": "q", "limit": 1}) if ctx.tool_call.args == {"query": "q"} else None
        ),
        on_tool_result=watch,
    )
    await Runner().run(agent(model, g), "q")
    assert seen == [("flaky", {"n": 1}, True), ("search", {"query": "q", "limit": 1}, False)]


# --- output --------------------------------------------------------------------------------------------------


async def test_output_runs_after_the_stop_guard_accepted_never_on_a_re_driven_round() -> None:
    seen: list[str] = []

    def watch(ctx: OutputContext) -> None:
        seen.append(ctx.text)

    guard = StopGuard(lambda ctx: None if "[ok]" in ctx.reply.text else Continue("add [ok]"))
    a = agent(ScriptedModel(["draft", "final [ok]"]), Guardrails(on_output=watch), stop_guard=guard)
    await Runner().run(a, "q")
    assert seen == ["final [ok]"]


async def test_output_rewrite_is_authoritative_in_result_log_and_run_record(store: Store) -> None:
    g = Guardrails(on_output=lambda ctx: Rewrite(text=ctx.text.upper()))
    result = await Runner(store).run(agent(ScriptedModel(["quiet"]), g), "q", session_id="s")
    assert result.output == "QUIET" and result.text == "QUIET"
    snapshot = await store.load_session("s")
    assert snapshot is not None and snapshot.messages()[-1].content == "QUIET"
    record = await store.get_run(result.run_id)
    assert record is not None and record.output == "QUIET" and record.text == "QUIET"


async def test_output_block_replaces_the_text_with_reason_guardrail_output(store: Store) -> None:
    def no_keys(ctx: OutputContext) -> Block | None:
        return Block("answer contained an API key", replacement="Redacted.") if "sk-" in ctx.text else None

    result = await Runner(store).run(agent(ScriptedModel(["the key is sk-abc"]), Guardrails(on_output=no_keys)), "q")
    assert result.status == "completed" and result.completion_reason == "guardrail_output"
    assert result.output == "Redacted." and result.detail == "answer contained an API key"
    snapshot = await store.load_session(result.session_id)
    assert snapshot is not None and all("sk-abc" not in m.content for m in snapshot.messages())


async def test_output_guardrail_on_structured_output_revalidates_the_rewrite() -> None:
    class Out(BaseModel):
        answer: str

    g = Guardrails(on_output=lambda ctx: Rewrite(text=ctx.text.replace("secret", "public")))
    result = await Runner().run(agent(ScriptedModel(['{"answer": "secret"}']), g, output_type=Out), "q")
    assert result.output == Out(answer="public")
    bad = Guardrails(on_output=lambda ctx: Rewrite(text="not json"))
    failed = await Runner().run(agent(ScriptedModel(['{"answer": "x"}']), bad, output_type=Out), "q")
    assert failed.error is not None and failed.error.code == "guardrail_invalid"


# --- runaway-error guard -------------------------------------------------------------------------------------


async def test_three_consecutive_failures_of_one_tool_end_the_run() -> None:
    model = FunctionModel(lambda r: calls(("flaky", {"n": r.step})))
    result = await Runner().run(agent(model), "q")
    assert result.status == "failed" and result.error is not None
    assert result.error.code == "tool_error_streak" and "'flaky'" in result.error.message and result.steps == 3


async def test_one_clean_result_resets_the_count() -> None:
    script = [1, 2, 0, 3, 4, 0]
    model = FunctionModel(lambda r: calls(("flaky", {"n": script[r.step - 1]})) if r.step <= 6 else Reply("done"))
    result = await Runner().run(agent(model), "q")
    assert result.status == "completed" and result.steps == 7


async def test_max_tool_errors_is_configurable() -> None:
    model = FunctionModel(lambda r: calls(("flaky", {"n": 1})))
    result = await Runner().run(agent(model, max_tool_errors=1), "q")
    assert result.error is not None and result.error.code == "tool_error_streak" and result.steps == 1


async def test_failures_of_different_tools_do_not_add_up() -> None:
    model = FunctionModel(
        lambda r: (calls(("flaky", {"n": 1})) if r.step % 2 else calls(("nope", {}))) if r.step <= 4 else Reply("ok")
    )
    result = await Runner().run(agent(model), "q")
    assert result.status == "completed"


# --- reporting -----------------------------------------------------------------------------------------------


async def test_one_record_per_non_pass_verdict_in_result_log_and_stream(store: Store) -> None:
    model = ScriptedModel([calls(("shell", {"command": "ls"}), ("read_file", {"path": "/env"})), "answer"])
    g = Guardrails(on_tool_call=no_shell, on_tool_result=redact_secrets(), on_output=max_output_length(3))
    events = [e async for e in Runner(store).stream(agent(model, g), "q", session_id="s")]
    streamed = [e.record for e in events if isinstance(e, GuardrailEvent)]
    finished = events[-1].result  # type: ignore[attr-defined]
    assert [(r.hook, r.action, r.name) for r in finished.guardrails] == [
        (Hook.TOOL_CALL, "block", "no_shell"),
        (Hook.TOOL_RESULT, "rewrite", "redact_secrets"),
        (Hook.OUTPUT, "rewrite", "max_output_length"),
    ]
    assert streamed == list(finished.guardrails)
    assert finished.guardrails[0].reason == "shell is disabled" and finished.guardrails[0].step == 1
    snapshot = await store.load_session("s")
    assert snapshot is not None
    logged = [r for e in snapshot.entries for r in e.records if r.get("type") == "guardrail"]
    assert len(logged) == 3


async def test_names_come_from_the_function_or_named_and_a_lambda_gets_a_fallback() -> None:
    model = ScriptedModel([calls(("shell", {"command": "a"}), ("shell", {"command": "b"})), "x"])
    g = Guardrails(
        on_tool_call=[
            lambda ctx: Block("anon") if ctx.tool_call.args == {"command": "a"} else None,
            named("explicit_rule", lambda ctx: Block("named")),
        ]
    )
    result = await Runner().run(agent(model, g), "q")
    assert [r.name for r in result.guardrails] == ["tool_call guardrail #1", "explicit_rule"]
    assert "Blocked by guardrail 'tool_call guardrail #1': anon" in result.messages[2].content


# --- runtime_context -----------------------------------------------------------------------------------------


async def test_runtime_context_reaches_hooks_and_tools_and_is_never_persisted(store: Store) -> None:
    class Secret:
        def __repr__(self) -> str:
            return "Secret(token=do-not-store)"

    secret = Secret()
    seen: list[Any] = []

    @tool
    def whoami(ctx: RunContext) -> str:
        """Who is calling."""
        seen.append(ctx.runtime_context)
        return "you"

    def check(ctx: Any) -> None:
        seen.append(ctx.runtime_context)

    g = Guardrails(on_input=check, on_tool_call=check, on_tool_result=check, on_output=check)
    a = Agent("r", "", ScriptedModel([calls(("whoami", {})), "done"]), tools=[whoami], guardrails=g)
    await Runner(store).run(a, "q", session_id="s", runtime_context=secret)
    assert seen == [secret] * 5
    snapshot = await store.load_session("s")
    assert snapshot is not None and "do-not-store" not in repr(snapshot)


# --- built-ins -----------------------------------------------------------------------------------------------


async def test_prompt_injection_guardrail_adds_one_separate_leading_system_message_once_per_run(store: Store) -> None:
    model = FunctionModel(lambda r: calls(("search", {"query": "x"})) if r.step < 3 else Reply("done"))
    runner = Runner(store)
    a = agent(model, Guardrails(on_input=prompt_injection_guardrail()), max_steps=2)
    first = await runner.run(a, "q", session_id="s")
    assert [r.action for r in first.guardrails] == ["rewrite"]
    resumed = await runner.retry(a, "s")
    assert resumed.status == "completed"
    snapshot = await store.load_session("s")
    assert snapshot is not None
    systems = [m for m in snapshot.messages() if m.role == "system"]
    assert [m.content for m in systems] == [PROMPT_INJECTION_POLICY]
    assert snapshot.messages()[0].content == PROMPT_INJECTION_POLICY
    assert [r.action for r in resumed.guardrails] == ["rewrite"]  # the first leg's; the retry leg passed


async def test_prompt_injection_policy_is_a_separate_message_after_the_agent_instructions() -> None:
    model = ScriptedModel(["ok"])
    await Runner().run(agent(model, Guardrails(on_input=prompt_injection_guardrail(policy="Data only."))), "q")
    roles = [(m.role, m.content) for m in model.requests[0].messages[:2]]
    assert roles == [("system", "Be careful."), ("system", "Data only.")]


async def test_max_output_length_truncates_or_blocks() -> None:
    truncated = await Runner().run(agent(ScriptedModel(["abcdef"]), Guardrails(on_output=max_output_length(3))), "q")
    assert truncated.output == "abc"
    blocked = await Runner().run(
        agent(ScriptedModel(["abcdef"]), Guardrails(on_output=max_output_length(3, mode="block"))), "q"
    )
    assert blocked.completion_reason == "guardrail_output" and blocked.output == ""


@pytest.mark.parametrize("cap", [-5, float("nan")])
async def test_negative_or_nan_caps_clamp_to_zero(cap: float) -> None:
    result = await Runner().run(agent(ScriptedModel(["abc"]), Guardrails(on_output=max_output_length(cap))), "q")
    assert result.output == ""


async def test_max_tool_result_length_caps_what_the_model_sees() -> None:
    model = ScriptedModel([calls(("read_file", {"path": "/big"})), "summarised"])
    result = await Runner().run(agent(model, Guardrails(on_tool_result=max_tool_result_length(10))), "q")
    assert result.messages[2].content == "x" * 10


async def test_redact_secrets_covers_keys_bearer_tokens_and_private_keys_in_json_too() -> None:
    @tool
    def leak() -> dict[str, Any]:
        """Leak things."""
        return {
            "auth": "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
            "aws": "AKIAABCDEFGHIJKLMNOP",
            # Real-looking bodies: a filler token (``ghp_aaaa...``) or a key block without base64 is a placeholder.
            "pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
            "-----END RSA PRIVATE KEY-----",
            "gh": "ghp_" + "a1B2c3D4e5F6g7H8i9J0" + "k1L2m3N4o5P6q7R8",
            "fine": "nothing here",
        }

    a = Agent(
        "l",
        "",
        ScriptedModel([calls(("leak", {})), "ok"]),
        tools=[leak],
        guardrails=Guardrails(on_tool_result=redact_secrets()),
    )
    result = await Runner().run(a, "q")
    value = decode_tool_result(result.messages[2])
    assert value == {
        "auth": "Authorization: Bearer [redacted]",
        "aws": "[redacted]",
        "pem": "[redacted]",
        "gh": "[redacted]",
        "fine": "nothing here",
    }


@pytest.mark.parametrize(
    ("text", "blocked"),
    [
        ("my card is 4111 1111 1111 1111", True),
        ("my card is 4111-1111-1111-1112", False),  # fails the Luhn check
        ("ssn 123-45-6789 please", True),
        ("order 000-12-3456", False),
        ("call me at 555-123-4567", False),
    ],
)
async def test_block_pii_blocks_luhn_valid_cards_and_ssns(text: str, blocked: bool) -> None:
    model = ScriptedModel(["ok"])
    result = await Runner().run(agent(model, Guardrails(on_input=block_pii())), text)
    assert (result.completion_reason == "guardrail_input") is blocked
    assert (model.requests == []) is blocked


# --- model middleware ----------------------------------------------------------------------------------------


async def test_middleware_sees_every_model_call_forced_and_wrap_up_included() -> None:
    seen: list[tuple[int, bool, int]] = []

    async def log_calls(request: ModelRequest, call_next: Any) -> Reply:
        seen.append((request.step, request.forced_output, len(request.tools)))
        return await call_next(request)

    def fn(r: ModelRequest) -> Reply:
        return calls(("search", {"query": "x"})) if r.tools else Reply("wrapped")

    a = agent(FunctionModel(fn), max_steps=2, on_max_steps="wrap_up", middleware=[log_calls])
    result = await Runner().run(a, "q")
    assert result.completion_reason == "max_steps_wrapped_up"
    assert seen == [(1, False, 4), (2, False, 4), (3, False, 0)]


async def test_middleware_runs_outermost_first_and_can_change_the_request() -> None:
    order: list[str] = []

    async def outer(request: ModelRequest, call_next: Any) -> Reply:
        order.append("outer")
        return await call_next(request)

    async def inner(request: ModelRequest, call_next: Any) -> Reply:
        order.append("inner")
        extra = Message("system", "Always answer in French.")
        return await call_next(ModelRequest((*request.messages, extra), request.tools, request.step))

    model = ScriptedModel(["bonjour"])
    await Runner().run(agent(model, middleware=[outer, inner]), "q")
    assert order == ["outer", "inner"]
    assert model.requests[0].messages[-1].content == "Always answer in French."


# --- off the event loop, under a time limit ---------------------------------------------------------------

# Bounds every wait below, so a regression fails the test instead of hanging it; never reached when all is well.
BOUND = 10.0


async def test_a_slow_sync_guardrail_does_not_stall_another_run_in_the_same_process() -> None:
    gate = threading.Event()
    entered = threading.Event()
    released: list[bool] = []

    def slow_check(ctx: ToolCallContext) -> None:
        entered.set()
        # Returns once the other run has finished: possible only while the event loop is free to run it.
        released.append(gate.wait(BOUND))

    slow = agent(ScriptedModel([calls(("shell", {"command": "ls"})), "done"]), Guardrails(on_tool_call=slow_check))
    quick = Agent("quick", model=ScriptedModel(["hello"]))
    runner = Runner()

    async def the_other_run() -> str:
        assert await asyncio.to_thread(entered.wait, BOUND), "the slow guardrail never started"
        result = await runner.run(quick, "hi")
        gate.set()
        return str(result.output)

    slow_result, quick_output = await asyncio.gather(runner.run(slow, "list"), the_other_run())
    assert released == [True]
    assert quick_output == "hello"
    assert slow_result.status == "completed" and slow_result.output == "done"


async def test_a_sync_guardrail_past_its_timeout_fails_the_run_with_guardrail_timeout() -> None:
    gate = threading.Event()

    def stuck(ctx: ToolCallContext) -> None:
        gate.wait(BOUND)

    model = ScriptedModel([calls(("shell", {"command": "ls"})), "done"])
    try:
        result = await Runner().run(agent(model, Guardrails(on_tool_call=stuck, timeout=0.05)), "list")
    finally:
        gate.set()  # the timed-out guardrail's thread runs on until it returns: let it, before the loop closes
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "guardrail_timeout"
    assert "'stuck'" in result.error.message and "tool_call" in result.error.message and "0.05s" in result.error.message
    assert [m.role for m in result.messages if m.role == "tool"] == []  # the call never ran


async def test_an_async_guardrail_gets_the_timeout_too() -> None:
    async def never_answers(ctx: OutputContext) -> None:
        await asyncio.Event().wait()

    result = await Runner().run(agent(ScriptedModel(["done"]), Guardrails(on_output=never_answers, timeout=0.05)), "x")
    assert result.status == "failed"
    assert result.error is not None and result.error.code == "guardrail_timeout"
    assert "never_answers" in result.error.message


async def test_an_input_guardrail_past_its_timeout_fails_the_run_before_any_model_call() -> None:
    async def never_answers(ctx: InputContext) -> None:
        await asyncio.Event().wait()

    model = ScriptedModel(["unused"])
    result = await Runner().run(agent(model, Guardrails(on_input=never_answers, timeout=0.05)), "x")
    assert result.error is not None and result.error.code == "guardrail_timeout"
    assert model.requests == []


async def test_a_named_guardrail_s_own_timeout_overrides_the_guardrails_one() -> None:
    gate = threading.Event()

    def stuck(ctx: ToolResultContext) -> None:
        gate.wait(BOUND)

    chain = Guardrails(on_tool_result=named("slow_scan", stuck, timeout=0.05), timeout=None)
    with pytest.raises(GuardrailTimeout) as info:
        try:
            await run_chain(chain, Hook.TOOL_RESULT, "x", lambda value: value, step=1)
        finally:
            gate.set()
    assert (info.value.guardrail, info.value.hook, info.value.timeout) == ("slow_scan", Hook.TOOL_RESULT, 0.05)
    assert str(info.value) == "guardrail 'slow_scan' on the tool_result hook timed out after 0.05s"


async def test_a_guardrail_raising_timeout_error_itself_is_a_raise_not_a_timeout() -> None:
    def raises(ctx: OutputContext) -> None:
        raise TimeoutError("upstream scanner timed out")

    result = await Runner().run(agent(ScriptedModel(["done"]), Guardrails(on_output=raises)), "x")
    assert result.error is not None and result.error.code == "guardrail_raised"
    assert "upstream scanner timed out" in result.error.message


async def test_a_sync_guardrail_runs_in_a_worker_thread_and_an_async_one_on_the_loop() -> None:
    seen: dict[str, bool] = {}
    main = threading.current_thread()

    def sync_check(ctx: OutputContext) -> None:
        seen["sync on the loop thread"] = threading.current_thread() is main

    async def async_check(ctx: OutputContext) -> None:
        seen["async on the loop thread"] = threading.current_thread() is main

    await Runner().run(agent(ScriptedModel(["done"]), Guardrails(on_output=[sync_check, async_check])), "x")
    assert seen == {"sync on the loop thread": False, "async on the loop thread": True}


@pytest.mark.parametrize("bad", [0, -1, True, "5"])
def test_a_bad_guardrail_timeout_raises_config_error_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigError, match=r"guardrails\.timeout"):
        Guardrails(on_output=lambda ctx: None, timeout=bad)
    with pytest.raises(ConfigError, match=r"named\('x'\)\.timeout"):
        named("x", lambda ctx: None, timeout=bad)
