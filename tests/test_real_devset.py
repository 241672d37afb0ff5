"""The real development set (issue 14 points 1, 2, 4): recorded runs of real models and annotated real tools,
converted with the library's own projection, provenance and licence per record, split by source; what the rule
evaluator answers where the rules cannot tell; and the per-source regression gate."""

from __future__ import annotations

import json
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest

from stopwise import Agent, Reply, Runner, ScriptedModel, tool
from stopwise.evals.calibration import recalibrated
from stopwise.evals.traces import TraceRecord, projection_to_data, read_traces
from stopwise.guardian import DEFAULT_CONDITIONS, Answer, GuardianOutcome
from stopwise.guardian.evaluators.rule import RuleEvaluator
from stopwise.guardian.evaluators.scripted import ScriptedEvaluator
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import project
from stopwise.messages import Message, Role, ToolCall, encode_tool_result, error_tool_result

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "evals"))

import _real_abp  # noqa: E402
import _real_webshop  # noqa: E402
import _real_workbench  # noqa: E402
import build_realset  # noqa: E402
import evaluate_real  # noqa: E402

REALSET = ROOT / "evals" / "data" / "realset.jsonl"
C = DEFAULT_CONDITIONS.by_name


@pytest.fixture(scope="module")
def records() -> list:  # type: ignore[type-arg]
    return list(read_traces(REALSET, strict=True).records)


# --- the data ----------------------------------------------------------------------------------------------------


def test_every_real_record_names_its_source_licence_and_pinned_provenance(records: list) -> None:  # type: ignore[type-arg]
    assert len(records) >= 600
    for r in records:
        source = build_realset.SOURCES[r.source]
        assert r.license == source.license
        assert source.license in {"MIT", "Apache-2.0"}  # permissive licences that allow redistribution
        assert r.extra["provenance"].startswith(f"{source.repo}@{source.commit[:12]}:")


def test_a_source_is_wholly_in_one_split(records: list) -> None:  # type: ignore[type-arg]
    splits: dict[str, set[str]] = defaultdict(set)
    for r in records:
        splits[r.source].add(r.split)
    assert all(len(s) == 1 for s in splits.values()), dict(splits)


def test_at_least_three_sources_of_real_runs_label_goal_reached(records: list) -> None:  # type: ignore[type-arg]
    sources = {r.source for r in records if r.condition == "goal_reached"}
    assert len(sources) >= 3
    # Every run state is a finished one: the guardian asks goal_reached with a final answer on the table.
    assert all(r.projection.final for r in records if r.condition == "goal_reached")


def test_run_states_are_bounded_as_the_default_guardian_bounds_them(records: list) -> None:  # type: ignore[type-arg]
    g = Guardian(evaluator=RuleEvaluator())
    for r in records:
        p = r.projection
        assert len(p.steps) <= g.history_steps
        assert all(len(c.result) <= g.result_chars + 40 for s in p.steps for c in s.calls)
        assert len(p.text) <= g.max_chars


# --- the conversions ---------------------------------------------------------------------------------------------

REACT_LOG = """
BEGIN TRIAL 1
------------- BEGIN CORRECT AGENTS -------------

Question: Which band did Scott Stapp front?
Thought 1: I need to search Scott Stapp.
Action 1: Search[Scott Stapp]
Observation 1: Scott Stapp is the lead vocalist of Creed.
Thought 2: He fronted Creed.
Action 2: Finish[Creed]
Observation 2: Answer is CORRECT
Correct answer: Creed
------------- BEGIN INCORRECT AGENTS -----------
------------- BEGIN HALTED AGENTS --------------

Question: What creature gained notoriety in 1964?
Thought 1: Search it.
Action 1: Search[American folklore 1964]
Observation 1: Could not find [American folklore 1964]. Similar: ['Folklore'].
Thought 2: Again.
Action 2: Search[American folklore 1964 creature]
Observation 2: Could not find [American folklore 1964 creature]. Similar: [].
BEGIN TRIAL 2
"""


def test_a_react_episode_keeps_its_calls_and_results_and_drops_the_grader_lines() -> None:
    episodes = list(build_realset._react_episodes(REACT_LOG))
    assert [(o, q) for o, q, _ in episodes] == [
        ("correct", "Which band did Scott Stapp front?"),
        ("halted", "What creature gained notoriety in 1964?"),
    ]
    steps = episodes[0][2]
    assert steps[1] == ("He fronted Creed.", "Finish[Creed]", "Answer is CORRECT")
    assert all("Correct answer" not in part for step in steps for part in step)


REFLEXION_LOG = """
BEGIN TRIAL 1
------------- BEGIN CORRECT AGENTS -------------

Question: Which band did Scott Stapp front?
Thought 1: I need to search Scott Stapp.
Action 1: Search[Scott Stapp]
Observation 1: Scott Stapp is the lead vocalist of Creed.
Thought 2: He fronted Creed.
Action 2: Finish[Creed]
Observation 2: Answer is CORRECT
Correct answer: Creed
------------- BEGIN INCORRECT AGENTS -----------
------------- BEGIN HALTED AGENTS --------------
BEGIN TRIAL 2
------------- BEGIN CORRECT AGENTS -------------

Question: Which band did Scott Stapp front?
Thought 1: I need to search Scott Stapp.
Action 1: Search[Scott Stapp]
Observation 1: Scott Stapp is the lead vocalist of Creed.
Thought 2: He fronted Creed.
Action 2: Finish[Creed]
Observation 2: Answer is CORRECT
Correct answer: Creed
------------- BEGIN INCORRECT AGENTS -----------
------------- BEGIN HALTED AGENTS --------------

Question: What creature gained notoriety in 1964?You have attempted to answer following question before and failed.
Reflections:
- I searched in circles; I should have looked up the folklore page.
Thought 1: Search the folklore page.
Action 1: Search[American folklore]
Observation 1: American folklore encompasses the folklores that have evolved in the United States.
Thought 2: Look up 1964.
Action 2: Lookup[1964]
Observation 2: No more results.
"""


def test_the_fresh_react_source_keeps_only_runs_the_first_trial_did_not_hold_and_strips_the_reflections() -> None:
    kept = list(build_realset.reflexion_episodes(REACT_LOG, REFLEXION_LOG))
    # The base log's trial 2 is empty; the Reflexion log's correct episode repeats the base trial 1's (dropped) and
    # is carried over unchanged into its trial 2 (dropped); the halted episode is a new run of a question the base
    # agent halted on, its reflection prompt and reflections gone from the question.
    assert [(log, t, outcome, question) for log, t, _, outcome, question, _ in kept] == [
        (build_realset.REFLEXION_LOG, 2, "halted", "What creature gained notoriety in 1964?")
    ]
    assert kept[0][5][0] == ("Search the folklore page.", "Search[American folklore]", kept[0][5][0][2])
    assert all("Reflections" not in part for step in kept[0][5] for part in step)


def test_the_fresh_react_stagnation_source_is_held_out_pinned_and_holds_no_state_of_the_train_source(
    records: list,  # type: ignore[type-arg]
) -> None:
    source = build_realset.SOURCES["hotpotqa/reflexion"]
    train = build_realset.SOURCES["hotpotqa/react"]
    assert source.split == "test" and source.commit == train.commit and source.license == "MIT"
    made = [r for r in records if r.source == source.name]
    assert {r.condition for r in made} == {"stagnation"}
    assert (len(made), sum(bool(r.label) for r in made)) == (413, 89)
    assert {(r.label, r.kind) for r in made} == {(True, "proxy_halted_at_cap"), (False, "proxy_before_answer")}
    assert {r.extra["outcome"] for r in made if r.label} == {"halted"}

    ids = [r.id for r in made]
    assert len(set(ids)) == len(ids)
    # Runs the train source does not hold: the base log's later trials and the Reflexion log's (episode by episode,
    # duplicates dropped: test_the_fresh_react_source_keeps_only_runs_the_first_trial_did_not_hold...).
    trials = {r.extra["provenance"].split(":", 1)[1] for r in made}
    assert {t.split("#")[0] for t in trials} == {build_realset.REACT_LOG, build_realset.REFLEXION_LOG}
    assert f"{build_realset.REACT_LOG}#trial=1" not in trials


