"""``stopwise.telemetry.RunTracer``: the spans a run makes, read back from the OpenTelemetry SDK's in-memory
exporter. The runs are real (``Runner`` on SQLite, scripted models, the demo's scenarios for the deciders)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import StatusCode

from stopwise import Agent, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, Usage, telemetry, tool
from stopwise.demo import SCENARIOS
from stopwise.telemetry import RunTracer


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    yield InMemorySpanExporter()


@pytest.fixture
def tracer(exporter: InMemorySpanExporter) -> RunTracer:
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return RunTracer(provider)


@tool
def get_weather(city: str) -> str:
    """The weather.

    Args:
        city: The city.
    """
    return f"{city}: sunny"


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan:
    assert span.parent is not None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


async def test_a_run_is_one_agent_span_with_a_span_per_step_model_call_and_tool_call(
    tracer: RunTracer, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    model = ScriptedModel(
        [
            Reply(tool_calls=(ToolCall("get_weather", {"city": "Oslo"}, id="c1"),), usage=Usage(12, 3, 1)),
            Reply(text="Oslo is sunny.", usage=Usage(20, 5, 1)),
        ]
    )
    agent = Agent(name="forecaster", model=model, tools=(get_weather,))
    async with Runner(SQLiteStore(tmp_path / "log.db"), on_event=tracer) as runner:
        result = await runner.run(agent, "Weather in Oslo?", session_id="s-1")
    spans = exporter.get_finished_spans()
    [run] = by_name(spans, "invoke_agent ")
    assert run.name == "invoke_agent forecaster" and run.parent is None
    assert run.attributes is not None
    assert run.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert run.attributes["gen_ai.agent.name"] == "forecaster"
    assert run.attributes["gen_ai.conversation.id"] == "s-1"
    assert run.attributes["stopwise.run.id"] == result.run_id
    assert run.attributes["stopwise.completion_reason"] == "final_answer"
    assert run.attributes["gen_ai.usage.input_tokens"] == 32
    steps = by_name(spans, "stopwise.step ")
    assert sorted(s.name for s in steps) == ["stopwise.step 1", "stopwise.step 2"]
    assert all(parent_of(s, spans) is run for s in steps)
    assert [s.attributes["stopwise.decision.action"] for s in sorted(steps, key=lambda s: s.name)] == [  # type: ignore[index]
        "continue",
        "complete",
    ]
    chats = sorted(by_name(spans, "chat "), key=lambda s: s.start_time or 0)
    assert len(chats) == 2 and [parent_of(c, spans).name for c in chats] == ["stopwise.step 1", "stopwise.step 2"]
    assert chats[0].attributes["gen_ai.usage.output_tokens"] == 3  # type: ignore[index]
    assert chats[1].attributes["gen_ai.response.finish_reasons"] == ("end_turn",)  # type: ignore[index]
    [call] = by_name(spans, "execute_tool ")
    assert call.name == "execute_tool get_weather" and parent_of(call, spans).name == "stopwise.step 1"
    assert call.attributes["gen_ai.tool.call.id"] == "c1"  # type: ignore[index]
    assert call.status.status_code is StatusCode.UNSET
    # Every span ends within its parent.
    for span in spans:
        if span.parent is not None:
            outer = parent_of(span, spans)
            assert outer.start_time <= span.start_time and span.end_time <= outer.end_time  # type: ignore[operator]


async def test_a_failed_run_marks_its_span_as_an_error_with_the_code(
    tracer: RunTracer, exporter: InMemorySpanExporter
) -> None:
    looping = Agent(
        name="pager",
        model=ScriptedModel([Reply(tool_calls=(ToolCall("get_weather", {"city": "X"}),))] * 2),
        tools=(get_weather,),
        max_steps=2,
    )
    await Runner(on_event=tracer).run(looping, "go")
    [run] = by_name(exporter.get_finished_spans(), "invoke_agent ")
    assert run.status.status_code is StatusCode.ERROR
    assert run.attributes["stopwise.error.code"] == "max_steps_exhausted"  # type: ignore[index]
    assert run.attributes["stopwise.completion_reason"] == "max_steps"  # type: ignore[index]


async def scenario(name: str, tracer: RunTracer, tmp_path: Path) -> None:
    chosen = next(s for s in SCENARIOS if s.name == name)
    async with Runner(SQLiteStore(tmp_path / "demo.db"), on_event=tracer) as runner:
        await chosen.run(runner, f"s-{name}")


async def test_guardian_decisions_are_spans_with_each_conditions_probability_threshold_and_outcome(
    tracer: RunTracer, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    await scenario("drift", tracer, tmp_path)
    spans = exporter.get_finished_spans()
    turns = by_name(spans, "stopwise.guardian turn")
    assert [s.attributes["stopwise.guardian.outcome"] for s in turns] == [  # type: ignore[index]
        "continue",
        "replan",
        "replan",
        "stop_failure",
    ]
    last = turns[-1].attributes
    assert last is not None
    assert last["stopwise.guardian.condition.drift.p"] == pytest.approx(0.92, abs=0.005)
    assert last["stopwise.guardian.condition.drift.threshold"] == 0.5
    assert all(parent_of(s, spans).name.startswith("stopwise.step ") for s in turns)
    [run] = by_name(spans, "invoke_agent ")
    assert run.attributes["stopwise.completion_reason"] == "infeasible"  # type: ignore[index]


async def test_guardrail_verdicts_and_stop_guard_consultations_are_spans(
    tracer: RunTracer, exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    await scenario("guardrails", tracer, tmp_path)
    verdicts = by_name(exporter.get_finished_spans(), "stopwise.guardrail ")
    assert verdicts and all(v.attributes["stopwise.guardrail.action"] in ("block", "rewrite") for v in verdicts)  # type: ignore[index]
    exporter.clear()
    await scenario("stop_guard", tracer, tmp_path)
    consulted = by_name(exporter.get_finished_spans(), "stopwise.stop_guard ")
    assert [c.attributes["stopwise.stop_guard.event"] for c in consulted][:1] == ["stop_guard.continued"]  # type: ignore[index]


def test_the_gen_ai_attribute_names_are_the_semantic_conventions() -> None:
    conventions = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
    text = Path(telemetry.__file__).read_text(encoding="utf-8")
    used = set(re.findall(r'"(gen_ai\.[a-z_.]+)"', text))
    assert used and used <= conventions, used - conventions


def test_tracing_is_off_unless_a_tracer_is_given() -> None:
    assert Runner().on_event is None


async def test_an_observer_that_raises_ends_the_run_cancelled_and_the_error_reaches_the_caller() -> None:
    def broken(agent: Agent, event: object) -> None:
        raise ValueError("observer bug")

    runner = Runner(on_event=broken)
    agent = Agent(name="a", model=ScriptedModel(["hello"]))
    with pytest.raises(ValueError, match="observer bug"):
        await runner.run(agent, "hi", session_id="s")
    [run] = await runner.store.list_runs("s")
    assert run.status.value == "cancelled"
