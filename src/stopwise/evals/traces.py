"""Labelled traces: one JSONL record per (state projection, condition), with its label, split and provenance.

The record shape is the development set's (``evals/data/devset.jsonl``)::

    {"id": "...", "condition": "goal_reached", "label": true, "split": "test",
     "source": "...", "license": "...", "kind": "...",
     "projection": {"goal": "...", "criteria": [...], "steps": [...], "final": null,
                    "pending": null, "pending_risk": "unknown"},
     "text": "GOAL: ..."}

- ``label``: ``true``/``false`` says whether the condition holds; a string names an answer label of the
  condition's question (a ``Choice`` option such as ``"irreversible"``, a ``Score`` level ``"0"``..``"4"``), and
  the condition holds when that label is one of its ``fires_on``. An integer level is read as its string.
- ``projection``: the structured projection an evaluator reads, rebuilt as a ``Projection`` by the reader; or
  ``null`` for a *text-only* record, which carries only ``text`` (the rendered projection). Model evaluators read
  ``Projection.text`` and can answer text-only records; the ``RuleEvaluator`` reads structure and skips them.
- Any other key (``tool_output``, ``group``, ``state_hash``, ``run_id``...) is kept verbatim in ``extra`` and
  written back, so reading and writing a file changes nothing.

Nothing here imports numpy or scikit-learn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from stopwise.guardian.conditions import Condition
from stopwise.guardian.projection import ProjectedCall, ProjectedStep, Projection
from stopwise.messages import ToolCall

try:  # the eval extra: orjson parses a trace line about 2.5 times faster than the standard library
    from orjson import loads as _parse_line
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    from json import loads as _parse_line  # type: ignore[assignment]

__all__ = [
    "LineProblem",
    "TraceFormatError",
    "check_projection_data",
    "TraceRecord",
    "TraceSet",
    "parse_projection_text",
    "projection_from_data",
    "projection_to_data",
    "read_traces",
    "text_projection",
    "write_traces",
]

_DEFAULT_MAX_CHARS = 8000
_KNOWN_KEYS = ("id", "condition", "label", "split", "source", "license", "kind", "projection", "text")


class TraceRecord:
    """One labelled example: a state, a condition, and whether the condition holds there.

    ``projection`` may be given as a ``Projection`` or as its JSON data (a record's ``projection`` object, as the
    reader passes it): the ``Projection`` is then built on first use and kept, so reading a large file costs no
    more than its JSON until a state is actually asked about. Treat a record as read-only.
    """

    __slots__ = (
        "_checked",
        "_data",
        "_projection",
        "condition",
        "extra",
        "id",
        "kind",
        "label",
        "license",
        "source",
        "split",
        "text",
    )

    def __init__(
        self,
        id: str,
        condition: str,
        label: bool | str,
        split: str,
        source: str,
        projection: Projection | Mapping[str, Any] | None,
        text: str = "",
        license: str = "",
        kind: str = "",
        extra: Mapping[str, Any] | None = None,
    ) -> None:
        self.id = id
        self.condition = condition
        self.label: bool | str = label
        """``True``/``False``: the condition holds or not. A string: the answer label that is right (a Choice
        option, a Score level), the condition holding when it is one of the condition's ``fires_on``."""
        self.split = split
        """``train`` or ``test`` (any other value is only included by ``--split all``)."""
        self.source = source
        """Where the state's text comes from."""
        self._projection = projection if isinstance(projection, Projection) else None
        self._data = None if isinstance(projection, Projection) or projection is None else projection
        self._checked = False
        """Whether ``_data`` passed ``check_projection_data`` already (``from_data`` checks it)."""
        if not text and (projection is not None):
            built = self.projection
            text = built.text if built is not None else ""
        self.text = text
        """The rendered projection (``Projection.text``): what a model-based evaluator is sent, and the state's
        identity (records with the same text are asked about in one evaluator call)."""
        self.license = license
        self.kind = kind
        """How the state was made (``complete``, ``exact_repeat``, ``escalation``...); near misses say so."""
        self.extra: Mapping[str, Any] = dict(extra or {})
        """Every other key of the JSON record, kept verbatim."""

    @property
    def projection(self) -> Projection | None:
        """The state as the evaluator reads it; None for a text-only record (see ``text``)."""
        if self._projection is None and self._data is not None:
            self._projection = _build_projection(self._data) if self._checked else projection_from_data(self._data)
        return self._projection

    def projection_problem(self) -> str | None:
        """Why ``projection`` would raise ``ValueError`` (its data is malformed), without building it; None when
        it can be built or the record is text-only."""
        if self._projection is not None or self._data is None or self._checked:
            return None
        return check_projection_data(self._data)

    @property
    def text_only(self) -> bool:
        """Whether the record carries only the rendered text, no structured projection."""
        return self._projection is None and self._data is None

    def __repr__(self) -> str:
        return f"TraceRecord({self.id!r}, {self.condition!r}, {self.label!r}, split={self.split!r})"

    def holds(self, condition: Condition) -> bool:
        """Whether the condition holds in this state, by its ``fires_on`` for a label that names an answer."""
        if isinstance(self.label, bool):
            return self.label
        return self.label in condition.fires_on

    def label_problem(self, condition: Condition) -> str | None:
        """Why this record's label cannot be read for ``condition`` (a label its question does not have)."""
        if isinstance(self.label, bool) or self.label in condition.question.labels:
            return None
        return f"label {self.label!r} is not an answer of {condition.name} ({', '.join(condition.question.labels)})"

    def to_data(self) -> dict[str, Any]:
        """The JSON record (keys of ``extra`` included)."""
        if self._data is not None:
            projection: Any = dict(self._data)
        else:
            projection = None if self._projection is None else projection_to_data(self._projection)
        data: dict[str, Any] = {
            "id": self.id,
            "condition": self.condition,
            "label": self.label,
            "split": self.split,
            "source": self.source,
            "license": self.license,
            "kind": self.kind,
            "projection": projection,
            "text": self.text,
        }
        for key, value in self.extra.items():
            data.setdefault(key, value)
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TraceRecord:
        """Parse one JSON record; raises ``ValueError`` saying what is wrong. The projection object is checked
        here (so a malformed one is reported with its line) and built into a ``Projection`` on first use."""
        if not isinstance(data, Mapping):
            raise ValueError(f"a record is a JSON object, got {type(data).__name__}")
        missing = [k for k in ("id", "condition", "label", "split") if k not in data]
        if missing:
            raise ValueError(f"missing {', '.join(missing)}")
        for key in ("id", "condition", "split"):
            if not isinstance(data[key], str) or not data[key]:
                raise ValueError(f"{key} must be a non-empty string, got {data[key]!r}")
        label = data["label"]
        if isinstance(label, int) and not isinstance(label, bool):
            label = str(label)  # a Score level written as a number
        if not isinstance(label, (bool, str)) or label == "":
            raise ValueError(f"label must be true/false or an answer label, got {data['label']!r}")
        raw = data.get("projection")
        text = data.get("text")
        if text is not None and not isinstance(text, str):
            raise ValueError(f"text must be a string, got {type(text).__name__}")
        if raw is None:
            if not text:
                raise ValueError("a record needs a projection or, for a text-only record, a text")
        else:
            problem = check_projection_data(raw)
            if problem is not None:
                raise ValueError(f"projection: {problem}")
        for key in ("source", "license", "kind"):
            if not isinstance(data.get(key, ""), str):
                raise ValueError(f"{key} must be a string, got {data[key]!r}")
        extra = {k: v for k, v in data.items() if k not in _KNOWN_KEYS}
        record = cls(
            data["id"],
            data["condition"],
            label,
            data["split"],
            data.get("source", ""),
            raw,
            text or "",
            data.get("license", ""),
            data.get("kind", ""),
            extra,
        )
        record._checked = raw is not None
        return record