def test_the_grader_verdict_never_reaches_the_state_the_evaluator_reads() -> None:
    class FakeRepo:
        def read(self, path: str) -> str:
            return REACT_LOG

    source = build_realset.SOURCES["hotpotqa/react"]
    made = list(build_realset.react_records(source, FakeRepo()))  # type: ignore[arg-type]
    kinds = [(r.condition, r.label, r.kind) for r in made]
    assert kinds == [
        ("goal_reached", True, "finished_run"),
        ("stagnation", False, "proxy_before_answer"),
        ("stagnation", True, "proxy_halted_at_cap"),
    ]
    finished = made[0].projection
    assert finished.final == "He fronted Creed.\nAnswer: Creed"
    assert "CORRECT" not in finished.text
    assert [c.tool for s in finished.steps for c in s.calls] == ["search"]


def test_a_swe_run_ends_on_its_submission_with_failed_commands_marked() -> None:
    messages = [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "<pr_description>\nFix the separability matrix.\n</pr_description> more"},
        {"role": "assistant", "content": "THOUGHT: Run the tests.\n\n```bash\npytest -q\n```"},
        {"role": "user", "content": "<returncode>1</returncode>\n<output>1 failed</output>"},
        {"role": "assistant", "content": "THOUGHT: Ready.\n\n```bash\necho COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT\n```"},
        {"role": "user", "content": "diff --git a/x.py b/x.py"},
    ]
    goal, turns, final = build_realset._swe_turns(messages)
    assert goal == "Fix the separability matrix."
    assert turns[0] == ("Run the tests.", "bash", {"command": "pytest -q"}, "1 failed", True)
    assert turns[1][1:4] == (
        "bash",
        {"command": "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"},
        "diff --git a/x.py b/x.py",
    )
    assert final == "Ready."


@pytest.mark.parametrize(
    ("read_only", "destructive", "label"),
    [
        (True, None, "read_only"),
        (False, True, "irreversible"),
        (False, False, "reversible"),
        (False, None, "reversible"),
    ],
)
def test_mcp_annotations_map_onto_the_risk_classes(read_only: bool, destructive: bool | None, label: str) -> None:
    assert build_realset._risk_label(read_only, destructive) == label


class _FakeRepo:
    """A pinned tree in memory: what the risk readers call on a clone (``files`` under a prefix, ``read``)."""

    def __init__(self, tree: dict[str, str]) -> None:
        self.tree = tree

    def files(self, prefix: str) -> list[str]:
        return sorted(p for p in self.tree if p.startswith(prefix))

    def read(self, path: str) -> str:
        return self.tree[path]


def test_a_go_tool_definition_is_read_with_its_own_annotations_only() -> None:
    go = """var A = mcpgrafana.MustTool(
\t"update_dashboard",
\t"Create or update (a dashboard).",
\tupdateDashboard,
\tmcp.WithReadOnlyHintAnnotation(false),
\tmcp.WithDestructiveHintAnnotation(true),
)

// a later tool's annotations must not leak into the one before
var B = mcpgrafana.MustTool(
\t"list_teams",
\t"List teams.",
\tlistTeams,
\tmcp.WithReadOnlyHintAnnotation(true),
)

var C = mcpgrafana.MustTool(
\t"unannotated_tool",
\t"No hints.",
\tfn,
)
"""
    repo = _FakeRepo({"tools/dashboard.go": go, "tools/dashboard_test.go": go.replace("list_teams", "test_only")})
    assert list(build_realset._grafana_tools(repo)) == [  # type: ignore[arg-type]
        ("update_dashboard", "irreversible", "tools/dashboard.go"),
        ("list_teams", "read_only", "tools/dashboard.go"),
    ]


def test_typescript_tool_definitions_keyed_or_named_are_read_with_their_annotations() -> None:
    keyed = """export const databaseToolDefs = {
  list_tables: {
    description: 'Lists all tables.',
    annotations: {
      readOnlyHint: true,
      destructiveHint: false,
    },
  },
  execute_sql: {
    annotations: {
      readOnlyHint: false,
      destructiveHint: true,
    },
  },
};
"""
    named = """export const NEON_TOOLS = [
  {
    name: 'create_branch' as const,
    annotations: { readOnlyHint: false, destructiveHint: false },
  },
];
"""
    supabase = _FakeRepo({"packages/mcp-server-supabase/src/tools/database-operation-tools.ts": keyed})
    assert [t[:2] for t in build_realset._supabase_tools(supabase)] == [  # type: ignore[arg-type]
        ("list_tables", "read_only"),
        ("execute_sql", "irreversible"),
    ]
    neon = _FakeRepo({"mcp/tools/definitions.ts": named})
    assert [t[:2] for t in build_realset._neon_tools(neon)] == [("create_branch", "reversible")]  # type: ignore[arg-type]


def test_risk_is_reported_beside_a_destructive_verb_in_the_name_and_the_names_length(records: list) -> None:  # type: ignore[type-arg]
    def pending(name: str) -> TraceRecord:
        p = project([Message.user("x")], goal="x", pending=ToolCall(name, {}, id="p"))
        return TraceRecord(f"risk/{name}", "risk", "read_only", "test", "s", projection_to_data(p))

    assert evaluate_real.risk_baselines(pending("deleteBranch"))["destructive_verb"] == 1.0
    assert evaluate_real.risk_baselines(pending("undelete_items"))["destructive_verb"] == 0.0
    assert evaluate_real.risk_baselines(pending("list_pods"))["name_length"] == 9.0
    table = evaluate_real.score([r for r in records if r.source == "mcp/supabase-mcp"], RuleEvaluator())
    row = table["risk mcp/supabase-mcp"]
    assert row["auroc_destructive_verb"] is not None and row["auroc_name_length"] is not None
    assert "auroc_reply_length" not in row


# --- what the rules answer where they cannot tell ------------------------------------------------------------------


def state(criteria: tuple[str, ...], final: str | None, *steps: tuple[str, str, str]) -> object:
    rows = [Message.user("Which band did Scott Stapp front?")]
    for n, (name, query, result) in enumerate(steps):
        call = ToolCall(name, {"query": query}, id=f"c{n}")
        rows += [Message(Role.ASSISTANT, f"Step {n}", (call,)), encode_tool_result(result, tool_call_id=call.id)]
    return project(rows, goal="Which band did Scott Stapp front?", criteria=criteria, final=final)


def test_without_criteria_goal_reached_answers_the_base_rate_of_real_runs_and_says_it_cannot_tell() -> None:
    rules = RuleEvaluator()
    open_map = rules.coefficients.goal_reached_open
    assert open_map is not None and open_map.weights == {}
    backed = state((), "Scott Stapp fronted Creed.", ("search", "Scott Stapp", "Scott Stapp fronted Creed."))
    vague = state((), "Done.", ("search", "Scott Stapp", "Could not find [Scott Stapp]."))
    answers = [rules.answer(p, C["goal_reached"]) for p in (backed, vague)]  # type: ignore[arg-type]
    assert answers[0].p(("yes",)) == answers[1].p(("yes",)) == pytest.approx(open_map.p({}))
    assert 0.3 < open_map.p({}) < 0.5  # the recorded runs' base rate, well below the stop threshold
    assert all(a.defer and a.note.startswith("no acceptance criteria and no word from the tools") for a in answers)


def judge(goal_reached: float) -> ScriptedEvaluator:
    """A judge that answers the turn's questions: quiet on all but goal_reached."""
    quiet = {
        "integrity": 0.0,
        "infeasible": 0.0,
        "stagnation": 0.0,
        "drift": {"4": 1.0, "3": 0, "2": 0, "1": 0, "0": 0},
    }
    return ScriptedEvaluator([{**quiet, "goal_reached": goal_reached}] * 4)


def answering(final: str) -> ScriptedModel:
    return ScriptedModel([Reply(tool_calls=[ToolCall("web_search", {"query": "Scott Stapp band"}, id="s1")]), final])


@tool
def web_search(query: str) -> str:
    """Search the web."""
    return "Scott Stapp is the lead vocalist of Creed, a rock band from Tallahassee."


