"""The lean log: what a run's guardian decisions share is stored once per run, each decision names it by hash,
and every reader that reads a run's entries in order gets the whole decisions back."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from pathlib import Path

import pytest

from stopwise import Agent, FunctionModel, Guardian, Reply, Risk, Runner, SQLiteStore, ToolCall, tool
from stopwise.errors import UnreadableRecord
from stopwise.guardian.records import GuardianConfig, GuardianDecision, UnresolvedConfig, replay
from stopwise.messages import Message, Role, dump_messages, load_messages
from stopwise.messages import ToolCall as Call
from stopwise.models.base import ModelRequest
from stopwise.records import parse_records, to_data


@tool(risk=Risk.READ_ONLY)
async def bump(n: int) -> int:
    """Add one."""
    return n + 1


def _counting(calls: int) -> FunctionModel:
    def fn(request: ModelRequest) -> Reply:
        done = sum(1 for m in request.messages if m.role is Role.TOOL)
        if done < calls:
            return Reply(tool_calls=[ToolCall("bump", {"n": done})])
        return Reply(text="done")

    return FunctionModel(fn)


def _agent(calls: int, max_steps: int | None = None) -> Agent:
    return Agent(
        name="lean", instructions="x", model=_counting(calls), tools=[bump], guardian=Guardian(), max_steps=max_steps
    )


async def _logged(store: SQLiteStore, session: str) -> list[tuple[str, dict[str, object]]]:
    snapshot = await store.load_session(session)
    assert snapshot is not None
    return [(e.run_id, dict(r)) for e in snapshot.entries for r in e.records]


async def test_a_run_logs_each_guardian_config_once_and_every_decision_names_it(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(_agent(5), "go", session_id="s")
    assert result.status == "completed" and len(result.decisions) == 11  # 5 risk gates, 6 turns
    logged = await _logged(store, "s")
    configs = [r for _, r in logged if r["type"] == GuardianConfig.TYPE]
    decisions = [r for _, r in logged if r["type"] == GuardianDecision.TYPE]
    assert len(configs) == 2  # the turn's conditions and the risk gate's
    assert {r["config"] for r in decisions} == {c["key"] for c in configs}
    assert not any("conditions" in r or "policy" in r for r in decisions)
    await store.close()


async def test_the_log_reads_back_to_the_decisions_the_run_made_and_they_replay(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    result = await Runner(store).run(_agent(3), "go", session_id="s")
    snapshot = await store.load_session("s")
    assert snapshot is not None
    configs: dict[str, GuardianConfig] = {}
    read = [r for e in snapshot.entries for r in parse_records(e.records, configs) if isinstance(r, GuardianDecision)]
    assert read == [_without_unexplaining_notes(d) for d in result.decisions]
    assert [d.probabilities for d in read] == [d.probabilities for d in result.decisions]
    assert all(replay(d).outcome is d.outcome for d in read)
    await store.close()


async def test_a_retried_run_reuses_its_logged_config_and_a_new_run_logs_its_own(tmp_path: Path) -> None:
    store = SQLiteStore(tmp_path / "log.db")
    first = await Runner(store).run(_agent(4, max_steps=2), "go", session_id="s")
    assert first.status == "failed"  # cut off by max_steps; retry() continues the same run
    retried = await Runner(store).retry(_agent(4, max_steps=10), "s")
    assert retried.status == "completed" and retried.run_id == first.run_id
    second = await Runner(store).run(_agent(1), "again", session_id="s")
    logged = await _logged(store, "s")
    per_run = {
        run: sum(1 for rid, r in logged if rid == run and r["type"] == GuardianConfig.TYPE)
        for run in (first.run_id, second.run_id)
    }
    # The second run answers at once (the session's history already holds a result): a turn, no risk gate.
    assert per_run == {first.run_id: 2, second.run_id: 1}
    assert len(retried.decisions) > len(first.decisions)  # the retry's decisions read back whole
    await store.close()


def test_a_decision_whose_config_was_not_read_is_a_typed_error() -> None:
    written: set[str] = set()
    decision = _decision()
    data = to_data([decision], written)
    assert [d["type"] for d in data] == [GuardianConfig.TYPE, GuardianDecision.TYPE]
    assert to_data([decision], written) == (data[1],)  # the config is written once
    with pytest.raises(UnreadableRecord, match="read the run's entries in order") as caught:
        parse_records([data[1]])
    assert isinstance(caught.value.__cause__, UnresolvedConfig)
    assert parse_records(data) == (decision,)
    assert to_data([decision]) == (decision.to_data(),)  # without the run's configs: the whole record


def test_stored_messages_leave_out_their_default_fields_and_read_back_the_same() -> None:
    rows = (
        Message(Role.ASSISTANT, "", (Call("bump", {"n": 7}, "call_1"),)),
        Message(Role.TOOL, "8", tool_call_id="call_1"),
        Message(Role.USER, "hi", metadata={"k": 1}),
    )
    stored = dump_messages(rows)
    assert b"wire_id" not in stored and b'"metadata":{}' not in stored and b'tool_call_id":null' not in stored
    assert load_messages(stored) == rows


def _without_unexplaining_notes(d: GuardianDecision) -> GuardianDecision:
    """``d`` as the log keeps it: a decision that continued keeps the notes of the conditions that held only."""
    if d.outcome.value != "continue" or d.escalated or d.resolved_by is not None:
        return d
    kept = {k: a if d.held.get(k) or a.uncertain else replace(a, note="") for k, a in d.answers.items()}
    return replace(d, answers=kept)


def _decision() -> GuardianDecision:
    from stopwise.guardian.answers import yes
    from stopwise.guardian.conditions import GuardianOutcome
    from stopwise.guardian.policy import PolicyInputs, ThresholdPolicy
    from stopwise.guardian.records import ConditionSpec

    spec = ConditionSpec("stagnation", GuardianOutcome.REPLAN, 0.5, 0.05, ("yes",), (2, 3))
    return GuardianDecision(
        run_id="r",
        step=1,
        kind="turn",
        call_id=None,
        state_hash="h",
        question_set_version="qs",
        evaluator="fixed",
        model_version="1",
        answers={"stagnation": yes(0.1)},
        conditions=(spec,),
        policy=ThresholdPolicy().to_data(),
        inputs=PolicyInputs({"stagnation": (False, False)}, 0, 0),
        outcome=GuardianOutcome.CONTINUE,
        reason="continue",
        latency_ms=0.5,
        held={"stagnation": False},
    )


def test_a_yes_no_answer_is_logged_as_its_p_and_reads_back_bit_for_bit() -> None:
    from stopwise.guardian.answers import Answer

    exact = _decision()
    odd = replace(
        exact,
        answers={"stagnation": Answer({"yes": 0.2, "no": 0.7}, note="does not add up")},
        held={"stagnation": True},  # a condition that held keeps its note
    )
    for decision in (exact, odd):
        written: set[str] = set()
        data = to_data([decision], written)
        (read,) = parse_records(data)
        assert read == decision
    assert "p" in to_data([exact], set())[1]["answers"]["stagnation"]
    assert "distribution" in to_data([odd], set())[1]["answers"]["stagnation"]  # kept whole: no is not 1 - yes


def test_every_field_of_a_decision_survives_the_logs_lean_form() -> None:
    """A field added to ``GuardianDecision`` must be written by ``to_log_data`` too: each optional field is set to a
    value other than its default, and the decision read back from its lean form equals the one written."""
    from dataclasses import fields

    from stopwise.messages import Usage

    decision = replace(
        _decision(),
        call_id="c1",
        resolved_by="judge",
        escalated=("stagnation",),
        state="the projection",
        usage=Usage(10, 2, 1),
        held={"stagnation": True},
    )
    defaults = _decision()
    unset = [
        f.name
        for f in fields(GuardianDecision)
        if f.name not in {"run_id", "step", "kind", "state_hash", "question_set_version", "evaluator"}
        and f.name not in {"model_version", "answers", "conditions", "policy", "inputs", "outcome", "reason"}
        and f.name != "latency_ms"
        and getattr(decision, f.name) == getattr(defaults, f.name)
    ]
    assert unset == []  # the test sets every optional field, including ones added later
    assert parse_records(to_data([decision], set())) == (decision,)


def test_the_log_keeps_the_notes_that_explain_a_decision_and_drops_those_of_a_plain_continue() -> None:
    from stopwise.guardian.answers import yes
    from stopwise.guardian.conditions import GuardianOutcome

    quiet = replace(_decision(), answers={"stagnation": replace(yes(0.1), note="nothing repeats")})
    held = replace(quiet, held={"stagnation": True})  # held, not yet for long enough to fire
    fired = replace(quiet, outcome=GuardianOutcome.REPLAN, reason="stagnation", held={"stagnation": True})
    escalated = replace(quiet, outcome=GuardianOutcome.ESCALATE, reason="stagnation", escalated=("stagnation",))
    (read_quiet,) = parse_records(to_data([quiet], set()))
    assert read_quiet.answers["stagnation"].note == "" and read_quiet.probabilities == quiet.probabilities
    for decision in (held, fired, escalated):
        assert parse_records(to_data([decision], set())) == (decision,)


def test_the_lean_form_leaves_out_the_run_id_and_the_defaults_and_reads_them_back() -> None:
    from stopwise.guardian.policy import PolicyInputs

    decision = replace(_decision(), inputs=PolicyInputs({"stagnation": (False, True)}, replans=1, repeats=0))
    config, logged = to_data([decision], set())
    assert config["run_id"] == "r" and "run_id" not in logged
    assert "outcome" not in logged and "reason" not in logged and logged["held"] == []  # continue; nothing held
    assert logged["inputs"] == {"held_before": {"stagnation": "01"}, "replans": 1}
    assert parse_records((config, logged)) == (decision,)
    budgeted = replace(decision, inputs=replace(decision.inputs, budget_used=0.0, budget="tool_calls"))
    assert parse_records(to_data([budgeted], set())) == (budgeted,)  # a budget used at 0 is not a default


async def test_a_config_logged_without_the_run_id_is_written_again_before_the_next_lean_decision(
    tmp_path: Path,
) -> None:
    """A run begun by a version whose decisions carried their run's id (and whose configs did not): the retry
    writes the config again, with the id, before the first decision that leaves the id out."""
    path = tmp_path / "log.db"
    store = SQLiteStore(path)
    first = await Runner(store).run(_agent(4, max_steps=2), "go", session_id="s")
    assert first.status == "failed"
    await store.close()
    with sqlite3.connect(path) as conn:  # the log as the previous version wrote it
        for seq, text in conn.execute("SELECT seq, records FROM log WHERE records IS NOT NULL").fetchall():
            records = json.loads(text)
            for r in records:
                if r["type"] == GuardianConfig.TYPE:
                    del r["run_id"]
                elif r["type"] == GuardianDecision.TYPE:
                    r["run_id"] = first.run_id
            conn.execute("UPDATE log SET records = ? WHERE seq = ?", (json.dumps(records), seq))
    store = SQLiteStore(path)
    retried = await Runner(store).retry(_agent(4, max_steps=10), "s")
    assert retried.status == "completed" and len(retried.decisions) > len(first.decisions)
    assert {d.run_id for d in retried.decisions} == {first.run_id}
    snapshot = await store.load_session("s")
    assert snapshot is not None
    configs: dict[str, GuardianConfig] = {}
    read = [r for e in snapshot.entries for r in parse_records(e.records, configs) if isinstance(r, GuardianDecision)]
    assert {d.run_id for d in read} == {first.run_id} and len(read) == len(retried.decisions)
    assert all(c.run_id == first.run_id for c in configs.values())  # rewritten with the id
    await store.close()