# --------------------------------------------------------------------------------------------------------------
# Projections as data


def projection_to_data(p: Projection) -> dict[str, Any]:
    """The ``projection`` object of a record (the dev set's shape; ``max_chars`` only when not the default)."""
    data: dict[str, Any] = {
        "goal": p.goal,
        "criteria": list(p.criteria),
        "steps": [
            {
                "step": s.step,
                "text": s.text,
                "calls": [
                    {"tool": c.tool, "args": c.args, "result": c.result, "error": c.error, "risk": c.risk}
                    for c in s.calls
                ],
            }
            for s in p.steps
        ],
        "pending": None if p.pending is None else {"name": p.pending.name, "args": _plain(p.pending.args)},
        "pending_risk": p.pending_risk,
        "final": p.final,
    }
    if p.max_chars != _DEFAULT_MAX_CHARS:
        data["max_chars"] = p.max_chars
    return data


def _plain(args: Mapping[str, Any] | str) -> Any:
    return args if isinstance(args, str) else dict(args)


def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def check_projection_data(d: Any) -> str | None:
    """What is wrong with a record's ``projection`` object, or None when ``projection_from_data`` can build it.
    Cheaper than building it: the reader checks every record and builds only the states it is asked about."""
    if not isinstance(d, Mapping):
        return f"must be an object, got {type(d).__name__}"
    get = d.get
    if not isinstance(get("goal", ""), str) or not isinstance(get("pending_risk", "unknown"), str):
        return "goal and pending_risk must be strings"
    criteria = get("criteria", [])
    if not isinstance(criteria, list) or not all(isinstance(c, str) for c in criteria):
        return "criteria must be a list of strings"
    final = get("final")
    if final is not None and not isinstance(final, str):
        return "final must be a string or null"
    max_chars = get("max_chars", _DEFAULT_MAX_CHARS)
    if isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 100:
        return "max_chars must be an integer of at least 100"
    steps = get("steps", [])
    if not isinstance(steps, list):
        return "steps must be a list"
    if not _plain_steps(steps):
        problem = _step_problem(steps)
        if problem is not None:
            return problem
    pending = get("pending")
    if pending is not None and (
        not isinstance(pending, Mapping)
        or not _is_str(pending.get("name"))
        or not isinstance(pending.get("args", {}), (Mapping, str))
    ):
        return "pending must be null or {name, args} with args an object or a string"
    return None


