"""The guardian's risk default on WorkBench's tools (``evals/evaluate_risk_workbench.py``): how a tool is labelled
a write from its code, the committed figures, and the pinned counts a newcomer meets with ``Guardian()``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "evals"))

import evaluate_risk_workbench as wb  # noqa: E402

FIGURES = ROOT / "evals" / "calibration" / "risk_workbench.json"

MODULE = '''
import pandas as pd
from langchain.tools import tool

ROWS = pd.read_csv("rows.csv")
PEOPLE = pd.read_csv("people.csv")


@tool("rows.find")
def find(name=""):
    """Finds rows."""
    global PEOPLE
    return PEOPLE[PEOPLE["name"].str.contains(name)]


@tool("rows.copy_and_mark")
def copy_and_mark(row_id=None):
    """Marks a copy."""
    data = ROWS[ROWS["id"] == row_id]
    data.loc[:, "seen"] = True
    return data


@tool("rows.add")
def add(value=None):
    """Adds a row."""
    ROWS.loc[len(ROWS)] = [value]
    return "added"


@tool("rows.remove")
def remove(row_id=None):
    """Removes a row."""
    global ROWS
    ROWS = ROWS[ROWS["id"] != row_id]
    return "removed"


@tool("rows.add_twice")
def add_twice(value=None):
    """Adds a row twice."""
    add.func(value)
    return add.func(value)
'''


def test_a_tool_writes_when_it_changes_a_module_frame_and_reading_one_under_global_is_not_a_write() -> None:
    evidence = wb.label_module(MODULE)
    assert evidence["find"] == []  # ``global PEOPLE`` and a read: company_directory.find_email_address's shape
    assert evidence["copy_and_mark"] == []  # assigns into its own copy, not the module's frame
    assert evidence["add"] == ["ROWS assigned into (line 27)"]
    assert evidence["remove"] == ["ROWS rebound (line 35)"]
    assert evidence["add_twice"] == ["calls add.func, which writes", "calls add.func, which writes"]


def test_a_tools_definition_keeps_its_registered_name_parameters_and_docstring() -> None:
    (first, *_) = wb.defined_tools(MODULE)
    assert (first.name, first.function, first.parameters, first.description) == (
        "rows.find",
        "find",
        (("name", ""),),
        "Finds rows.",
    )
    assert wb.kind_of("add_twice", True) == "create" and wb.kind_of("forward_email", True) == "send"
    assert wb.kind_of("search_emails", False) == "read"


def test_the_committed_figures_are_what_the_script_computes_from_the_shipped_tools_and_runs() -> None:
    table = wb.evaluate(wb.read_tools(), list(wb.recorded_runs()))
    assert json.loads(json.dumps(table)) == json.loads(FIGURES.read_text(encoding="utf-8"))


def test_the_pinned_counts_a_newcomer_meets_with_the_default_guardian() -> None:
    tools = wb.read_tools()
    assert len(tools) == 27 and sum(t.writes for t in tools) == 14
    assert all(t.writes == t.workbench_side_effects for t in tools)  # our labels, and WorkBench's list agrees
    table = json.loads(FIGURES.read_text(encoding="utf-8"))
    named = table["function"]
    assert named["guardian"] | {"accuracy": None} == {
        "read_tools": 13,
        "read_escalated": 0,
        "write_tools": 14,
        "write_escalated": 14,
        "accuracy": None,
    }
    assert named["baseline_destructive_verb"]["write_escalated"] == 5
    # No mail read suspends since the verb decides (`email` after `get` / `find` / `search` names the object);
    # before that fix, find_email_address and get_email_information_by_id did (3 with prefixed names).
    assert named["read_tools_that_suspend"] == []
    assert named["write_tools_that_run"] == []
    assert table["prefixed"]["read_tools_that_suspend"] == []
    answered = named["per_call"]["answered"]
    # Every suspended call is a write's: 427 of the 908 calls are of writing tools.
    assert (answered["runs"], answered["calls"], answered["calls_suspended"]) == (329, 908, 427)