async def test_where_the_rules_cannot_tell_a_configured_judge_answers_goal_reached_at_the_finish() -> None:
    stops = judge(0.95)
    agent = Agent("qa", "", answering("Creed."), tools=[web_search], guardian=Guardian(judge=stops))
    runner = Runner()
    result = await runner.run(agent, "Which band did Scott Stapp front?", session_id="s")
    assert result.status == "completed"
    finish = [d for d in result.decisions if d.kind == "turn"][-1]
    assert finish.resolved_by == "judge" and finish.outcome is GuardianOutcome.STOP_SUCCESS
    assert stops.calls == 1  # asked at the finish only: before it there is no final answer to judge
    snapshot = await runner.store.load_session("s")
    assert snapshot is not None
    labels = [r for e in snapshot.entries for r in e.records if r.get("type") == "guardian_label"]
    assert [(x["condition"], x["label"], x["source"]) for x in labels] == [("goal_reached", True, "judge")]


async def test_without_a_judge_the_base_rate_neither_stops_nor_escalates_the_finish() -> None:
    agent = Agent("qa", "", answering("Creed."), tools=[web_search], guardian=Guardian())
    result = await Runner().run(agent, "Which band did Scott Stapp front?")
    assert result.status == "completed" and result.pending == ()
    finish = [d for d in result.decisions if d.kind == "turn"][-1]
    assert finish.outcome is GuardianOutcome.CONTINUE and finish.resolved_by is None
    assert finish.answers["goal_reached"].defer


async def test_the_stop_guard_lets_a_finish_stand_when_the_rules_cannot_tell_and_no_judge_is_there() -> None:
    model = ScriptedModel(["Creed.", "Creed, really."])
    agent = Agent("qa", "", model, stop_guard=Guardian().as_stop_guard())
    result = await Runner().run(agent, "Which band did Scott Stapp front?")
    assert result.output == "Creed."
    assert not [m for m in result.messages if m.metadata.get("source") == "stop_guard"]


async def test_the_stop_guard_asks_the_judge_when_the_rules_cannot_tell() -> None:
    model = ScriptedModel(["Creed.", "Creed (Scott Stapp's band, from Tallahassee)."])
    agent = Agent("qa", "", model, stop_guard=Guardian(judge=judge(0.05)).as_stop_guard(max_continues=1))
    result = await Runner().run(agent, "Which band did Scott Stapp front?")
    feedback = [m.content for m in result.messages if m.metadata.get("source") == "stop_guard"]
    assert len(feedback) == 1 and "Which band did Scott Stapp front?" in feedback[0]


def test_a_deferred_answer_survives_the_decision_log_and_a_recalibration() -> None:
    deferred = Answer({"yes": 0.4, "no": 0.6}, note="base rate", defer=True)
    assert Answer.from_data(deferred.to_data()) == deferred
    assert recalibrated(deferred, ("yes",), 0.3).defer
    plain = Answer({"yes": 0.4, "no": 0.6})
    assert "defer" not in plain.to_data() and Answer.from_data(plain.to_data()) == plain


def test_with_criteria_goal_reached_still_reads_the_evidence() -> None:
    rules = RuleEvaluator()
    criteria = ("the band Scott Stapp fronted",)
    backed = state(criteria, "Scott Stapp fronted Creed.", ("search", "Scott Stapp", "Scott Stapp fronted Creed."))
    claim = state(criteria, "Scott Stapp fronted Creed.")
    p_backed, p_claim = (rules.answer(p, C["goal_reached"]).p(("yes",)) for p in (backed, claim))  # type: ignore[arg-type]
    assert p_backed > p_claim
    assert not rules.answer(backed, C["goal_reached"]).defer  # type: ignore[arg-type]


def test_searches_that_found_nothing_add_no_information() -> None:
    rules = RuleEvaluator()
    stuck = state(
        (),
        None,
        ("search", "Scott Stapp", "Scott Stapp is a singer."),
        ("search", "Stapp band 1995", "Could not find [Stapp band 1995]. Similar: ['Creed']."),
        ("search", "Stapp band Florida", "No results found for Stapp band Florida."),
    )
    moving = state(
        (),
        None,
        ("search", "Scott Stapp", "Scott Stapp is a singer."),
        ("search", "Stapp band", "Scott Stapp fronted Creed from 1994."),
        ("lookup", "Creed", "Creed is a rock band from Tallahassee."),
    )
    p_stuck, p_moving = (rules.answer(p, C["stagnation"]).p(("yes",)) for p in (stuck, moving))  # type: ignore[arg-type]
    assert p_stuck > C["stagnation"].threshold > p_moving


def test_a_write_that_returns_nothing_is_not_an_empty_handed_search() -> None:
    rules = RuleEvaluator()
    writes = state(
        (),
        None,
        ("search", "Scott Stapp", "Scott Stapp is a singer."),
        ("write_file", "notes.md", ""),
        ("write_file", "summary.md", ""),
    )
    assert rules.answer(writes, C["stagnation"]).p(("yes",)) < C["stagnation"].threshold  # type: ignore[arg-type]


# --- what the run says about itself (AutoGPT's benchmark reports) -------------------------------------------------


def report(*attempts: dict) -> dict:  # type: ignore[type-arg]
    """An agbenchmark report in its own schema, with only the fields the excerpt reads."""
    return {"tests": {"ReadFile": {"category": ["general"], "task": "Copy a file", "results": list(attempts)}}}


def step(speak: str, command: str, args: dict, done: dict | None = None) -> dict:  # type: ignore[type-arg]
    """One agbenchmark step: what the agent said and chose, and the result of the previous step's command."""
    out: dict = {"thoughts": {"speak": speak}, "command": {"name": command, "args": args}}  # type: ignore[type-arg]
    if done is not None:
        out["last_action"] = done
    return {"additional_output": out}


def test_a_benchmark_report_keeps_the_attempts_that_finished_each_command_with_its_result() -> None:
    read = {"name": "read_file", "result": {"outputs": "Hello World!\n", "status": "success"}}
    missing = {"name": "read_file", "result": {"error": "CommandExecutionError('no file')", "reason": "no file"}}
    finished = {
        "success": True,
        "steps": [
            step("Reading it.", "read_file", {"filename": "in.txt"}),
            step("Writing it.", "write_file", {"filename": "out.txt", "contents": "x" * 500}, read),
            step("Done.", "finish", {"reason": "Copied."}, {"name": "write_file", "result": {"outputs": "ok"}}),
            {"additional_output": {"task_total_cost": 0.1}},
        ],
    }
    cut_off = {"success": False, "reached_cutoff": True, "steps": [step("Reading.", "read_file", {"f": "a"}, missing)]}
    erred = {"success": False, "steps": [step("Read.", "read_file", {"f": "b"}), step("Stop.", "finish", {}, missing)]}
    made = list(build_realset.compact_report(report(finished, cut_off, erred), "r1"))
    assert [(a["attempt"], a["success"]) for a in made] == [(0, True), (2, False)]
    first = made[0]["steps"]
    assert first[0] == ["Reading it.", "read_file", {"filename": "in.txt"}, "Hello World!\n", "success"]
    assert first[1][2]["contents"] == "x" * build_realset.ARG_CHARS  # cut as the evaluator reads it
    assert first[-1] == ["Done.", "finish", {"reason": "Copied."}, None, None]
    assert made[1]["steps"][0][3:] == ["no file", "error"]


def test_an_autogpt_attempt_becomes_the_state_at_its_finish_labelled_by_the_grader_alone() -> None:
    source = build_realset.SOURCES["autogpt/2024-04-01"]
    made = list(build_realset.autogpt_records(source, None))
    assert len(made) == 15 and {r.condition for r in made} == {"goal_reached"}
    for r in made:
        assert r.split == "train" and r.projection is not None and r.projection.final
        assert r.extra["provenance"].startswith(f"{source.repo}@{source.commit[:12]}:{source.excerpt}#tests/")
        assert "fail_reason" not in r.projection.text and "EvalResult" not in r.projection.text
    held = build_realset.SOURCES["autogpt/2024-03-05"]
    assert held.split == "test" and held.excerpt != source.excerpt


