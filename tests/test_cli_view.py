"""``stopwise show``, ``runs`` filters and paging, and the commands that settle or continue a run (``approve``,
``reject``, ``terminate``, ``resume``, ``retry``), run as real processes on a real SQLite file.

The agent file the settling commands load is written per test: its model is a ``FunctionModel`` that answers
from what the run's history holds, so every process (run, then approve) sees the same agent.
"""

from __future__ import annotations

import asyncio
import json
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _cli_fixtures import AGENTS, stopwise_cmd
from stopwise import SQLiteStore
from stopwise.cli import main
from stopwise.demo import run_demo

# Slow: each test runs the command line in a process of its own. `pytest -m "not slow"` leaves them out; CI runs them.
pytestmark = pytest.mark.slow


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    (tmp_path / "agents.py").write_text(AGENTS, encoding="utf-8")
    return tmp_path


def suspended_refund(workdir: Path) -> str:
    """Run the refunder until it suspends; its session id."""
    run = stopwise_cmd("run", "agents.py:refunder", "Refund A-1", cwd=workdir)
    assert run.returncode == 1, run.stderr
    return re.search(r"^session: (\S+)", run.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def demo_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("demo") / "demo.db"
    report = asyncio.run(run_demo(db))
    assert report.ok
    return db


def session_of(demo_db: Path, suffix: str) -> str:
    async def sessions() -> list[str]:
        store = SQLiteStore(demo_db)
        try:
            return await store.list_sessions(100)
        finally:
            await store.close()

    return next(s for s in asyncio.run(sessions()) if s.endswith(suffix))


# --- pending calls, approve, reject, terminate, resume, retry ---------------------------------------------


def test_run_that_suspends_prints_each_pending_call_with_why_and_how_to_settle(workdir: Path) -> None:
    run = stopwise_cmd("run", "agents.py:refunder", "Refund A-1", cwd=workdir)
    assert run.returncode == 1
    assert "status: suspended" in run.stdout
    assert "pending: refund-1  issue_refund  tool 'issue_refund' needs approval" in run.stdout
    assert "stopwise approve|reject|terminate" in run.stdout
    assert not (workdir / "effects.log").exists()


def test_the_settle_command_a_suspended_run_prints_works_as_printed_with_its_log_elsewhere(workdir: Path) -> None:
    """The hint names the agent and the log the run used (not the default ``stopwise.db``): copied with a call id
    filled in, it settles the run; ``show`` prints the same command, its agent left to fill in."""
    run = stopwise_cmd("run", "agents.py:refunder", "Refund A-1", "--db", "refunds.db", cwd=workdir)
    assert run.returncode == 1, run.stderr
    hint = re.search(r"^settle: (.+)$", run.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]
    session = re.search(r"^session: (\S+)", run.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]
    shown = stopwise_cmd("show", session, "--db", "refunds.db", cwd=workdir)
    assert f"settle with: {hint.replace('agents.py:refunder', 'FILE.py:NAME')}" in shown.stdout
    argv = shlex.split(hint.replace("approve|reject|terminate", "approve").replace("CALL...", "refund-1"))
    assert argv[0] == "stopwise"
    approve = stopwise_cmd(*argv[1:], cwd=workdir)
    assert approve.returncode == 0, approve.stderr
    assert "status: completed" in approve.stdout and not (workdir / "stopwise.db").exists()


def test_approve_runs_the_pending_call_once_and_completes_the_run(workdir: Path) -> None:
    session = suspended_refund(workdir)
    approve = stopwise_cmd(
        "approve", session, "refund-1", "--agent", "agents.py:refunder", "--reviewer", "ana", cwd=workdir
    )
    assert approve.returncode == 0, approve.stderr
    assert "status: completed" in approve.stdout
    assert "output: Done: refunded 5 EUR on A-1" in approve.stdout
    assert (workdir / "effects.log").read_text() == "refund A-1 5\n"
    shown = stopwise_cmd("show", session, cwd=workdir)
    assert "reviewer approve refund-1 (issue_refund)" in shown.stdout
    as_json = stopwise_cmd("show", session, "--json", cwd=workdir)
    assert '"reviewer": "ana"' in as_json.stdout  # who decided is in the log
    again = stopwise_cmd("approve", session, "refund-1", "--agent", "agents.py:refunder", cwd=workdir)
    assert again.returncode == 2 and again.stderr.startswith("stopwise approve: error:")
    assert (workdir / "effects.log").read_text() == "refund A-1 5\n"


def test_reject_answers_the_call_with_the_message_and_never_runs_it(workdir: Path) -> None:
    session = suspended_refund(workdir)
    reject = stopwise_cmd(
        "reject", session, "refund-1", "--agent", "agents.py:refunder", "--message", "over budget", cwd=workdir
    )
    assert reject.returncode == 0, reject.stderr
    assert "over budget" in reject.stdout
    assert not (workdir / "effects.log").exists()


def test_terminate_ends_the_run_cancelled_with_nothing_run(workdir: Path) -> None:
    session = suspended_refund(workdir)
    end = stopwise_cmd("terminate", session, "refund-1", "--agent", "agents.py:refunder", cwd=workdir)
    assert end.returncode == 1
    assert "status: cancelled" in end.stdout and "completion reason: approval_terminated" in end.stdout
    assert not (workdir / "effects.log").exists()


def test_resume_with_modified_arguments_runs_those(workdir: Path) -> None:
    session = suspended_refund(workdir)
    args = json.dumps({"order": "A-1", "amount_eur": 3})
    resume = stopwise_cmd("resume", "agents.py:refunder", session, "--modify", "refund-1", args, cwd=workdir)
    assert resume.returncode == 0, resume.stderr
    assert (workdir / "effects.log").read_text() == "refund A-1 3\n"


def test_resume_without_decisions_or_with_an_unknown_call_is_exit_2(workdir: Path) -> None:
    session = suspended_refund(workdir)
    bare = stopwise_cmd("resume", "agents.py:refunder", session, cwd=workdir)
    assert bare.returncode == 2 and "give a decision" in bare.stderr
    unknown = stopwise_cmd("resume", "agents.py:refunder", session, "--approve", "nope", cwd=workdir)
    assert unknown.returncode == 2 and unknown.stderr.count("\n") == 1
    assert not (workdir / "effects.log").exists()


def test_retry_continues_a_cut_off_run_with_a_fresh_budget(workdir: Path) -> None:
    run = stopwise_cmd("run", "agents.py:pager", "Read three pages", cwd=workdir)
    assert run.returncode == 1 and "completion reason: max_steps" in run.stdout
    session = re.search(r"^session: (\S+)", run.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]
    retry = stopwise_cmd("retry", "agents.py:pager", session, cwd=workdir)
    assert retry.returncode == 0, retry.stderr
    assert "status: completed" in retry.stdout
    done = stopwise_cmd("retry", "agents.py:pager", session, cwd=workdir)
    assert done.returncode == 2 and done.stderr.startswith("stopwise retry: error:")


# --- show -------------------------------------------------------------------------------------------------


def test_show_prints_each_step_decision_and_the_guardian_probabilities_against_thresholds(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", session_of(demo_db, "-drift"), "--db", str(demo_db)]) == 0
    out = capsys.readouterr().out
    assert "status: failed  completion reason: infeasible" in out
    assert re.search(r"^step 2  replan$", out, re.MULTILINE)
    assert re.search(r"^step 4  fail \(infeasible\)$", out, re.MULTILINE)
    assert re.search(r"drift +p=0\.92 +t\*=0\.50 ±0\.05 over", out)
    assert "guardian turn: stop_failure  stop: 2 replans already" in out


def test_show_lists_guardrail_verdicts_and_stop_guard_continues(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", session_of(demo_db, "-ops"), "--db", str(demo_db)]) == 0
    guarded = capsys.readouterr().out
    assert "guardrail " in guarded and ": block" in guarded
    assert main(["show", session_of(demo_db, "-sourced"), "--db", str(demo_db)]) == 0
    assert re.search(r"^  stop guard \S+: continued", capsys.readouterr().out, re.MULTILINE)


def test_show_json_is_one_document_with_steps_records_and_guardian_series(
    demo_db: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["show", session_of(demo_db, "-drift"), "--db", str(demo_db), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert (data["status"], data["completion_reason"]) == ("failed", "infeasible")
    assert [s["decision"]["action"] for s in data["steps"] if s["decision"]] == ["continue", "replan", "replan", "fail"]
    drift = next(s for s in data["guardian_series"] if s["name"] == "drift")
    assert drift["threshold"] == 0.5
    assert [p["outcome"] for p in drift["points"] if p["kind"] == "turn"] == [
        "continue",
        "replan",
        "replan",
        "stop_failure",
    ]


def test_show_escapes_what_the_model_wrote(workdir: Path) -> None:
    run = stopwise_cmd("run", "agents.py:pager", "Read three pages", cwd=workdir)
    session = re.search(r"^session: (\S+)", run.stdout, re.MULTILINE).group(1)  # type: ignore[union-attr]
    stopwise_cmd("retry", "agents.py:pager", session, cwd=workdir)
    shown = stopwise_cmd("show", session, cwd=workdir)
    assert shown.returncode == 0, shown.stderr
    assert "\x1b" not in shown.stdout
    assert "\\x1b[31m[bold]red[/bold]" in shown.stdout


def test_show_of_an_unknown_run_or_a_missing_file_is_one_line_and_exit_2(demo_db: Path, tmp_path: Path) -> None:
    unknown = stopwise_cmd("show", "no-such-run", "--db", str(demo_db), cwd=tmp_path)
    assert unknown.returncode == 2 and unknown.stderr == "stopwise show: error: no run or session 'no-such-run'\n"
    missing = stopwise_cmd("show", "x", "--db", str(tmp_path / "none.db"), cwd=tmp_path)
    assert missing.returncode == 2 and "no such file" in missing.stderr
    assert not (tmp_path / "none.db").exists()


# --- runs: filters and paging -----------------------------------------------------------------------------


def listed(out: str) -> list[list[str]]:
    return [re.split(r"\s{2,}", line.strip()) for line in out.splitlines()[2:]]


def test_runs_filters_by_status_and_completion_reason(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", str(demo_db), "--status", "failed"]) == 0
    failed = listed(capsys.readouterr().out)
    assert failed and {r[3] for r in failed} == {"failed"}
    assert main(["runs", "--db", str(demo_db), "--reason", "infeasible", "--reason", "stop_when"]) == 0
    reasons = {r[4] for r in listed(capsys.readouterr().out)}
    assert reasons == {"infeasible", "stop_when"}


def test_runs_since_keeps_runs_started_after_the_time(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["runs", "--db", str(demo_db), "--since", "1h"]) == 0
    assert len(listed(capsys.readouterr().out)) >= 14
    later = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(time.time() + 3600))
    assert main(["runs", "--db", str(demo_db), "--since", later]) == 1
    assert "no runs" in capsys.readouterr().err
    assert main(["runs", "--db", str(demo_db), "--since", "yesterday"]) == 2
    assert "--since 'yesterday'" in capsys.readouterr().err


def test_runs_pages_through_sessions_without_overlap(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pages = []
    for page in (1, 2, 3):
        main(["runs", "--db", str(demo_db), "--limit", "5", "--page", str(page)])
        pages.append({r[1] for r in listed(capsys.readouterr().out)})
    assert [len(p) for p in pages] == [5, 5, 4]
    assert set.union(*pages) == {r[1] for r in _all_runs(demo_db, capsys)}
    assert main(["runs", "--db", str(demo_db), "--page", "0"]) == 2


def _all_runs(demo_db: Path, capsys: pytest.CaptureFixture[str]) -> list[list[str]]:
    main(["runs", "--db", str(demo_db), "--limit", "100"])
    return listed(capsys.readouterr().out)


# --- errors that say what to do -----------------------------------------------------------------------------


def test_replay_with_a_misspelled_condition_is_one_line_and_exit_2(
    demo_db: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = tmp_path / "policy.json"
    policy.write_text(json.dumps({"conditions": {"drfit": {"threshold": 0.3}}}))
    assert main(["replay", str(demo_db), "--policy", str(policy)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no condition named drfit" in err and "'drift'" in err


def test_eval_on_a_file_that_is_neither_a_log_nor_jsonl_is_exit_2(tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("just some notes\nnot traces\n")
    result = stopwise_cmd("eval", str(notes), cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr.endswith("file is not a database written by stopwise nor JSONL traces\n")


def test_the_dbos_runtime_without_its_extra_names_the_install(tmp_path: Path) -> None:
    code = "import sys; sys.modules['dbos'] = None; import stopwise.runtime.dbos"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert "ModuleNotFoundError: stopwise.runtime.dbos needs the dbos extra: pip install 'stopwise[dbos]'" in (
        result.stderr
    )


def test_demo_help_names_every_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    from stopwise.demo import SCENARIOS

    with pytest.raises(SystemExit):
        main(["demo", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert f"Run the {len(SCENARIOS)} bundled scenarios" in text
    assert all(s.name in text for s in SCENARIOS)
