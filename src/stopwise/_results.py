"""The one ``RunResult`` builder, shared by every runtime: a result is derived from the run record, the run's
records and the session's log and state as committed, never from what a runtime happens to hold in memory."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from stopwise.agent import Agent
from stopwise.approvals import PendingApproval
from stopwise.errors import UnreadableRecord, UnreadableRun
from stopwise.guardian.records import GuardianConfig, GuardianDecision, judge_usage
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.messages import Message, Usage
from stopwise.records import LogRecord, parse_entry, read_typed
from stopwise.result import CompletionReason, RunResult, RunStatus
from stopwise.row_copies import own_row, own_value
from stopwise.stop.guard import guard_report
from stopwise.store.base import RunRecord, SessionSnapshot

__all__ = ["read_pending", "result_from_log", "result_of"]


def read_pending(run: RunRecord) -> tuple[PendingApproval, ...]:
    """The calls a suspended ``run`` waits on, as its record keeps them (``report["pending"]``), every field
    type-checked as a log record's is. ``UnreadableRun`` (naming the session, the run and the field) when one
    cannot be read: a damaged run record, or one a newer version wrote. Their arguments are copies, which the
    caller may change."""
    try:
        data = run.report.get("pending", ())
        if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
            raise UnreadableRecord(f"the pending calls are {type(data).__name__}, not a list")
        pending = (read_typed(PendingApproval, p, "pending call") for p in data)
        # Each with a copy of its arguments: an in-memory log's run record holds the logged call's own.
        return tuple(replace(p, args=own_value(p.args)) for p in pending)
    except UnreadableRecord as exc:
        raise UnreadableRun(run.session_id, run.run_id, exc.why) from exc


def result_of(
    agent: Agent | None,
    run: RunRecord,
    records: Iterable[LogRecord],
    messages: Sequence[Message],
    state: Mapping[str, Any],
) -> RunResult:
    """The result of ``run`` as committed. ``records`` are the run's log records (any types; the builder takes
    what it reports); ``agent`` types the structured output (None: the output stays as stored JSON data)."""
    records = tuple(records)
    output = run.output
    # A blocked input's replacement text is the output as it is, also for an agent with an output type.
    structured = run.completion_reason is not CompletionReason.GUARDRAIL_INPUT
    if agent is not None and agent.output_type is not None and output is not None and structured:
        output = agent.output_type.model_validate(output)
    pending: tuple[PendingApproval, ...] = ()
    if run.status is RunStatus.SUSPENDED:
        pending = read_pending(run)
    has_guard = agent.stop_guard is not None if agent is not None else "stop_guard" in run.report
    return RunResult(
        status=run.status,
        completion_reason=run.completion_reason,
        error=run.error,
        output=output,
        text=run.text,
        usage=run.usage,
        steps=run.steps,
        session_id=run.session_id,
        run_id=run.run_id,
        state=MappingProxyType(dict(state)),
        # Copies: the caller (or an ``on_event`` observer, handed this result) may change them in place, and an
        # in-memory log holds the rows themselves. Made once, at a leg's end.
        messages=tuple(map(own_row, messages)),
        detail=run.detail,
        stop_guard=guard_report(records) if has_guard else None,
        guardrails=tuple(r for r in records if isinstance(r, GuardrailRecord)),
        pending=pending,
        decisions=tuple(r for r in records if isinstance(r, GuardianDecision)),
        sub_usage=Usage(**run.report.get("sub_usage", {})),
        judge_usage=judge_usage(records),
        cost=agent.pricer.price(run.usage) if agent is not None and agent.pricer is not None else None,
    )


def result_from_log(agent: Agent | None, snapshot: SessionSnapshot, run: RunRecord) -> RunResult:
    """The result of ``run`` read back from the store (another process, a durable runtime)."""
    configs: dict[str, GuardianConfig] = {}  # a run's decisions name the config it holds once
    records = (r for e in snapshot.entries if e.run_id == run.run_id for r in parse_entry(e, configs))
    return result_of(agent, run, records, snapshot.messages(), snapshot.state)