def test_the_workbench_sources_are_split_by_domain_never_fitted_pinned_and_labelled_by_the_benchmarks_check(
    records: list,  # type: ignore[type-arg]
) -> None:
    dev, held, fresh, third = (
        build_realset.SOURCES[f"workbench/{name}"] for name in ("dev", "heldout", "heldout2", "heldout3")
    )
    # None is fitted on (fit_real fits on the train split only): the dev domains were read to choose the rule,
    # the held-out ones only scored.
    assert dev.split == "dev" and held.split == fresh.split == third.split == "test"
    made = [r for r in records if r.source in (dev.name, held.name) and r.condition == "goal_reached"]
    grades = _real_workbench.read_grades()
    assert len(made) == len(grades) == _real_workbench.SAMPLE + 89  # the second draw grew the held-out domains
    held_domains = set(_real_workbench.HELD_OUT_DOMAINS)
    assert all((r.extra["family"] in held_domains) is (r.source == held.name) for r in made)
    assert sum(r.source == held.name for r in made) == _real_workbench.HELD_OUT_RUNS * len(held_domains)
    dev_made = [r for r in made if r.source == dev.name]
    assert (len(dev_made), sum(r.label for r in dev_made)) == (229, 67)  # as WorkBench's is_correct graded them
    assert (ROOT / "evals" / "third_party" / "workbench" / "LICENSE").read_text(encoding="utf-8").startswith("MIT")
    # The fresh draw: runs of the held-out domains that neither earlier draw took, graded apart.
    fresh_made = [r for r in records if r.source == fresh.name]
    fresh_grades = _real_workbench.read_grades(_real_workbench.GRADES_FRESH)
    assert len(fresh_made) == len(fresh_grades) == _real_workbench.FRESH_RUNS * len(held_domains)
    assert Counter(r.extra["family"] for r in fresh_made) == dict.fromkeys(held_domains, _real_workbench.FRESH_RUNS)
    assert {r.extra["provenance"] for r in fresh_made}.isdisjoint(r.extra["provenance"] for r in made)
    assert sum(r.label for r in fresh_made) == 43  # as WorkBench's is_correct graded them
    # The third draw: runs of the held-out domains that no earlier draw took, graded apart.
    third_made = [r for r in records if r.source == third.name]
    third_grades = _real_workbench.read_grades(_real_workbench.GRADES_THIRD)
    assert len(third_made) == len(third_grades) == _real_workbench.THIRD_RUNS * len(held_domains)
    assert Counter(r.extra["family"] for r in third_made) == dict.fromkeys(held_domains, _real_workbench.THIRD_RUNS)
    assert {r.extra["provenance"] for r in third_made}.isdisjoint(r.extra["provenance"] for r in made + fresh_made)
    assert sum(r.label for r in third_made) == 35  # as WorkBench's is_correct graded them
    by_source = {held.name: grades, dev.name: grades, fresh.name: fresh_grades, third.name: third_grades}
    for r in made + fresh_made + third_made:
        assert r.condition == "goal_reached" and r.license == "MIT" and r.kind == "finished_run"
        where = r.extra["provenance"].removeprefix(f"olly-styles/WorkBench@{_real_workbench.COMMIT[:12]}:")
        path, row = where.split("#row=")
        assert path.startswith("data/results/") and path.endswith(".csv")
        assert by_source[r.source][(path, int(row))] is r.label
        assert r.extra["outcome"] == ("correct" if r.label else "incorrect")
        assert r.extra["model"] in {"gpt-4", "gpt-3.5", "claude-2", "llama2-70b", "mistral-8x7B"}
        assert r.id.startswith(f"goal_reached/{r.source}/{r.extra['family']}/{r.extra['model']}_")
        assert r.id.endswith(f"/{row}") and path.split("/")[2] == r.extra["family"]


def test_the_grown_workbench_sample_keeps_the_first_draw_and_adds_runs_of_the_held_out_domains_only() -> None:
    domains = ["calendar", "email", *_real_workbench.HELD_OUT_DOMAINS]
    runs = [
        _real_workbench.WorkBenchRun(f"{_real_workbench.RESULTS}/{d}/gpt-4_all_2024.csv", n, "task", (), "Done.")
        for d in domains
        for n in range(150)
    ]
    first = {(r.path, r.row) for r in random.Random(_real_workbench.SEED).sample(runs, _real_workbench.SAMPLE)}
    chosen = _real_workbench.sample(runs)
    keys = {(r.path, r.row) for r in chosen}
    assert first <= keys and len(keys) == len(chosen)  # the pre-registered draw is kept, nothing drawn twice
    added = Counter(r.domain for r in chosen if (r.path, r.row) not in first)
    assert set(added) <= set(_real_workbench.HELD_OUT_DOMAINS)
    held = Counter(r.domain for r in chosen)
    assert all(
        held[d] == max(_real_workbench.HELD_OUT_RUNS, sum(k[0].split("/")[2] == d for k in first))
        for d in _real_workbench.HELD_OUT_DOMAINS
    )
    assert _real_workbench.sample(runs) == chosen  # a fixed seed: the same runs every build


def test_the_fresh_workbench_draw_takes_only_held_out_runs_no_earlier_draw_took() -> None:
    domains = ["calendar", "email", *_real_workbench.HELD_OUT_DOMAINS]
    runs = [
        _real_workbench.WorkBenchRun(f"{_real_workbench.RESULTS}/{d}/gpt-4_all_2024.csv", n, "task", (), "Done.")
        for d in domains
        for n in range(300)
    ]
    earlier = {(r.path, r.row) for r in _real_workbench.sample(runs)}
    fresh = _real_workbench.fresh_sample(runs)
    assert earlier.isdisjoint((r.path, r.row) for r in fresh) and len(set(fresh)) == len(fresh)
    assert Counter(r.domain for r in fresh) == dict.fromkeys(
        _real_workbench.HELD_OUT_DOMAINS, _real_workbench.FRESH_RUNS
    )
    assert _real_workbench.fresh_sample(runs) == fresh  # a fixed seed: the same runs every build


def test_the_third_workbench_draw_takes_only_held_out_runs_neither_earlier_draw_took() -> None:
    domains = ["calendar", "email", *_real_workbench.HELD_OUT_DOMAINS]
    runs = [
        _real_workbench.WorkBenchRun(f"{_real_workbench.RESULTS}/{d}/gpt-4_all_2024.csv", n, "task", (), "Done.")
        for d in domains
        for n in range(300)
    ]
    earlier = {(r.path, r.row) for r in (*_real_workbench.sample(runs), *_real_workbench.fresh_sample(runs))}
    third = _real_workbench.third_sample(runs)
    assert earlier.isdisjoint((r.path, r.row) for r in third) and len(set(third)) == len(third)
    assert Counter(r.domain for r in third) == dict.fromkeys(
        _real_workbench.HELD_OUT_DOMAINS, _real_workbench.THIRD_RUNS
    )
    assert _real_workbench.third_sample(runs) == third  # a fixed seed: the same runs every build


def test_the_workbench_stagnation_draw_takes_every_cut_off_run_and_three_answered_runs_no_goal_draw_took() -> None:
    domains = ["calendar", "email", *_real_workbench.HELD_OUT_DOMAINS]
    step = _real_workbench.Step("", "calendar.search_events", {"query": "x"}, "[]", False)

    def run(domain: str, n: int, steps: int) -> _real_workbench.WorkBenchRun:
        return _real_workbench.WorkBenchRun(
            f"{_real_workbench.RESULTS}/{domain}/gpt-4_all_2024.csv", n, "task", (step,) * steps, "Done."
        )

    finished = [run(d, n, 1 + n % 3) for d in domains for n in range(400)]
    cut_off = [run(d, 1000 + n, 20) for d in domains for n in range(5)] + [run("email", 2000, 0)]
    goal_draws = {
        (r.path, r.row)
        for r in (
            *_real_workbench.sample(finished),
            *_real_workbench.fresh_sample(finished),
            *_real_workbench.third_sample(finished),
        )
    }
    held = set(_real_workbench.HELD_OUT_DOMAINS)
    for held_out in (False, True):
        stuck, answered = _real_workbench.stagnation_runs(cut_off, finished, held_out=held_out)
        # Every cut-off run of this side of the split that made a call (the one with none has no state to judge).
        assert stuck == [r for r in cut_off if (r.domain in held) is held_out and r.steps]
        assert len(answered) == _real_workbench.ANSWERED_PER_CUT_OFF * len(stuck) == 30
        assert all((r.domain in held) is held_out and r.steps for r in answered)
        assert goal_draws.isdisjoint((r.path, r.row) for r in answered)  # never a state of a goal_reached draw
        assert _real_workbench.stagnation_runs(cut_off, finished, held_out=held_out) == (stuck, answered)


