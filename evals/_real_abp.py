"""ABP + Claude on Online-Mind2Web: a browser agent's recorded runs on live websites, each ending on an answer or
cut off at its turn limit.

The repository ``theredsix/abp-online-mind2web-results`` (MIT) holds one ``abp_run/<task_id>/result.json`` per
task of the Online-Mind2Web benchmark (300 real-world browser tasks: "Find support services jobs in Bentonville,
in the state of Arkansas."), run by the Agent Browser Protocol harness with Claude: the task, the browser actions
the agent took in order (``action_history``: "Click at (600, 475)", "Type \"...\"", "Scroll (delta_x=0,
delta_y=400)", "Navigate to <url>"...), the agent's words before each action (``thoughts``, one entry per action:
the actions of one model turn share its words), its final response, and ``result_status``: ``success`` when the
agent submitted an answer, ``error_max_turns`` when the harness cut it off at its turn limit. The human grades of
the README are not in the files and are not used: the status is read as a stagnation proxy, as the other real
sources' step caps are (``build_realset``).

What each action returned is a screenshot, which the files keep only as PNGs: no text the guardian could read.
Each action is therefore a call whose result is empty. That is what the guardian sees of a tool that answers with
an image, and it makes this source a test of what the stagnation signals read from calls and words alone.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

REPO = "theredsix/abp-online-mind2web-results"
COMMIT = "46bbf4c7bbc915a86864bfdcb4affc9bdbfa5591"
RUNS = "abp_run"
FINISHED = "success"
CUT_OFF = "error_max_turns"

_ACTIONS: tuple[tuple[re.Pattern[str], str, tuple[str, ...]], ...] = (
    (re.compile(r"^Click at \((-?\d+), (-?\d+)\)$"), "click", ("x", "y")),
    (re.compile(r"^Hover at \((-?\d+), (-?\d+)\)$"), "hover", ("x", "y")),
    (re.compile(r"^Scroll \(delta_x=(-?\d+), delta_y=(-?\d+)\)$"), "scroll", ("delta_x", "delta_y")),
    (re.compile(r"^Drag from \((-?\d+), (-?\d+)\) to \((-?\d+), (-?\d+)\)$"), "drag", ("x0", "y0", "x1", "y1")),
    (re.compile(r'^Type "(.*)"$', re.S), "type", ("text",)),
    (re.compile(r"^Press (.+)$"), "press", ("key",)),
    (re.compile(r"^Navigate (back|reload)$"), "navigate", ("to",)),
    (re.compile(r"^Navigate to (.+)$"), "navigate", ("url",)),
)


class RunError(ValueError):
    """A ``result.json`` that is not the run record this module reads (missing fields, actions and thoughts of
    different lengths, an unknown status)."""


@dataclass(frozen=True)
class Action:
    """One browser action as a call: the words the agent said before it (empty for the later actions of one
    model turn, which share the first one's words), the tool, its arguments."""

    thought: str
    tool: str
    args: dict[str, Any]


@dataclass(frozen=True)
class Run:
    task_id: str
    task: str
    status: str
    actions: tuple[Action, ...]

    @property
    def cut_off(self) -> bool:
        return self.status == CUT_OFF


def call_of(action: str) -> tuple[str, dict[str, Any]]:
    """A recorded action string as (tool, arguments); an action of no known form as ``(first word, {action})``."""
    for pattern, tool, names in _ACTIONS:
        m = pattern.match(action)
        if m:
            values = [int(v) if re.fullmatch(r"-?\d+", v) else v for v in m.groups()]
            return tool, dict(zip(names, values, strict=True))
    head = action.split(" ", 1)[0].lower() or "action"
    return re.sub(r"\W+", "_", head), {"action": action}


def run_of(text: str) -> Run:
    """One ``result.json`` as a run; consecutive actions with the same words are one model turn, whose words go
    with its first action only (the agent said them once).

    Raises:
        RunError: the file is not a run record of the form above.
    """
    data = json.loads(text)
    try:
        task_id, task, status = data["task_id"], data["task"], data["result_status"]
        history, thoughts = data["action_history"], data["thoughts"]
    except KeyError as missing:
        raise RunError(f"no {missing} in the run record") from None
    if status not in (FINISHED, CUT_OFF):
        raise RunError(f"{task_id}: unknown status {status!r}")
    if len(history) != len(thoughts):
        raise RunError(f"{task_id}: {len(history)} actions against {len(thoughts)} thoughts")
    actions: list[Action] = []
    previous: str | None = None
    for action, thought in zip(history, thoughts, strict=True):
        words = (thought or "").strip()
        tool, args = call_of(action)
        actions.append(Action("" if words == previous else words, tool, args))
        previous = words
    return Run(task_id, task, status, tuple(actions))
