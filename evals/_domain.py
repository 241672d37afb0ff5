"""What a scripted task domain of the development set holds, and the checks each must pass (own work, Apache-2.0).

``_trajectories.py`` and the ``_trajectories_*.py`` modules define domains; ``build_devset.py`` turns each one into
labelled states. A step is ``(agent text, tool, args, result)``; a result starting with ``ERROR:`` is a failed call.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Step = tuple[str, str, dict[str, Any], str]


@dataclass(frozen=True)
class Domain:
    name: str
    split: str
    goal: str
    criteria: tuple[str, ...]
    steps: tuple[Step, ...]
    """On-goal steps, in the order that completes the task (the last one completes it)."""
    final_good: str
    final_partial: str
    """What the agent says after only part of the steps: names what is still missing."""
    final_claim: str
    """A confident "done" with no evidence behind it."""
    related: tuple[Step, ...]
    """Drift level 3: supports the goal without being the core of it."""
    partly: tuple[Step, ...]
    """Drift level 2."""
    tangential: tuple[Step, ...]
    """Drift level 1: shares a topic word with the goal, does nothing for it."""
    unrelated: tuple[Step, ...]
    """Drift level 0."""
    lasting: dict[str, Step]
    """``permission``, ``not_found``, ``unsupported``: a failing call on the way to the goal, for a lasting reason."""
    transient: Step
    """A call that fails for a passing reason (timeout, rate limit)."""
    poll: tuple[str, str, dict[str, Any], tuple[str, ...]]
    """``(text, tool, args, results)``: the same call polled while a job's state changes."""
    page: tuple[str, str, dict[str, Any], tuple[str, ...]]
    """``(text, tool, args, results)``: a list read page by page (``page`` argument added per page)."""
    cannot: str
    """What the agent says when it concludes the goal is out of reach."""
    risk_tools: dict[str, str] = field(default_factory=dict)
    """Tool name -> its true risk class (for risk records with declared and undeclared risk)."""


_RISKS = frozenset({"read_only", "reversible", "irreversible", "regulated"})
_LASTING = frozenset({"permission", "not_found", "unsupported"})


def check(d: Domain) -> list[str]:
    """What is wrong with ``d`` as ``build_devset.py`` uses it; empty when nothing is."""
    problems: list[str] = []
    if d.split not in ("train", "test"):
        problems.append(f"split {d.split!r} is not train or test")
    if not 3 <= len(d.steps) <= 7:
        problems.append(f"{len(d.steps)} on-goal steps (3 to 7 expected)")
    if len(d.criteria) < 2:
        problems.append("fewer than 2 criteria")
    for pool in ("related", "partly", "tangential", "unrelated"):
        if len(getattr(d, pool)) < 2:
            problems.append(f"{pool}: fewer than 2 steps")
    if set(d.lasting) != _LASTING:
        problems.append(f"lasting keys {sorted(d.lasting)} are not {sorted(_LASTING)}")
    for name, step in [*(("lasting " + k, v) for k, v in d.lasting.items()), ("transient", d.transient)]:
        if not step[3].startswith("ERROR: "):
            problems.append(f"{name}: the result does not start with 'ERROR: '")
    for pool in ("steps", "related", "partly", "tangential", "unrelated"):
        for step in getattr(d, pool):
            if len(step) != 4 or not isinstance(step[2], dict):
                problems.append(f"{pool}: {step!r} is not (text, tool, args, result)")
            elif step[3].startswith("ERROR"):
                problems.append(f"{pool}: {step[1]} fails; only lasting and transient steps fail")
            elif not step[0] or not step[1] or not step[3]:
                problems.append(f"{pool}: {step[1]!r} has an empty text, tool or result")
    if len(d.poll[3]) != 3 or d.poll[3][0] != d.poll[3][1] or d.poll[3][2] == d.poll[3][1]:
        problems.append("poll: 3 results expected, the first two equal and the third different")
    if len(d.page[3]) != 3 or len(set(d.page[3])) != 3:
        problems.append("page: 3 distinct results expected")
    if not set(d.risk_tools.values()) <= _RISKS or len(d.risk_tools) < 3:
        problems.append(f"risk_tools: 3 or more tools with classes in {sorted(_RISKS)}")
    if not d.final_good or not d.final_partial or not d.final_claim or not d.cannot:
        problems.append("final_good, final_partial, final_claim and cannot must all be written")
    return problems
