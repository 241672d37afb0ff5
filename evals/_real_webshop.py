"""ReAct on WebShop: a real model shopping for a user on a web store, each run scored by the store's own reward.

The ReAct repository (ysymyth/ReAct, MIT; Yao et al. 2023, "ReAct: Synergizing Reasoning and Acting in Language
Models") ships ``WebShop.ipynb`` with its outputs: one cell runs ``run_episodes(prompt1, 500)``, the ReAct prompt
on GPT-3 (``text-davinci-002``, temperature 0, at most 15 actions) over the first 500 fixed WebShop instructions
(``fixed_0`` to ``fixed_499``), and prints every episode: each action (``search[...]``, ``click[...]`` on a result,
an option or a button, ``think[...]``, answered ``OK.``) with the page the store returned, and, when the agent
clicks ``Buy Now``, the store's reward of the purchase (``Your score (min 0.0, max 1.0): ...``: how far the bought
item and options match the instruction's product, attributes, options and price) followed by the running
averages. The README's table gives the run's success rate, 35.8%: a reward of 1.0.

Only this module's reading of the printed output decides a record; the reward is read as a label and nothing else
(it never reaches a state: the ``Buy Now`` page is the reward line, and it is the run's end, not a step).
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass

REPO = "ysymyth/ReAct"
COMMIT = "6bdb3a1fd38b8188fc7ba4102969fe483df8fdc9"
NOTEBOOK = "WebShop.ipynb"
RUN_CELL = "res1 = run_episodes(prompt1, 500)"
"""The source of the one cell whose output is the recorded run (the ReAct prompt; the act-only cell has none)."""
SAMPLE = 200
"""Finished runs drawn (``SEED``, before any reward was read) of the 500: enough for the figures, small enough to
ship."""
SEED = 20261213
BUY = "click[Buy Now]"
INVALID = "Invalid action!"
"""The harness's answer to an action the store refuses (an option that does not exist, a page past the first): the
one result that is an error of the call."""

_EPISODE = re.compile(
    r"^-{17}\n(\d+)\n(.*?)^(\d+) ([-\d.e]+) ([-\d.e]+) ([-\d.e]+)\n-{13}$",
    re.S | re.M,
)
_SCORE = re.compile(r"^Your score \(min 0\.0, max 1\.0\): ([\d.]+)$")
_ACTION = re.compile(r"^(\w+)\[(.*)\]$", re.S)


class NotebookError(ValueError):
    """The notebook's run cell is missing, or its output is not the printed episodes this module reads."""


@dataclass(frozen=True)
class Step:
    """One call of a run: the agent's thoughts (``think[...]``) since its previous call, the tool (``search`` or
    ``click``), its argument, the page the store returned, whether the store refused the action."""

    thought: str
    tool: str
    arg: str
    result: str
    failed: bool


@dataclass(frozen=True)
class Episode:
    """One printed episode: its index, the instruction, its calls before ``Buy Now``, and the reward (``None``: the
    run ended without buying, at the 15-action cap). ``final`` is the agent's thoughts since its last call and the
    ``Buy Now`` action: what it said and did last, the purchase (``None`` when it never bought)."""

    index: int
    instruction: str
    steps: tuple[Step, ...]
    final: str | None
    reward: float | None

    @property
    def finished(self) -> bool:
        return self.reward is not None

    @property
    def success(self) -> bool:
        """WebShop's success: a reward of 1.0 (every part of the instruction matched)."""
        return self.reward == 1.0


def run_output(notebook: str) -> str:
    """The printed output of the run cell of ``WebShop.ipynb``."""
    cells = json.loads(notebook)["cells"]
    for cell in cells:
        if "".join(cell.get("source", [])).strip() == RUN_CELL:
            return "".join("".join(o.get("text", [])) for o in cell.get("outputs", []))
    raise NotebookError(f"no cell {RUN_CELL!r}")


def _instruction(page: str) -> str:
    m = re.search(r"Instruction:\s*\n(.*?)\n\[Search\]", page, re.S)
    if m is None:
        raise NotebookError(f"no instruction on the start page: {page[:200]!r}")
    return m.group(1).strip()


def _actions(body: str) -> list[tuple[str, str]]:
    """(action, observation) pairs of one episode's printed lines."""
    chunks = re.split(r"^Action: ", body, flags=re.M)
    if chunks[0].strip():
        raise NotebookError(f"text before the first action: {chunks[0][:200]!r}")
    pairs = []
    for chunk in chunks[1:]:
        action, _, rest = chunk.partition("\n")
        if not rest.startswith("Observation: "):
            raise NotebookError(f"an action without its observation: {chunk[:200]!r}")
        pairs.append((action.strip(), rest.removeprefix("Observation: ").strip()))
    return pairs


def _episode(index: int, body: str, reward: float) -> Episode:
    pairs = _actions(body)
    if not pairs or pairs[0][0] != "reset":
        raise NotebookError(f"episode {index} does not start with reset")
    instruction = _instruction(pairs[0][1])
    steps: list[Step] = []
    thoughts: list[str] = []
    for action, observation in pairs[1:]:
        if action == BUY and observation != INVALID:
            score = _SCORE.match(observation)
            # The end page shows the reward; five times it came back empty, and the run's return value (the
            # running average's step) is the reward then.
            if (score is None and observation) or (score is not None and abs(float(score.group(1)) - reward) > 1e-6):
                raise NotebookError(f"episode {index}: Buy Now page {observation[:100]!r} against reward {reward}")
            final = "\n".join([*thoughts, BUY])
            return Episode(index, instruction, tuple(steps), final, round(reward, 6))
        m = _ACTION.match(action)
        if m and m.group(1) == "think":
            thoughts.append(m.group(2).strip())
            continue
        tool, arg = (m.group(1), m.group(2)) if m else ("invalid_action", action)
        steps.append(Step("\n".join(thoughts), tool, arg, observation, observation == INVALID))
        thoughts = []
    if abs(reward) > 1e-6:
        raise NotebookError(f"episode {index} never bought but has reward {reward}")
    return Episode(index, instruction, tuple(steps), None, None)


def episodes(output: str) -> list[Episode]:
    """Every printed episode, in order, its reward the step of the running average printed after it (what
    ``webshop_run`` returned), checked against the reward the end page shows.

    Raises:
        NotebookError: the output is not the episodes of ``run_episodes`` (an episode that cannot be read, or whose
            end page disagrees with the running average).
    """
    found: list[Episode] = []
    total = 0.0
    for m in _EPISODE.finditer(output):
        index, count, average = int(m.group(1)), int(m.group(3)), float(m.group(4))
        if index != len(found) or count != index + 1:
            raise NotebookError(f"episode {index} out of order (expected {len(found)})")
        reward = average * count - total
        total = average * count
        found.append(_episode(index, m.group(2), reward))
    return found


def sample(found: list[Episode]) -> list[Episode]:
    """``SAMPLE`` finished runs drawn with ``SEED``, in episode order (the draw reads no reward)."""
    finished = [e for e in found if e.finished]
    chosen = random.Random(SEED).sample(finished, min(SAMPLE, len(finished)))
    return sorted(chosen, key=lambda e: e.index)