def _plain_steps(steps: list[Any]) -> bool:
    """Whether every step and call has the common shape (plain dicts, every key of the right type): one quick
    pass; anything else is looked at closely by ``_step_problem``, which names the problem."""
    for s in steps:
        if type(s) is not dict or type(s.get("step")) is not int or not isinstance(s.get("text", ""), str):
            return False
        calls = s.get("calls", [])
        if type(calls) is not list:
            return False
        for c in calls:
            if (
                type(c) is not dict
                or type(c.get("tool")) is not str
                or not isinstance(c.get("result", ""), str)
                or not isinstance(c.get("risk", "unknown"), str)
                or type(c.get("error", False)) is not bool
            ):
                return False
    return True


def _step_problem(steps: list[Any]) -> str | None:
    """What is wrong with the first malformed step or call (None when nothing is)."""
    for i, s in enumerate(steps):
        if not isinstance(s, Mapping) or isinstance(s.get("step"), bool) or not isinstance(s.get("step"), int):
            return f"steps[{i}] needs an integer 'step'"
        if not _is_str(s.get("text", "")) or not isinstance(s.get("calls", []), list):
            return f"steps[{i}]: text must be a string and calls a list"
        for j, c in enumerate(s.get("calls", [])):
            if not isinstance(c, Mapping) or not _is_str(c.get("tool")):
                return f"steps[{i}].calls[{j}] needs a 'tool' name"
            if not _is_str(c.get("result", "")) or not _is_str(c.get("risk", "unknown")):
                return f"steps[{i}].calls[{j}]: result and risk must be strings"
            if not isinstance(c.get("error", False), bool):
                return f"steps[{i}].calls[{j}]: error must be true or false"
    return None


def projection_from_data(d: Mapping[str, Any]) -> Projection:
    """Rebuild the ``Projection`` of a record's ``projection`` object (its text and state hash are recomputed);
    raises ``ValueError`` naming the problem when ``check_projection_data`` finds one."""
    problem = check_projection_data(d)
    if problem is not None:
        raise ValueError(problem)
    return _build_projection(d)