def test_the_workbench_dev_stagnation_records_are_its_domains_cut_off_runs_against_answered_ones(
    records: list,  # type: ignore[type-arg]
) -> None:
    made = [r for r in records if r.source == "workbench/dev" and r.condition == "stagnation"]
    stuck = [r for r in made if r.label]
    answered = [r for r in made if not r.label]
    # Every cut-off run of the dev domains (159 of WorkBench's 180), three answered runs for each.
    assert (len(stuck), len(answered)) == (159, 3 * 159)
    assert {r.kind for r in stuck} == {"proxy_halted_at_cap"} and {r.extra["outcome"] for r in stuck} == {"halted"}
    assert {r.kind for r in answered} == {"proxy_before_answer"}
    assert not {r.extra["family"] for r in made} & set(_real_workbench.HELD_OUT_DOMAINS)
    goal = {r.extra["provenance"] for r in records if r.source.startswith("workbench/") and r.condition != "stagnation"}
    assert goal.isdisjoint(r.extra["provenance"] for r in answered)
    for r in made:
        assert r.projection is not None and r.projection.final is None and r.projection.steps  # no answer yet
        assert r.id.startswith(f"stagnation/workbench/dev/{r.extra['family']}/{r.extra['model']}_")


def test_the_held_out_workbench_stagnation_source_holds_only_the_held_out_domains_and_is_never_fitted(
    records: list,  # type: ignore[type-arg]
) -> None:
    source = build_realset.SOURCES[build_realset.STUCK_SOURCE]
    assert source.split == "test" and source.commit == _real_workbench.COMMIT and source.license == "MIT"
    made = [r for r in records if r.source == source.name]
    assert {r.condition for r in made} == {"stagnation"}
    # Every cut-off run of CRM (6) and project management (15), three answered runs for each.
    stuck = Counter(r.extra["family"] for r in made if r.label)
    assert stuck == {"customer_relationship_manager": 6, "project_management": 15}
    assert sum(not r.label for r in made) == 3 * 21
    assert {r.extra["family"] for r in made} == set(_real_workbench.HELD_OUT_DOMAINS)
    assert {(r.label, r.kind, r.extra["outcome"]) for r in made} == {
        (True, "proxy_halted_at_cap", "halted"),
        (False, "proxy_before_answer", "answered"),
    }
    # Disjoint from the dev side and from every state a goal_reached draw made of a run.
    dev = {r.extra["provenance"] for r in records if r.source == "workbench/dev"}
    goal = {r.extra["provenance"] for r in records if r.condition == "goal_reached"}
    assert dev.isdisjoint(r.extra["provenance"] for r in made)
    assert goal.isdisjoint(r.extra["provenance"] for r in made if not r.label)


WORKBENCH_RESPONSE = (
    "{'input': 'Delete my last email from nadia', 'output': 'The last email from Nadia has been deleted.', "
    "'intermediate_steps': [(AgentAction(tool='email.search_emails', tool_input={'query': 'nadia'}, "
    "log='Thought: I look for it first.\\nAction:\\n```\\n{}\\n```'), [{'email_id': '00000479', 'views': nan, "
    "'scores': array([1, 2])}]), (AgentAction(tool='email.delete_email', tool_input={'email_id': '00000479'}, "
    "log='```{}```'), 'Email deleted successfully.'), (AgentAction(tool='mail.send', tool_input='x', log=''), "
    "'mail.send is not a valid tool, try one of [email.send_email].')]}"
)


def test_a_workbench_response_becomes_its_calls_with_their_results_without_evaluating_the_text() -> None:
    final, steps = _real_workbench.parse_response(WORKBENCH_RESPONSE)
    assert final == "The last email from Nadia has been deleted."
    first, second, third = steps
    assert (first.thought, first.tool, first.args) == (
        "I look for it first.",
        "email.search_emails",
        {"query": "nadia"},
    )
    assert json.loads(first.result) == [{"email_id": "00000479", "views": None, "scores": [1, 2]}]
    assert (second.tool, second.result, second.failed) == ("email.delete_email", "Email deleted successfully.", False)
    assert third.args == {"input": "x"} and third.failed  # the harness's answer to a tool that does not exist
    with pytest.raises(_real_workbench.ResponseError):
        _real_workbench.parse_response("__import__('os').system('true')")


def test_only_workbench_runs_that_ended_on_an_answer_are_finished_runs() -> None:
    header = "query,function_calls,full_response,error\n"

    def row(query: str, output: str, error: str = "") -> str:
        response = f"{{'input': '{query}', 'output': '{output}', 'intermediate_steps': []}}"
        return f'{query},[],"{response}",{error}\n'

    table = header + row("a", "Done.") + row("b", _real_workbench.CUT_OFF) + row("c", "", "Context window exceeded")
    table += 'd,[],"not a response",\n'
    files = {"data/results/email/gpt-4_all_2024-03-21.csv": table}
    runs = list(_real_workbench.finished_runs(files.__getitem__, list(files)))
    assert [(r.query, r.row, r.key, r.model, r.domain) for r in runs] == [
        ("a", 0, "email/gpt-4_all/0", "gpt-4", "email")
    ]


def test_the_webshop_source_is_held_out_pinned_and_labelled_by_the_stores_reward(
    records: list,  # type: ignore[type-arg]
) -> None:
    source = build_realset.SOURCES["webshop/react"]
    assert source.split == "test" and source.commit == _real_webshop.COMMIT and source.license == "MIT"
    made = {r.id.rsplit("/", 1)[1]: r for r in records if r.source == source.name and r.condition == "goal_reached"}
    assert len(made) == _real_webshop.SAMPLE == 200
    assert sum(r.label for r in made.values()) == 72  # reward 1.0, as the store scored the purchases
    for key, r in made.items():
        assert r.condition == "goal_reached" and r.kind == "finished_run"
        assert r.extra["provenance"] == f"ysymyth/ReAct@{source.commit[:12]}:WebShop.ipynb#episode={key[6:]}"
        assert r.label is (r.extra["reward"] == 1.0)
        assert r.extra["outcome"] == ("success" if r.label else "partial" if r.extra["reward"] > 0 else "failed")
        assert r.projection.final.endswith(_real_webshop.BUY)
        assert "Your score" not in r.projection.text  # the reward never reaches the state
    # A few runs as the notebook printed them.
    assert (made["fixed_1"].label, made["fixed_1"].extra["reward"]) == (True, 1.0)
    assert made["fixed_1"].projection.goal.startswith("i want a noise cancelling cosycost usb microphone")
    assert (made["fixed_141"].label, made["fixed_141"].extra["reward"]) == (False, 0.0)  # bought at $54.99, < $40 asked
    assert made["fixed_141"].projection.final.startswith("The product is a bit over the price")
    assert (made["fixed_54"].label, made["fixed_54"].extra["reward"]) == (False, 0.75)
    assert (made["fixed_300"].label, made["fixed_300"].extra["outcome"]) == (False, "partial")


def test_the_webshop_stagnation_records_are_every_cut_off_run_against_every_run_that_bought(
    records: list,  # type: ignore[type-arg]
) -> None:
    made = {r.id.rsplit("/", 1)[1]: r for r in records if r.source == "webshop/react" and r.condition == "stagnation"}
    # All 500 printed runs, none drawn: the 35 the harness cut off at its 15-action cap, the 465 that bought.
    assert (len(made), sum(bool(r.label) for r in made.values())) == (500, 35)
    assert {(r.label, r.kind, r.extra["outcome"]) for r in made.values()} == {
        (True, "proxy_halted_at_cap", "cut_off"),
        (False, "proxy_before_answer", "bought"),
    }
    goal = {r.id.rsplit("/", 1)[1]: r for r in records if r.source == "webshop/react" and r.condition == "goal_reached"}
    for key, r in made.items():
        assert r.projection.final is None  # no purchase in the state
        assert "Your score" not in r.projection.text
        if key in goal:  # a bought run's state before its purchase: the finished state less the purchase
            assert r.projection.steps == goal[key].projection.steps and goal[key].projection.final is not None
    assert made["fixed_1"].label is False and made["fixed_1"].projection.steps[-1].calls[0].tool == "click"


