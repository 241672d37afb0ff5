"""OpenTelemetry traces of runs (the ``otel`` extra): ``Runner(store, on_event=RunTracer())``.

One span per run leg (``invoke_agent``), per step, per model call (``chat``), per tool call (``execute_tool``),
per guardrail verdict, per stop-guard consultation and per guardian decision, named and attributed after the
OpenTelemetry GenAI semantic conventions (``gen_ai.operation.name``, ``gen_ai.agent.name``,
``gen_ai.conversation.id``, ``gen_ai.request.model``, ``gen_ai.usage.*``, ``gen_ai.tool.*``), plus ``stopwise.*``
attributes for what only stopwise knows: the step's decision, the completion reason and error code, each guardian
condition's probability, threshold and whether it escalated, the guardrail and stop-guard verdicts.

Spans are made from the run's events as they happen (``Runner.on_event``); nothing here runs when no tracer is
given, and the core never imports this module. Message contents and tool arguments are not recorded (they may
hold personal data); ids, names, counts, outcomes and probabilities are.

Where the events bound a span, its times are theirs: a model call spans ``StepStarted`` .. ``ModelReplied``, a
step ``StepStarted`` .. ``StepCommitted``, a tool call ``ToolCalled`` .. ``ToolReturned`` (the batch's calls run
together, so each spans the batch). A guardrail verdict and a stop-guard consultation are points in time; a
guardian decision ends when its step commits and lasts the evaluator's recorded latency.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # pragma: no cover - exercised by the extra's absence only
    raise ModuleNotFoundError(
        f"stopwise.telemetry needs the otel extra: pip install 'stopwise[otel]' ({exc})", name="opentelemetry"
    ) from exc

from stopwise import __version__
from stopwise.agent import Agent
from stopwise.events import (
    Event,
    GuardrailEvent,
    ModelReplied,
    RunFinished,
    StepCommitted,
    StepStarted,
    StopGuardEvent,
    ToolCalled,
    ToolReturned,
)
from stopwise.messages import DENIED, ORIGIN, TOOL_ERROR
from stopwise.result import RunResult, RunStatus
from stopwise.stop.decision import StopDecision

__all__ = ["RunTracer"]


@dataclass
class _Leg:
    """The open spans of one run leg."""

    run: Span
    steps: dict[int, Span] = field(default_factory=dict)
    committed_at: dict[int, int] = field(default_factory=dict)
    """Per step, when it committed (ns): a guardian decision of the step ends there."""
    model: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class RunTracer:
    """An ``on_event`` observer for ``Runner`` that records each run as OpenTelemetry spans.

    ``tracer_provider`` defaults to the global one (``opentelemetry.trace.set_tracer_provider``). The run span
    is a child of the span current when the run's first event arrives, so a caller's own span contains it.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None) -> None:
        self._tracer = trace.get_tracer("stopwise", __version__, tracer_provider=tracer_provider)
        self._legs: dict[str, _Leg] = {}

    def __call__(self, agent: Agent, event: Event) -> None:
        leg = self._legs.get(event.run_id)
        if leg is None:
            leg = self._legs[event.run_id] = _Leg(self._start_run(agent, event))
        if isinstance(event, StepStarted):
            self._step_started(agent, leg, event)
        elif isinstance(event, ModelReplied):
            self._model_replied(leg, event)
        elif isinstance(event, ToolCalled):
            leg.tools[event.call.id] = self._child(
                leg,
                event.step,
                f"execute_tool {event.call.name}",
                {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": event.call.name,
                    "gen_ai.tool.call.id": event.call.id,
                    "gen_ai.tool.type": "function",
                },
            )
        elif isinstance(event, ToolReturned):
            self._tool_returned(leg, event)
        elif isinstance(event, GuardrailEvent):
            r = event.record
            attributes: dict[str, Any] = {
                "stopwise.guardrail.hook": r.hook.value,
                "stopwise.guardrail.name": r.name,
                "stopwise.guardrail.action": r.action,
            }
            if r.reason:
                attributes["stopwise.guardrail.reason"] = r.reason
            if r.tool_call_id:
                attributes["gen_ai.tool.call.id"] = r.tool_call_id
            self._child(leg, event.step, f"stopwise.guardrail {r.name}", attributes).end()
        elif isinstance(event, StopGuardEvent):
            attributes = {"stopwise.stop_guard.event": event.kind, "stopwise.stop_guard.name": event.guard}
            if event.message:
                attributes["stopwise.stop_guard.message"] = event.message
            if event.note:
                attributes["stopwise.stop_guard.note"] = event.note
            self._child(leg, event.step, f"stopwise.stop_guard {event.guard}", attributes).end()
        elif isinstance(event, StepCommitted):
            self._step_committed(leg, event)
        elif isinstance(event, RunFinished):
            del self._legs[event.run_id]
            self._run_finished(leg, event.result)

    # --- spans ------------------------------------------------------------------------------------------------

    def _start_run(self, agent: Agent, event: Event) -> Span:
        return self._tracer.start_span(
            f"invoke_agent {agent.name}",
            kind=SpanKind.INTERNAL,
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent.name,
                "stopwise.run.id": event.run_id,
            },
        )

    def _child(self, leg: _Leg, step: int, name: str, attributes: dict[str, Any], **kw: Any) -> Span:
        parent = leg.steps.get(step, leg.run)
        return self._tracer.start_span(name, context=trace.set_span_in_context(parent), attributes=attributes, **kw)

    def _step_started(self, agent: Agent, leg: _Leg, event: StepStarted) -> None:
        step = self._tracer.start_span(
            f"stopwise.step {event.step}",
            context=trace.set_span_in_context(leg.run),
            attributes={"stopwise.step": event.step, "stopwise.step.forced": event.forced},
        )
        leg.steps[event.step] = step
        model, provider = _model_of(agent)
        attributes: dict[str, Any] = {"gen_ai.operation.name": "chat"}
        if model:
            attributes["gen_ai.request.model"] = model
        if provider:
            attributes["gen_ai.provider.name"] = provider
        leg.model = self._child(leg, event.step, f"chat {model or agent.name}", attributes, kind=SpanKind.CLIENT)

    def _model_replied(self, leg: _Leg, event: ModelReplied) -> None:
        span, leg.model = leg.model, None
        if span is None:
            return
        reply = event.reply
        span.set_attribute("gen_ai.response.finish_reasons", [str(reply.stop_reason.value)])
        if reply.usage is not None:
            span.set_attribute("gen_ai.usage.input_tokens", reply.usage.input_tokens)
            span.set_attribute("gen_ai.usage.output_tokens", reply.usage.output_tokens)
        span.set_attribute("stopwise.tool_calls", len(reply.tool_calls))
        span.end()

    def _tool_returned(self, leg: _Leg, event: ToolReturned) -> None:
        span = leg.tools.pop(event.call.id, None)
        if span is None:
            return
        meta = event.message.metadata
        if meta.get(TOOL_ERROR):
            origin = str(meta.get(ORIGIN, "tool"))
            span.set_attribute("error.type", "denied" if meta.get(DENIED) else f"{origin}_error")
            span.set_status(Status(StatusCode.ERROR))
        span.end()

    def _step_committed(self, leg: _Leg, event: StepCommitted) -> None:
        span = leg.steps.get(event.step)
        if span is None:
            return
        decision = event.decision
        if isinstance(decision, StopDecision):
            span.set_attribute("stopwise.decision.action", decision.action.value)
            if decision.reason is not None:
                span.set_attribute("stopwise.decision.reason", decision.reason.value)
        span.end()
        leg.committed_at[event.step] = time.time_ns()

    def _run_finished(self, leg: _Leg, result: RunResult) -> None:
        now = time.time_ns()
        for d in result.decisions:
            parent = leg.steps.get(d.step)
            if parent is None:  # a decision of an earlier leg of this run: traced with that leg
                continue
            end = leg.committed_at.get(d.step, now)
            attributes: dict[str, Any] = {
                "stopwise.guardian.kind": d.kind,
                "stopwise.guardian.outcome": d.outcome.value,
                "stopwise.guardian.reason": d.reason,
                "stopwise.guardian.evaluator": d.evaluator,
                "stopwise.guardian.escalated": list(d.escalated),
            }
            if d.call_id is not None:
                attributes["gen_ai.tool.call.id"] = d.call_id
            for name, p in d.probabilities.items():
                if p is not None:
                    attributes[f"stopwise.guardian.condition.{name}.p"] = p
            for spec in d.conditions:
                attributes[f"stopwise.guardian.condition.{spec.name}.threshold"] = spec.threshold
            span = self._tracer.start_span(
                f"stopwise.guardian {d.kind}",
                context=trace.set_span_in_context(parent),
                attributes=attributes,
                start_time=end - int(d.latency_ms * 1_000_000),
            )
            span.end(end_time=end)
        open_spans = [*leg.tools.values(), *leg.steps.values()] + ([] if leg.model is None else [leg.model])
        for dangling in open_spans:
            if dangling.is_recording():
                dangling.set_status(Status(StatusCode.ERROR, "the run ended before this finished"))
                dangling.end()
        run = leg.run
        run.set_attribute("gen_ai.conversation.id", result.session_id)
        run.set_attribute("stopwise.status", result.status.value)
        if result.completion_reason is not None:
            run.set_attribute("stopwise.completion_reason", result.completion_reason.value)
        run.set_attribute("stopwise.steps", result.steps)
        run.set_attribute("gen_ai.usage.input_tokens", result.usage.input_tokens)
        run.set_attribute("gen_ai.usage.output_tokens", result.usage.output_tokens)
        if result.pending:
            run.set_attribute("stopwise.pending", [p.call_id for p in result.pending])
        if result.error is not None:
            run.set_attribute("stopwise.error.code", str(result.error.code))
            run.set_attribute("error.type", str(result.error.code))
        if result.status is RunStatus.FAILED:
            run.set_status(Status(StatusCode.ERROR, result.error.message if result.error else ""))
        run.end()


def _model_of(agent: Agent) -> tuple[str | None, str | None]:
    """The model name and provider for the GenAI attributes, where the agent's model says them."""
    model = agent.model
    if isinstance(model, str):
        provider, _, name = model.partition(":")
        return (name or provider), (provider if name else None)
    named = getattr(model, "model", None)
    maker = {"OpenAIModel": "openai", "AnthropicModel": "anthropic"}.get(type(model).__name__)
    return (named if isinstance(named, str) else None), maker