def _build_projection(d: Mapping[str, Any]) -> Projection:
    """``projection_from_data`` for data ``check_projection_data`` has passed already: every value has its type
    (the check made sure), so it goes into the projection as it is; one pass, a quarter of the projections' cost
    in ``predict``."""
    call, step = ProjectedCall, ProjectedStep
    steps = tuple(
        [
            step(
                s["step"],
                s.get("text", ""),
                tuple(
                    [
                        call(
                            c["tool"],
                            c.get("args", {}),
                            c.get("result", ""),
                            c.get("error", False),
                            c.get("risk", "unknown"),
                        )
                        for c in s.get("calls", ())
                    ]
                ),
            )
            for s in d.get("steps", ())
        ]
    )
    pending_data = d.get("pending")
    pending = None
    if pending_data is not None:
        args = pending_data.get("args", {})
        if not isinstance(args, (Mapping, str)):
            raise ValueError(f"pending.args must be an object or a string, got {type(args).__name__}")
        pending = ToolCall(str(pending_data["name"]), args, id="pending")
    final = d.get("final")
    criteria = d.get("criteria", ())
    if isinstance(criteria, str) or not isinstance(criteria, Sequence):
        raise ValueError("criteria must be a list of strings")
    return Projection(
        str(d.get("goal", "")),
        tuple(str(c) for c in criteria),
        steps,
        pending,
        str(d.get("pending_risk", "unknown")),
        None if final is None else str(final),
        int(d.get("max_chars", _DEFAULT_MAX_CHARS)),
    )


def text_projection(text: str) -> Projection:
    """A projection that carries only a rendered text: ``text`` and ``state_hash`` are those of ``text``, every
    structured field is empty. For evaluators that read ``Projection.text`` alone (System One, a judge), to
    answer a text-only record; an evaluator that reads the structure would see an empty state."""
    p = Projection("", (), (), max_chars=max(_DEFAULT_MAX_CHARS, len(text)))
    # Projection renders its text on first read; this one is given, so it is set the same way, once, first.
    object.__setattr__(p, "text", text)
    object.__setattr__(p, "state_hash", hashlib.sha256(text.encode()).hexdigest()[:16])
    return p


# The layout ``stopwise.guardian.projection`` renders (see its ``_render``). Parsing it back is checked by
# rendering the parsed projection again: only an exact match is trusted, so a change of layout, an elided middle
# or an ambiguous text yields None (a text-only record) rather than a wrong structure.
_HEAD = re.compile(
    r"GOAL: (?P<goal>.*?)\n(?:ACCEPTANCE CRITERIA:\n(?P<criteria>.*?)\n)?RECENT STEPS \((?P<n>\d+)\):", re.S
)
_STEP = re.compile(r"\n\[step (?P<step>\d+)\] agent: ")
_CALL = re.compile(
    r"\n  call (?P<tool>[^\n(]*)\((?P<args>.*?)\) \[(?P<risk>[^\]\n]*)\] -> (?P<status>ok|error):\n"
    r"  <untrusted-tool-output>",
    re.S,
)
_RESULT_END = re.compile(
    r"</untrusted-tool-output>(?=\n  call |\n\[step \d+\] agent: |\nFINAL ANSWER PROPOSED: |\nPROPOSED NEXT ACTION: |$)"
)
_STEP_END = re.compile(r"(?=\n  call |\n\[step \d+\] agent: |\nFINAL ANSWER PROPOSED: |\nPROPOSED NEXT ACTION: |$)")
_PENDING = re.compile(
    r"\nPROPOSED NEXT ACTION: (?P<name>[^\n(]*)\((?P<args>.*)\) \[declared risk: (?P<risk>[^\]\n]*)\]$", re.S
)
_FINAL = "\nFINAL ANSWER PROPOSED: "
_ELIDED = "\n[... earlier steps elided ...]\n"


def parse_projection_text(text: str) -> Projection | None:
    """The structured projection whose rendering is exactly ``text``, or None when there is no such parse (an
    elided middle, a layout this version does not render, text that reads two ways)."""
    if _ELIDED in text:
        return None
    try:
        parsed = _parse(text)
    except (ValueError, KeyError):
        return None
    if parsed is None or parsed.text != text:
        return None
    return parsed