def test_the_abp_stagnation_source_is_held_out_pinned_and_holds_every_run_cut_off_or_answered(
    records: list,  # type: ignore[type-arg]
) -> None:
    made = [r for r in records if r.source == "abp/online-mind2web"]
    source = build_realset.SOURCES["abp/online-mind2web"]
    assert (source.repo, source.commit, source.split) == (_real_abp.REPO, _real_abp.COMMIT, "test")
    # Every run, none drawn: 37 cut off at the harness's turn limit, 264 that submitted an answer; stagnation only.
    assert (len(made), sum(bool(r.label) for r in made)) == (301, 37)
    assert {(r.condition, r.label, r.kind, r.extra["outcome"]) for r in made} == {
        ("stagnation", True, "proxy_halted_at_cap", "cut_off"),
        ("stagnation", False, "proxy_before_answer", "answered"),
    }
    for r in made:
        assert r.projection.final is None  # the answer is not in the state
        assert r.extra["provenance"].endswith("/result.json")
        # The actions returned screenshots only: no result text reaches a state.
        assert all(c.result == "" for s in r.projection.steps for c in s.calls)


def test_an_abp_run_becomes_its_actions_as_calls_with_one_turns_words_on_its_first_action() -> None:
    record = {
        "task_id": "t1",
        "task": "Find a flight.",
        "result_status": "error_max_turns",
        "final_result_response": "",
        "action_history": [
            "Navigate to https://air.example/",
            "Click at (600, 475)",
            'Type "Oslo"',
            "Press ENTER",
            "Scroll (delta_x=0, delta_y=-400)",
            "Select picker sp_4 -> Select option(s) [211]",
        ],
        "thoughts": ["", "I see a search box.", "I see a search box.", "I see a search box.", "Results.", "Sort."],
    }
    run = _real_abp.run_of(json.dumps(record))
    assert run.cut_off and run.task == "Find a flight."
    assert [(a.thought, a.tool, a.args) for a in run.actions] == [
        ("", "navigate", {"url": "https://air.example/"}),
        ("I see a search box.", "click", {"x": 600, "y": 475}),
        ("", "type", {"text": "Oslo"}),
        ("", "press", {"key": "ENTER"}),
        ("Results.", "scroll", {"delta_x": 0, "delta_y": -400}),
        ("Sort.", "select", {"action": "Select picker sp_4 -> Select option(s) [211]"}),
    ]


def test_an_abp_record_with_an_unknown_status_or_unpaired_thoughts_is_refused() -> None:
    base = {"task_id": "t", "task": "x", "result_status": "success", "action_history": ["Navigate back"]}
    with pytest.raises(_real_abp.RunError, match="1 actions against 0 thoughts"):
        _real_abp.run_of(json.dumps(base | {"thoughts": []}))
    with pytest.raises(_real_abp.RunError, match="unknown status"):
        _real_abp.run_of(json.dumps(base | {"thoughts": [""], "result_status": "timeout"}))
    with pytest.raises(_real_abp.RunError, match="no 'thoughts'"):
        _real_abp.run_of(json.dumps(base))


def test_a_webshop_run_cut_off_is_stuck_at_its_last_call_and_one_that_bought_is_not_before_it() -> None:
    found = _real_webshop.episodes(_real_webshop.run_output(_notebook(WEBSHOP_OUTPUT)))
    source = build_realset.SOURCES["webshop/react"]
    made = list(build_realset.webshop_stagnation_records(source, found))
    # The third run bought with no call before it: no state to judge.
    assert [(r.id, r.label, r.kind) for r in made] == [
        ("stagnation/webshop/react/fixed_0", False, "proxy_before_answer"),
        ("stagnation/webshop/react/fixed_1", True, "proxy_halted_at_cap"),
    ]
    bought, cut_off = (r.projection for r in made)
    assert [c.tool for s in bought.steps for c in s.calls] == ["search", "click", "click"]
    assert bought.final is None  # the purchase and the thought before it are not part of the state
    assert [(c.tool, c.args) for s in cut_off.steps for c in s.calls] == [("search", {"query": "mug"})]


def _printed(index: int, lines: list[str], count_average: str) -> str:
    return "-----------------\n" + f"{index}\n" + "".join(lines) + count_average + "\n-------------\n"


START = (
    "Action: reset\nObservation: \nWebshop \nInstruction:  \ni want a red mug, and price lower than 20.00 dollars \n"
    "[Search] \n\n"
)
WEBSHOP_OUTPUT = (
    _printed(
        0,
        [
            START,
            "Action: search[red mug]\nObservation: \n[Back to Search] \n[B01] \nRed Mug \n$9.99 \n\n",
            "Action: think[B01 is a red mug under 20 dollars.]\nObservation: OK.\n\n",
            "Action: click[B01]\nObservation: \n[Back to Search] \ncolor [red][blue]\nRed Mug \nPrice: $9.99 \n"
            "[Buy Now] \n\n",
            "Action: click[large]\nObservation: Invalid action!\n\n",
            "Action: think[Red is the option I want.]\nObservation: OK.\n\n",
            "Action: click[Buy Now]\nObservation: Your score (min 0.0, max 1.0): 0.5\n\n",
        ],
        "1 0.5 0.0 0.0",
    )
    + _printed(1, [START, "Action: search[mug]\nObservation: \n[Back to Search] \n\n"], "2 0.25 0.0 0.0")
    + _printed(2, [START, "Action: click[Buy Now]\nObservation: \n\n"], "3 0.5 0.3333333333333333 0.0")
)


def _notebook(output: str) -> str:
    outputs = [{"output_type": "stream", "text": [output]}]
    cell = {"cell_type": "code", "source": [_real_webshop.RUN_CELL], "outputs": outputs}
    return json.dumps({"cells": [{"cell_type": "code", "source": ["import os"], "outputs": []}, cell]})


def test_a_printed_webshop_episode_becomes_its_calls_with_the_thoughts_before_them_and_the_reward_as_label() -> None:
    bought, cut_off, empty_page = _real_webshop.episodes(_real_webshop.run_output(_notebook(WEBSHOP_OUTPUT)))
    assert bought.instruction == "i want a red mug, and price lower than 20.00 dollars"
    assert [(s.tool, s.arg, s.failed) for s in bought.steps] == [
        ("search", "red mug", False),
        ("click", "B01", False),
        ("click", "large", True),  # the harness refused it
    ]
    assert bought.steps[1].thought == "B01 is a red mug under 20 dollars." and bought.steps[0].thought == ""
    assert "Your score" not in repr(bought.steps)  # the end page is the label, never a step
    assert bought.final == "Red is the option I want.\nclick[Buy Now]"
    assert (bought.finished, bought.reward, bought.success) == (True, 0.5, False)
    assert (cut_off.finished, cut_off.final) == (False, None)  # never bought: a cut-off, not a finished run
    # An empty end page: the reward is what the run returned, the step of the running average (3 x 0.5 - 0.5).
    assert (empty_page.reward, empty_page.success, empty_page.final) == (1.0, True, _real_webshop.BUY)


def test_a_webshop_end_page_that_disagrees_with_the_running_average_is_refused() -> None:
    wrong = WEBSHOP_OUTPUT.replace("1 0.5 0.0 0.0", "1 1.0 1.0 0.0")
    with pytest.raises(_real_webshop.NotebookError):
        _real_webshop.episodes(_real_webshop.run_output(_notebook(wrong)))
    with pytest.raises(_real_webshop.NotebookError):
        _real_webshop.run_output(json.dumps({"cells": []}))


def test_the_webshop_draw_takes_finished_runs_only_and_reads_no_reward() -> None:
    def runs(rewards: list[float | None]) -> list[_real_webshop.Episode]:
        return [
            _real_webshop.Episode(n, "task", (), None if r is None else _real_webshop.BUY, r)
            for n, r in enumerate(rewards)
        ]

    rewards = [None if n % 7 == 0 else (n % 3) / 2 for n in range(400)]
    chosen = _real_webshop.sample(runs(rewards))
    assert len(chosen) == _real_webshop.SAMPLE and all(e.finished for e in chosen)
    assert [e.index for e in chosen] == sorted(e.index for e in chosen)
    flipped = [None if r is None else 1.0 - r for r in rewards]  # other rewards, the same finished runs
    assert [e.index for e in _real_webshop.sample(runs(flipped))] == [e.index for e in chosen]


