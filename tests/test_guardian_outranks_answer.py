"""The guardian's ``stop_failure`` outranks the actor's final answer, and the run and the decision log agree."""

from __future__ import annotations

from pathlib import Path

from stopwise import Agent, Guardian, Runner, ScriptedModel, SQLiteStore
from stopwise.guardian import GuardianDecision, GuardianOutcome
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.records import parse_records


async def test_a_stop_failure_on_a_final_answer_fails_the_run_infeasible_as_its_decision_record_says(
    tmp_path: Path,
) -> None:
    quiet = {"integrity": 0.0, "goal_reached": 0.0, "stagnation": 0.0, "drift": {"0": 1.0}}
    evaluator = ScriptedEvaluator([{**quiet, "infeasible": 0.99}])
    agent = Agent("a", "", ScriptedModel(["Booked: flight LH123."]), guardian=Guardian(evaluator))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        result = await Runner(store).run(agent, "book a flight to Mars", session_id="s")
        assert (result.status, result.completion_reason) == ("failed", "infeasible")
        assert result.error is not None and result.error.code == "infeasible"
        assert result.text == "Booked: flight LH123."  # the actor's say-so is kept, not taken as the outcome
        assert [(d.kind, d.outcome) for d in result.decisions] == [("turn", GuardianOutcome.STOP_FAILURE)]

        snapshot = await store.load_session("s")
        assert snapshot is not None
        logged = [r for e in snapshot.entries for r in parse_records(e.records) if isinstance(r, GuardianDecision)]
        assert [d.outcome for d in logged] == [GuardianOutcome.STOP_FAILURE]
        record = (await store.list_runs("s"))[-1]
        assert (record.status, record.completion_reason) == ("failed", "infeasible")
    finally:
        await store.close()