def _parse(text: str) -> Projection | None:
    head = _HEAD.match(text)
    if head is None:
        return None
    goal = head["goal"]
    criteria: tuple[str, ...] = ()
    if head["criteria"] is not None:
        block = head["criteria"]
        if not block.startswith("- "):
            return None
        criteria = tuple(block[2:].split("\n- "))
    count = int(head["n"])
    rest = text[head.end() :]
    pending = None
    pending_risk = "unknown"
    m = _PENDING.search(rest)
    if m is not None:
        args = _args(m["args"])
        if not isinstance(args, (Mapping, str)):
            return None
        pending, pending_risk = ToolCall(m["name"], args, id="pending"), m["risk"]
        rest = rest[: m.start()]
    final = None
    cut = rest.find(_FINAL)
    if cut >= 0:
        final, rest = rest[cut + len(_FINAL) :], rest[:cut]
    steps: list[ProjectedStep] = []
    pos = 0
    for _ in range(count):
        s = _STEP.match(rest, pos)
        if s is None:
            return None
        end = _STEP_END.search(rest, s.end())
        assert end is not None  # the pattern matches at the end of the text at the latest
        step_text = rest[s.end() : end.start()]
        pos = end.start()
        calls: list[ProjectedCall] = []
        while (c := _CALL.match(rest, pos)) is not None:
            r = _RESULT_END.search(rest, c.end())
            if r is None:
                return None
            result = rest[c.end() : r.start()]
            calls.append(ProjectedCall(c["tool"], _args(c["args"]), result, c["status"] == "error", c["risk"]))
            pos = r.end()
        steps.append(ProjectedStep(int(s["step"]), "" if step_text == "(no text)" else step_text, tuple(calls)))
    if pos != len(rest):
        return None
    return Projection(
        "" if goal == "(not stated)" else goal,
        criteria,
        tuple(steps),
        pending,
        pending_risk,
        final,
        max(_DEFAULT_MAX_CHARS, len(text) + 1),
    )


def _args(rendered: str) -> Any:
    """Arguments as rendered: JSON when it reads back to the same text, else the raw string the model sent."""
    try:
        value = json.loads(rendered)
    except ValueError:
        return rendered
    if json.dumps(value, ensure_ascii=False, default=str) != rendered:
        return rendered
    return value


# --------------------------------------------------------------------------------------------------------------
# Files


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A line of a trace file that could not be read."""

    path: str
    line: int
    """1-based line number."""
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.message}"


class TraceFormatError(ValueError):
    """A trace file with malformed lines, read with ``strict=True``; ``problems`` lists every one."""

    def __init__(self, problems: Sequence[LineProblem]) -> None:
        self.problems = tuple(problems)
        more = f" (and {len(self.problems) - 1} more)" if len(self.problems) > 1 else ""
        super().__init__(f"{self.problems[0]}{more}")

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled whole: the default would call this with the message as the problems.
        return (type(self), (self.problems,))


@dataclass(frozen=True, slots=True)
class TraceSet:
    """What a reader got from its files: the records, and the lines it skipped with why."""

    records: tuple[TraceRecord, ...]
    problems: tuple[LineProblem, ...] = ()


def read_traces(paths: str | Path | Iterable[str | Path], *, strict: bool = False) -> TraceSet:
    """Read JSONL trace files. Blank lines are ignored. A malformed line (not JSON, or not a record) is skipped
    and listed in ``problems`` with its line number; with ``strict=True`` any malformed line raises
    ``TraceFormatError`` listing them all instead. Raises ``OSError`` when a file cannot be read.

    The garbage collector is left as it is. Parsed records make no reference cycles, but the cyclic collector
    walks the growing heap of them again and again: a program reading a large file can pause it around the read
    (``gc.disable()`` ... ``gc.enable()``, then ``gc.freeze()``), as ``stopwise eval`` does."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    records: list[TraceRecord] = []
    problems: list[LineProblem] = []
    for path in paths:
        name = str(path)
        # Bytes go to the parser as they are: a line that is not UTF-8 is then one malformed line, not a
        # decoding error that ends the read.
        with open(path, "rb") as f:
            for number, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    records.append(TraceRecord.from_data(_parse_line(line)))
                except ValueError as exc:  # both parsers' errors, and UnicodeDecodeError, are ValueErrors
                    problems.append(LineProblem(name, number, _one_line(str(exc))))
    if strict and problems:
        raise TraceFormatError(problems)
    return TraceSet(tuple(records), tuple(problems))


def write_traces(path: str | Path, records: Iterable[TraceRecord]) -> int:
    """Write records as JSONL (one per line, keys sorted, UTF-8 as is); returns how many were written."""
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record.to_data(), ensure_ascii=False, sort_keys=True, default=str) + "\n")
            count += 1
    return count


def _one_line(text: str, width: int = 200) -> str:
    line = " ".join(text.split())
    return line if len(line) <= width else line[: width - 3] + "..."
