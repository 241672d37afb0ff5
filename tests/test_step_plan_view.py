"""What ``prepare_step`` chose and what the history processors kept, as ``stopwise show`` (text and ``--json``)
and ``stopwise report`` show them: read back from a real SQLite log."""

from __future__ import annotations

import asyncio
import io
import json
from pathlib import Path

import pytest

from stopwise import Agent, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, tool
from stopwise._cli.show import load_view, render_text
from stopwise._view.html import render_html
from stopwise.cli import main
from stopwise.history import HistoryRecord, keep_last_steps
from stopwise.step_plan import StepContext, StepPlan


@tool
def log_visit(city: str) -> str:
    """Note a city."""
    return "noted"


@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return "sunny"


def _plan(ctx: StepContext) -> StepPlan | None:
    if ctx.step == 1:
        return StepPlan(tools=[log_visit], tool_choice="required", instructions="Log the visit first.")
    return None


async def _planned_run(db: Path) -> str:
    model = ScriptedModel(
        [Reply(tool_calls=[ToolCall("log_visit", {"city": f"c{i}"}, id=f"v{i}")]) for i in range(3)] + ["done"]
    )
    agent = Agent(
        "a", "sys", model, tools=[log_visit, get_weather], prepare_step=_plan, history_processors=[keep_last_steps(1)]
    )
    store = SQLiteStore(db)
    try:
        result = await Runner(store).run(agent, "visit", session_id="s")
    finally:
        await store.close()
    assert result.output == "done"
    return result.run_id


async def test_show_prints_what_prepare_step_chose_and_what_history_was_not_sent(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    run_id = await _planned_run(db)
    out = io.StringIO()
    render_text(await load_view(db, run_id), out)
    text = out.getvalue()
    step1 = text[text.index("step 1") : text.index("step 2")]
    assert "prepare_step: tools=[log_visit], tool_choice=required, instructions='Log the visit first.'" in step1
    assert "history: 1 rows sent" in step1
    step4 = text[text.index("step 4") :]
    # Step 4 kept only the opening input and the last step: the two steps before (rows 1-4) were not sent.
    assert "history: 3 rows sent, 4 not sent (rows 1-4)" in step4
    assert "prepare_step" not in step4  # the plan kept the defaults: nothing to show


def test_show_json_and_the_html_report_carry_the_step_plan_and_history_records(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "log.db"
    run_id = asyncio.run(_planned_run(db))
    capsys.readouterr()
    assert main(["show", run_id, "--db", str(db), "--json"]) == 0
    steps = json.loads(capsys.readouterr().out)["steps"]
    first = next(s for s in steps if s["step"] == 1)
    assert first["plan"]["tools"] == ["log_visit"] and first["plan"]["tool_choice"] == "required"
    assert next(s for s in steps if s["step"] == 4)["history"]["dropped"] == [1, 2, 3, 4]
    html = render_html(asyncio.run(load_view(db, run_id)))
    assert "prepare_step</span>tools=[log_visit], tool_choice=required" in html


def test_a_history_record_describes_dropped_rows_as_spans() -> None:
    assert HistoryRecord(3, (1, 2, 3, 7, 9, 10), added=1, sent=4).describe() == (
        "4 rows sent, 6 not sent (rows 1-3, 7, 9-10), 1 added by a processor"
    )
    assert HistoryRecord(1, (), sent=2).describe() == "2 rows sent"