def silent_state(
    *steps: tuple[str, dict, str, bool],  # type: ignore[type-arg]
    final: str,
    goal: str = "Read file_to_read.txt and write its content to output.txt",
) -> object:
    rows = [Message.user(goal)]
    for n, (name, args, result, failed) in enumerate(steps):
        call = ToolCall(name, args, id=f"c{n}")
        rows.append(Message(Role.ASSISTANT, f"Step {n}", (call,)))
        done = (
            error_tool_result(result, tool_call_id=call.id)
            if failed
            else encode_tool_result(result, tool_call_id=call.id)
        )
        rows.append(done)
    return project(rows, goal=goal, final=final)


def test_what_the_tools_said_moves_goal_reached_and_silence_leaves_it_to_the_base_rate() -> None:
    rules = RuleEvaluator()
    read = ("read_file", {"filename": "file_to_read.txt"}, "Hello World!", False)
    confirmed = silent_state(
        read,
        ("write_file", {"filename": "output.txt"}, "File output.txt has been written successfully.", False),
        final="The content has been copied to output.txt.",
    )
    unanswered = silent_state(
        ("ask_user", {"question": "Where is the file?"}, "", False),
        ("ask_user", {"question": "Could you upload it?"}, "", False),
        final="Unable to complete the task without the file.",
    )
    silent = silent_state(read, final="Hello World!")
    yes = [rules.answer(p, C["goal_reached"]) for p in (confirmed, unanswered, silent)]  # type: ignore[arg-type]
    base = rules.coefficients.goal_reached_open
    assert base is not None
    assert yes[0].p(("yes",)) > base.p({}) > yes[1].p(("yes",))
    assert not yes[0].defer and not yes[1].defer and yes[2].defer
    assert "result_confirms" in yes[0].note and "unanswered_requests" in yes[1].note


def test_a_failure_after_the_last_confirmation_and_an_unanswered_request_are_read_as_such() -> None:
    rules = RuleEvaluator()
    broke = silent_state(
        ("write_file", {"filename": "game.py"}, "File game.py has been written successfully.", False),
        ("execute_python_file", {"filename": "game.py"}, "Traceback: EOFError", True),
        final="The game is written.",
    )
    f = rules.outcome_features(broke)  # type: ignore[arg-type]
    assert f == {"result_confirms": 1.0, "failed_after_confirmation": 1.0}
    asked = silent_state(("ask_user", {"question": "Which file?"}, "", False), final="I asked.")
    assert rules.outcome_features(asked) == {"unanswered_requests": 0.5}  # type: ignore[arg-type]
    listed = silent_state(("list_users", {}, "", False), final="No users.")
    assert rules.outcome_features(listed) == {}  # type: ignore[arg-type]  # an empty list is not a question


SEARCHED = (
    "calendar.search_events",
    {"query": "sofia"},
    '[{"event_id": "00000167", "event_start": "2023-09-21 09:30:00", "participant_email": "sofia.santos@atlas.com"}, '
    '{"event_id": "00000212", "event_start": "2023-12-01 10:00:00", "participant_email": "sofia.santos@atlas.com"}]',
    False,
)
DELETED = ("calendar.delete_event", {"event_id": "00000167"}, "Event deleted successfully.", False)


def test_a_confirmed_write_to_an_object_the_goal_does_not_name_stays_uncertain() -> None:
    # The meeting was picked from a search's list: the tool's confirmation says a meeting went, not the right one.
    rules = RuleEvaluator()
    picked = silent_state(
        SEARCHED, DELETED, final="Your next meeting with Sofia is cancelled.", goal="Cancel my next meeting with sofia"
    )
    answer = rules.answer(picked, C["goal_reached"])  # type: ignore[arg-type]
    base = rules.coefficients.goal_reached_open
    assert base is not None
    assert rules.outcome_features(picked) == {"write_object_picked": 1.0}  # type: ignore[arg-type]
    assert answer.defer and answer.p(("yes",)) == pytest.approx(base.p({}))
    assert "picked" in answer.note


def test_a_confirmed_write_tied_to_the_goal_can_commit() -> None:
    # The same write where the goal names the meeting: the confirmation is evidence of the asked change.
    rules = RuleEvaluator()
    named = silent_state(SEARCHED, DELETED, final="Event 00000167 is deleted.", goal="Delete event 00000167")
    answer = rules.answer(named, C["goal_reached"])  # type: ignore[arg-type]
    assert rules.outcome_features(named) == {"result_confirms": 1.0, "last_result_confirms": 1.0}  # type: ignore[arg-type]
    assert not answer.defer and answer.p(("yes",)) >= C["goal_reached"].threshold


def test_a_confirmed_write_to_an_object_the_run_never_saw_commits_to_not_reached() -> None:
    # An address that neither the goal nor any result holds was made up: the mail went, to nobody the task meant.
    rules = RuleEvaluator()
    guessed = silent_state(
        (
            "email.send_email",
            {"recipient": "dmitri@example.com", "subject": "Ideas", "body": "Hey dmitri"},
            "Email sent successfully.",
            False,
        ),
        final="Email sent to dmitri.",
        goal="Send an email to dmitri saying 'Hey dmitri'",
    )
    found = silent_state(
        ("directory.find_email_address", {"name": "dmitri"}, '["dmitri.ivanov@atlas.com"]', False),
        (
            "email.send_email",
            {"recipient": "dmitri.ivanov@atlas.com", "subject": "Ideas", "body": "Hey dmitri"},
            "Email sent successfully.",
            False,
        ),
        final="Email sent to dmitri.",
        goal="Send an email to dmitri saying 'Hey dmitri'",
    )
    answer = rules.answer(guessed, C["goal_reached"])  # type: ignore[arg-type]
    assert rules.outcome_features(guessed) == {"write_object_unseen": 1.0}  # type: ignore[arg-type]
    assert not answer.defer and answer.p(("yes",)) < 0.2
    assert rules.answer(found, C["goal_reached"]).defer  # type: ignore[arg-type]  # looked up: picked, not made up
    # As sure as an answer that says it could not finish: a made-up target is not the one the task named.
    evidence = rules.coefficients.goal_reached_evidence
    assert evidence is not None
    assert answer.p(("yes",)) == pytest.approx(evidence.p({"final_unfinished": 1.0}))


NO_SUCH_CUSTOMER = ("crm.search_customers", {"customer_name": "Shannon Jones"}, "[]", False)


def test_a_change_with_no_write_whose_answer_says_it_could_not_is_the_base_rate_for_the_judge() -> None:
    # "Delete Shannon Jones" when no such customer exists: changing nothing was the right end, and the answer says
    # it could not. The words cannot tell that from a failure to change, so the rules do not commit either way.
    rules = RuleEvaluator()
    nothing = silent_state(
        NO_SUCH_CUSTOMER,
        final="I could not find a customer named Shannon Jones to delete.",
        goal="Delete Shannon Jones from the crm",
    )
    answer = rules.answer(nothing, C["goal_reached"])  # type: ignore[arg-type]
    base = rules.coefficients.goal_reached_open
    assert base is not None
    assert rules.outcome_features(nothing) == {}  # type: ignore[arg-type]  # no write was confirmed
    assert answer.defer and answer.p(("yes",)) == pytest.approx(base.p({}))
    assert "nothing needed changing" in answer.note


def test_a_question_whose_answer_says_it_could_not_find_it_stays_a_confident_failure() -> None:
    # There an answer was always due: not finding it is failing, whatever the tools returned.
    rules = RuleEvaluator()
    unanswered = silent_state(
        ("search", {"query": "Shannon Jones company"}, "[]", False),
        final="I could not find which company Shannon Jones works for.",
        goal="Which company does Shannon Jones work for?",
    )
    answer = rules.answer(unanswered, C["goal_reached"])  # type: ignore[arg-type]
    assert not answer.defer and answer.p(("yes",)) < 0.05


