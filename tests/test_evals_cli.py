"""``stopwise eval``: the command's output, files, exit codes, calibration, export and regression gate."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import pytest

from stopwise import Agent, FunctionModel, Reply, Runner, SQLiteStore, ToolCall, tool
from stopwise.approvals import Approve
from stopwise.cli import main
from stopwise.evals import load_calibration, read_traces
from stopwise.guardian import Answer, Answers, QuestionSet
from stopwise.guardian.guardian import Guardian
from stopwise.guardian.projection import Projection

ROOT = Path(__file__).resolve().parent.parent
DEVSET = ROOT / "evals" / "data" / "devset.jsonl"


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A slice of the dev set: every condition, both splits, small enough to run in a fraction of a second."""
    picked: dict[tuple[str, str], list[str]] = {}
    for line in DEVSET.read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        picked.setdefault((r["condition"], r["split"]), []).append(line)
    lines = [line for group in picked.values() for line in group[:: max(1, len(group) // 12)]]
    path = tmp_path_factory.mktemp("traces") / "slice.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_prints_every_metric_per_condition_and_writes_json_and_html(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(traces), "--json", str(tmp_path / "r.json"), "--html", str(tmp_path / "r.html"))
    assert code == 0, err
    for word in ("ECE", "floor", "MCE", "Brier", "AUROC", "t*", "cost@t*", "t rec", "reliability"):
        assert word in out
    for name in ("integrity", "risk", "infeasible", "goal_reached", "drift", "stagnation"):
        assert f"\n{name} " in out and f"  {name}: " in out
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert data["format"] == "stopwise-eval" and data["split"] == "all"
    goal = data["conditions"]["goal_reached"]
    assert len(goal["bins"]) == 10 and goal["threshold"]["t_star"] == pytest.approx(0.8)
    assert {"ece", "mce", "brier", "auroc", "ece_floor"} <= set(goal)
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    assert page.count("<svg") == 6 and "http://" not in page and "https://" not in page


def test_a_split_and_conditions_can_be_chosen(traces: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _out, _ = run(
        capsys,
        str(traces),
        "--split",
        "test",
        "--condition",
        "drift",
        "--condition",
        "risk",
        "--json",
        str(tmp_path / "r.json"),
    )
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert sorted(data["conditions"]) == ["drift", "risk"] and data["split"] == "test"


def test_unknown_names_exit_2_listing_the_valid_ones(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, str(traces), "--condition", "goal_reached", "--condition", "vibes")
    assert code == 2
    assert "unknown condition 'vibes'" in err and "integrity, risk, infeasible, goal_reached, drift, stagnation" in err
    with pytest.raises(SystemExit) as exited:
        main(["eval", str(traces), "--evaluator", "oracle"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "invalid choice: 'oracle'" in err and "'rule', 'systemone', 'judge'" in err
    code, _, err = run(capsys, str(traces), "--evaluator", "judge")
    assert code == 2 and "--evaluator judge needs --model" in err
    code, _, err = run(capsys, str(traces), "--evaluator", "systemone", "--base-url", "http://127.0.0.1:9")
    assert code == 2 and "needs --model" in err
    code, _, err = run(capsys, str(traces), "--evaluator", "judge", "--model", "nowhere:m")
    assert code == 2 and "unknown provider" in err


def test_malformed_lines_are_reported_and_skipped_or_fail_with_strict(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lines = traces.read_text(encoding="utf-8").splitlines()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("\n".join([lines[0], "{oops", *lines[1:5], '{"id": 1}']) + "\n", encoding="utf-8")
    code, _, err = run(capsys, str(bad))
    assert code == 0
    assert f"{bad}:2: " in err and f"{bad}:7: " in err and err.count("(skipped)") == 2
    code, _, err = run(capsys, str(bad), "--strict")
    assert code == 2 and f"{bad}:2: " in err and "2 malformed line(s)" in err
    code, _, err = run(capsys, str(tmp_path / "missing.jsonl"))
    assert code == 2 and "no such file" in err


def test_the_gate_fails_naming_the_condition_and_passes_within_tolerance(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    baseline = tmp_path / "baseline.json"
    assert run(capsys, str(traces), "--split", "test", "--json", str(baseline))[0] == 0
    code, out, _ = run(capsys, str(traces), "--split", "test", "--baseline", str(baseline))
    assert code == 0 and "gate: OK" in out
    data = json.loads(baseline.read_text(encoding="utf-8"))
    data["conditions"]["integrity"]["ece"] -= 0.05  # the baseline was better calibrated than today
    data["conditions"]["stagnation"]["auroc"] = min(1.0, data["conditions"]["stagnation"]["auroc"] + 0.005)
    baseline.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = run(capsys, str(traces), "--split", "test", "--baseline", str(baseline))
    assert code == 1
    assert "gate: FAILED: 1 regression(s)" in err and "integrity: ece" in err and "stagnation" not in err
    code, out, _ = run(capsys, str(traces), "--split", "test", "--baseline", str(baseline), "--tolerance", "0.06")
    assert code == 0 and "gate: OK" in out


def test_calibrate_fits_on_train_reports_on_test_and_the_file_evaluates_through(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cal = tmp_path / "cal.json"
    code, out, err = run(capsys, str(traces), "--calibrate", str(cal), "--json", str(tmp_path / "r.json"))
    assert code == 0, err
    assert "ECE before" in out and "split test" in out
    fitted = load_calibration(cal)
    assert set(fitted.maps) == {"integrity", "risk", "infeasible", "goal_reached", "drift", "stagnation"}
    assert fitted.model_version.startswith("rules-") and fitted.fitted_on["split"] == "train"
    heldout = fitted.maps["integrity"].info["heldout"]
    report = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    assert heldout["ece_after"] == pytest.approx(report["conditions"]["integrity"]["ece"])
    assert heldout["ece_before"] == pytest.approx(report["before_calibration"]["integrity"]["ece"])
    code, out, _ = run(
        capsys, str(traces), "--split", "test", "--calibration", str(cal), "--json", str(tmp_path / "c.json")
    )
    assert code == 0 and f"calibration {fitted.version}" in out
    through = json.loads((tmp_path / "c.json").read_text(encoding="utf-8"))
    # Evaluating through the file gives the figures the fit reported for the held-out split.
    assert through["conditions"]["integrity"]["ece"] == pytest.approx(heldout["ece_after"])
    assert run(capsys, str(traces), "--calibrate", str(cal), "--split", "train")[0] == 2


@tool
def search(q: str) -> str:
    """Search."""
    return f"results for {q}"


class Unsure:
    name = "unsure"

    async def evaluate(self, projection: Projection, questions: QuestionSet) -> Answers:
        p = 0.8 if len(projection.steps) == 1 else 0.0  # goal_reached in its band on the first turn: escalate
        answers = {}
        for c in questions.conditions:
            q = p if c.name == "goal_reached" else 0.0
            fire = [x for x in c.question.labels if x in c.fires_on]
            rest = [x for x in c.question.labels if x not in c.fires_on]
            answers[c.name] = Answer({x: q / len(fire) for x in fire} | {x: (1 - q) / len(rest) for x in rest})
        return Answers("unsure", "unsure-1", answers)


def test_a_sqlite_log_is_read_as_labelled_traces_and_exported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"

    async def review() -> None:
        store = SQLiteStore(db)
        try:
            model = FunctionModel(
                lambda r: Reply(tool_calls=[ToolCall("search", {"q": f"q{r.step}"})]) if r.step < 3 else Reply("done")
            )
            agent = Agent("a", "Do it.", model, tools=[search], guardian=Guardian(Unsure()))
            runner = Runner(store)
            await runner.run(agent, "find it", session_id="s")
            await runner.resume(agent, "s", {"guardian:1": Approve()})
        finally:
            await store.close()

    asyncio.run(review())
    out_path = tmp_path / "labels.jsonl"
    code, out, _ = run(capsys, str(db), "--export", str(out_path))
    assert code == 0 and "wrote 1 records" in out
    (r,) = read_traces(out_path, strict=True).records
    assert (r.condition, r.label, r.source) == ("goal_reached", False, "escalation/human") and r.projection is not None
    code, out, _ = run(capsys, str(db))  # one label is too few for a curve, but the run reports it
    assert code == 0 and "goal_reached" in out


def test_a_missing_extra_is_named_with_the_install_command(
    traces: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now raises ImportError
    code, _, err = run(capsys, str(traces))
    assert code == 2 and "pip install 'stopwise[eval]'" in err


def test_an_unreachable_model_service_counts_as_uncertain(
    traces: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(traces.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    args = ["--evaluator", "systemone", "--base-url", "http://127.0.0.1:9", "--model", "m", "--timeout", "2"]
    code, _out, _ = run(capsys, str(one), *args, "--json", str(tmp_path / "r.json"))
    assert code == 0
    data = json.loads((tmp_path / "r.json").read_text(encoding="utf-8"))
    (name,) = data["conditions"]
    assert data["conditions"][name]["uncertain"] == 1 and data["conditions"][name]["n"] == 0


def test_the_progress_bar_goes_to_stderr_when_asked(traces: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, str(traces), "--progress")
    assert code == 0 and "stopwise eval [" in err and "[" not in out.split("\n")[0]