def test_a_change_that_wrote_or_asked_the_user_in_vain_is_still_read_from_what_the_tools_said() -> None:
    # The deferral is for a run that says nothing but "could not": a confirmed write, or a request to the user
    # that came back empty, is evidence the fitted map reads.
    rules = RuleEvaluator()
    asked = silent_state(
        NO_SUCH_CUSTOMER,
        ("ask_user", {"question": "Which Shannon Jones?"}, "", False),
        final="I could not find a customer named Shannon Jones to delete.",
        goal="Delete Shannon Jones from the crm",
    )
    wrote = silent_state(
        ("write_file", {"filename": "output.txt"}, "File output.txt has been written successfully.", False),
        final="I could not verify the content, but output.txt is written.",
    )
    for state in (asked, wrote):
        assert not rules.answer(state, C["goal_reached"]).defer  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "objects"),
    [
        ({"event_id": "00000167", "field": "event_name", "new_value": "Sync"}, {"00000167"}),
        ({"id": 42, "taskId": "T-9"}, {"42", "t-9"}),
        ({"recipient": "Ana.Lopez@atlas.com", "subject": "Hi"}, {"ana.lopez@atlas.com"}),
        ({"to": ["a@x.org", "b@y.org"]}, {"a@x.org", "b@y.org"}),
        # What a write writes is not an object it picks: a file name, a text with a number or an address in it.
        ({"filename": "Meditations_price_2024-03-20.txt", "contents": "Price: 25.89, mail a@x.org"}, set()),
        ({"valid": True}, set()),
    ],
)
def test_the_objects_a_write_names_are_its_ids_and_addresses(args: dict, objects: set[str]) -> None:  # type: ignore[type-arg]
    from stopwise.guardian.evaluators.rule import _objects

    assert _objects(args) == objects


@pytest.mark.parametrize(
    ("result", "confirms"),
    [
        ("File output.txt has been written successfully.", True),
        ("Successfully created issue #12", True),
        # The agent's own passing tests are not a confirmation: on recorded runs they said nothing of the grader's.
        (
            ".\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nOK\n",
            False,
        ),
        ("=== 12 passed in 0.31s ===", False),
        ("Revenge is a song written, produced, and performed by XXXTentacion.", False),
        ("Updated 1 path from the index", False),
        ("exitcode: 0 (execution succeeded)\nCode output: 42", False),
        ("File written successfully. " + "x" * 400, False),  # content, not a status line
    ],
)
def test_a_confirmation_is_a_short_status_that_reports_a_change_not_a_test_run(result: str, confirms: bool) -> None:
    from stopwise.guardian.evaluators.rule import _confirms

    assert _confirms(result) is confirms


def test_a_run_whose_only_news_is_its_own_passing_tests_is_left_to_the_base_rate_and_the_judge() -> None:
    rules = RuleEvaluator()
    tested = silent_state(
        ("write_file", {"filename": "fix.py"}, "", False),
        ("bash", {"command": "pytest -q"}, "=== 12 passed in 0.31s ===", False),
        final="Fixed; the tests pass.",
    )
    answer = rules.answer(tested, C["goal_reached"])  # type: ignore[arg-type]
    assert rules.outcome_features(tested) == {}  # type: ignore[arg-type]
    assert answer.defer and answer.note.startswith("no acceptance criteria and no word from the tools")


# --- the evidence map's fit ------------------------------------------------------------------------------------------


def said(source: str, label: bool, *features: str) -> object:
    """A goal_reached record of ``source`` whose run said ``features`` (built from real tool results)."""
    results = {
        "result_confirms": ("write_file", {"filename": "out.txt"}, "File out.txt written successfully.", False),
        "unanswered_requests": ("ask_user", {"question": "Which file?"}, "", False),
    }
    steps = [results[f] for f in features]
    return TraceRecord(
        f"goal_reached/{source}/{len(steps)}-{label}",
        "goal_reached",
        label,
        "train",
        source,
        projection_to_data(silent_state(*steps, final="Done." if label else "Unable to finish.")),  # type: ignore[arg-type]
    )


def test_the_evidence_map_chooses_its_strength_without_the_source_it_is_scored_on() -> None:
    sys.path.insert(0, str(ROOT / "evals" / "calibration"))
    import fit_real

    # Three sources where a confirmed write always succeeded and an unanswered question always failed: the
    # left-out sources reward a weak penalty, which then gives a confirmed write a high probability.
    records = [
        said(s, ok, *f)
        for s in ("a", "b", "c")
        for ok, f in ((True, ("result_confirms",)), (False, ("unanswered_requests",))) * 4
    ]
    assert fit_real.choose_c(records) == max(fit_real.EVIDENCE_CS)  # type: ignore[arg-type]
    fitted = fit_real.evidence_map(records)  # type: ignore[arg-type]
    assert fitted is not None and fitted["weights"]["result_confirms"] > 2
    # One source alone cannot be left out with two classes to fit on: the strongest penalty stays.
    assert fit_real.choose_c([r for r in records if r.source == "a"]) == fit_real.EVIDENCE_CS[0]  # type: ignore[attr-defined]


def test_the_real_report_scores_deferred_answers_apart_from_those_the_rules_commit_to(records: list) -> None:  # type: ignore[type-arg]
    table = evaluate_real.score([r for r in records if r.source == "hotpotqa/react"], RuleEvaluator())
    row = table["goal_reached hotpotqa/react"]
    assert row["deferred"] == row["n"] == 93  # every HotpotQA finish is left to the judge
    assert row["ece"] is None and row["auroc"] is None
    assert row["ece_all"] is not None and row["auroc_all"] == 0.5  # the base rate, the same for every run


def test_rebuilding_some_sources_keeps_the_others_lines_byte_for_byte(tmp_path: Path) -> None:
    out = tmp_path / "realset.jsonl"
    other = '{"source": "hotpotqa/react", "x": 1}\n'
    out.write_text(other, encoding="utf-8")
    build_realset.main(["--mirror", str(tmp_path), "--only", "autogpt/2024-03-25", "--keep-others", "--out", str(out)])
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    assert lines[0] == other  # hotpotqa comes before the AutoGPT reports in SOURCES
    assert len(lines) == 14 and all('"source": "autogpt/2024-03-25"' in line for line in lines[1:])


# --- the gate ----------------------------------------------------------------------------------------------------


def test_the_real_set_gate_names_a_source_that_got_worse_or_went_unmeasured() -> None:
    baseline = {
        "goal_reached a": {"ece": 0.05, "auroc": 0.80},
        "goal_reached b": {"ece": 0.05, "auroc": None},
        "stagnation c": {"ece": 0.02, "auroc": 0.99},
    }
    now = {
        "goal_reached a": {"ece": 0.055, "auroc": 0.75},
        "goal_reached b": {"ece": 0.07, "auroc": None},
    }
    assert evaluate_real.regressions(now, baseline, 0.01) == [
        "goal_reached a: AUROC 0.800 -> 0.750",
        "goal_reached b: ECE 0.050 -> 0.070",
        "stagnation c: not measured any more",
    ]
    assert evaluate_real.regressions(baseline, baseline, 0.01) == []


def test_the_shipped_baseline_covers_every_condition_and_source_of_the_real_set(records: list) -> None:  # type: ignore[type-arg]
    baseline = json.loads((ROOT / "evals" / "baseline_real.json").read_text(encoding="utf-8"))
    assert set(baseline) == {f"{r.condition} {r.source}" for r in records}


def test_the_table_for_an_unhinted_name_is_fitted_only_when_asked(records: list) -> None:  # type: ignore[type-arg]
    from stopwise.evals.rulefit import fit_rule_coefficients

    risk = [r for r in records if r.condition == "risk" and r.split == "train"]
    kept = fit_rule_coefficients(risk, source="unit")
    fitted = fit_rule_coefficients(risk, source="unit", fit_unnamed_risk=True)
    shipped = RuleEvaluator().coefficients.risk_declared["unknown"]
    assert kept["risk"]["declared"]["unknown"] == pytest.approx(dict(shipped))
    unnamed = [r for r in risk if RuleEvaluator().answer(r.projection, C["risk"]).distribution == shipped]
    share = sum(r.label in ("irreversible", "regulated") for r in unnamed) / len(unnamed)
    table = fitted["risk"]["declared"]["unknown"]
    prior = shipped["irreversible"] + shipped["regulated"]
    # The smoothed share lies between the prior's and the records' (the prior is worth 10 records).
    assert min(share, prior) <= table["irreversible"] + table["regulated"] <= max(share, prior)
    assert fitted["fitted"]["risk.declared.unknown"]["records"] == len(unnamed) > 20
