"""The typed records a step commits with its rows: one tagged union, and its one decoder.

Each decider owns the typed form of its records (``GuardrailRecord``, ``ToolReceipt``, ``StopGuardRecord``,
``GuardianDecision``, ``GuardianLabel``, ``ApprovalRequest``, ``ApprovalRecord``); the loop's own records, the
write-ahead ``StepIntent``, a resume's ``ResumeIntent`` and a forked session's ``ForkRecord``, live here; a run's
``Goal`` (``run_goal``) commits with the run's first entry. This module names the union and converts at the
store's boundary: the store keeps records as JSON data with a ``"type"`` tag (``LogEntry.records``), and
everything above it reads them through ``parse_records``. A record of a type this version does not know (a newer
writer) is kept as ``UnknownRecord`` and written back unchanged.

What a run's guardian decisions share (``GuardianConfig``: the question set, the evaluator, the conditions and the
policy) is written once per run, in the entry of the first decision that names it; ``to_data`` does that given
the set of configs the run's log already holds, and ``parse_records`` reads a run's entries in order with one
``configs`` mapping that collects them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from stopwise._record_check import FieldMismatch, check_data, check_record
from stopwise.approvals import ApprovalRecord, ApprovalRequest, PlannedCall
from stopwise.errors import ConfigError, UnreadableEntry, UnreadableRecord
from stopwise.goal import Goal
from stopwise.guardian.records import GuardianConfig, GuardianDecision, GuardianLabel, UnresolvedConfig
from stopwise.guardrails.receipts import ToolReceipt
from stopwise.guardrails.verdicts import GuardrailRecord
from stopwise.history import HistoryRecord
from stopwise.step_plan import StepPlanRecord
from stopwise.stop.decision import Phase
from stopwise.stop.guard import StopGuardRecord
from stopwise.store.base import LogEntry
from stopwise.tool_switches import ToolSwitchRecord

__all__ = [
    "RunLog",
    "ForkRecord",
    "LogRecord",
    "ResumeIntent",
    "StepIntent",
    "ToolReceipt",
    "UnknownRecord",
    "parse_entry",
    "parse_log",
    "parse_record",
    "parse_records",
    "read_typed",
    "to_data",
]


@dataclass(frozen=True, slots=True)
class UnknownRecord:
    """A record whose type this version does not know: kept as it was written."""

    data: Mapping[str, Any]

    @property
    def type(self) -> str:
        return str(self.data.get("type", ""))

    def to_data(self) -> dict[str, Any]:
        return dict(self.data)


_PLAN_DEFAULTS: dict[str, Any] = {"row": None, "needs_approval": False}


@dataclass(frozen=True, slots=True)
class StepIntent:
    """The loop's write-ahead record: a step's planned tool calls, committed with its reply before any runs.

    A re-run after a crash executes these plans (same call ids, same arguments, so the same
    ``RunContext.idempotency_key``) instead of asking the model again."""

    TYPE: ClassVar[str] = "step_intent"
    calls: tuple[PlannedCall, ...]
    phase: Phase = Phase.NORMAL

    def to_data(self) -> dict[str, Any]:
        # Written every tool step: ``PlannedCall.to_data`` less the fields at their defaults (``from_data`` reads
        # them back). A call with no answer yet (the common plan) is built directly, not filtered.
        calls = []
        for c in self.calls:
            if c.answer is None:
                args = None if c.args is None else dict(c.args)
                call: dict[str, Any] = {"call_id": c.call_id, "tool": c.tool, "args": args}
                if c.needs_approval:
                    call["needs_approval"] = c.needs_approval
            else:
                call = {k: v for k, v in c.to_data().items() if k not in _PLAN_DEFAULTS or v != _PLAN_DEFAULTS[k]}
            calls.append(call)
        data: dict[str, Any] = {"type": self.TYPE, "calls": calls}
        if self.phase is not Phase.NORMAL:
            data["phase"] = self.phase.value
        return data

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> StepIntent:
        return cls(tuple(PlannedCall.from_data(c) for c in d.get("calls", ())), Phase(d.get("phase", "normal")))


@dataclass(frozen=True, slots=True)
class ResumeIntent:
    """A resume's write-ahead record: the reviewer's decisions of the calls it is about to run, committed (in a
    ``note`` entry of the suspended step) before any of them runs. Its step's ``settle`` commits the decisions
    again with the results; a resume that died in between left only this, so the next one knows those calls may
    have run (``stopwise._suspended.SuspendedStep.begun``)."""

    TYPE: ClassVar[str] = "resume_intent"
    decisions: tuple[ApprovalRecord, ...]

    def to_data(self) -> dict[str, Any]:
        # The decisions are this record's fields, not records of the entry: no type tag of their own.
        return {
            "type": self.TYPE,
            "decisions": [{k: v for k, v in d.to_data().items() if k != "type"} for d in self.decisions],
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ResumeIntent:
        return cls(tuple(read_typed(ApprovalRecord, r) for r in d["decisions"]))


@dataclass(frozen=True, slots=True)
class ForkRecord:
    """Where a forked session came from (``Runner.fork``): its log up to ``source_seq`` is a copy of the source
    session's, which ends with the commit of ``at_step`` of the source run. The last entry of a fork's copy
    (a ``note``) carries it; a forked session without it was not completely written."""

    TYPE: ClassVar[str] = "fork"
    source_session_id: str
    source_run_id: str
    at_step: int
    source_seq: int

    def to_data(self) -> dict[str, Any]:
        return {
            "type": self.TYPE,
            "source_session_id": self.source_session_id,
            "source_run_id": self.source_run_id,
            "at_step": self.at_step,
            "source_seq": self.source_seq,
        }

    @classmethod
    def from_data(cls, d: Mapping[str, Any]) -> ForkRecord:
        return cls(d["source_session_id"], d["source_run_id"], d["at_step"], d["source_seq"])


LogRecord = (
    GuardrailRecord
    | StopGuardRecord
    | GuardianDecision
    | GuardianLabel
    | ApprovalRequest
    | ApprovalRecord
    | ToolReceipt
    | StepPlanRecord
    | HistoryRecord
    | StepIntent
    | ResumeIntent
    | ForkRecord
    | ToolSwitchRecord
    | Goal
    | UnknownRecord
)
"""Every record a step can commit."""

_TYPES: dict[str, Any] = {
    cls.TYPE: cls
    for cls in (
        GuardrailRecord,
        ToolReceipt,
        StopGuardRecord,
        GuardianDecision,
        GuardianLabel,
        ApprovalRequest,
        ApprovalRecord,
    )
}
_TYPES[StepPlanRecord.TYPE] = StepPlanRecord
_TYPES[HistoryRecord.TYPE] = HistoryRecord
_TYPES[StepIntent.TYPE] = StepIntent
_TYPES[ResumeIntent.TYPE] = ResumeIntent
_TYPES[ForkRecord.TYPE] = ForkRecord
_TYPES[ToolSwitchRecord.TYPE] = ToolSwitchRecord
_TYPES[Goal.TYPE] = Goal


_T = TypeVar("_T")

_FROM_CONFIG = frozenset({"question_set_version", "evaluator", "model_version", "conditions", "policy"})
"""The fields a guardian decision in its log form takes from its run's ``GuardianConfig``: checked once, when the
config was read, not again for every decision."""


def parse_record(data: Mapping[str, Any], configs: Mapping[str, GuardianConfig] | None = None) -> LogRecord:
    """The typed record for one record's JSON data (``UnknownRecord`` for a type this version does not know). A
    guardian decision that names its config reads it from ``configs``. Every field is type-checked against the
    record's annotations (``stopwise._record_check``): data that is not an object, that lacks a field, holds one
    of another type, or names a config not read before it raises ``UnreadableRecord`` naming the type and the
    field, never the parser's own ``KeyError`` or ``TypeError``, and never a record with a field misread."""
    if not isinstance(data, Mapping):
        raise UnreadableRecord(f"a record is {type(data).__name__}, not an object")
    kind = data.get("type", "")
    if kind == GuardianDecision.TYPE and "config" in data:
        # The log form names its config and keeps its fields in a shorter form: only the decision read from it is
        # checked, less the fields its config gave (checked once, when the config was read).
        with _reading(kind):
            decision = GuardianDecision.from_data(data, configs)
            check_record(decision, _FROM_CONFIG)
        return decision
    cls = _TYPES.get(kind)
    if cls is None:
        return UnknownRecord(data)
    record: LogRecord = read_typed(cls, data)
    return record


def read_typed(cls: type[_T], data: object, what: str | None = None) -> _T:
    """``cls.from_data(data)`` with every field type-checked: the data where its keys are the record's fields
    (first, so a field of another type is named as such, not as whatever the parser tripped on), then the record
    read. ``UnreadableRecord`` naming ``what`` (the data's ``"type"`` by default) and the field otherwise."""
    with _reading(what or (data.get("type", "") if isinstance(data, Mapping) else cls.__name__)):
        check_data(cls, data)
        record: _T = cls.from_data(data)  # type: ignore[attr-defined]
        check_record(record)
    return record


@contextmanager
def _reading(kind: str) -> Iterator[None]:
    """A parser's failure on a record of ``kind`` as ``UnreadableRecord``; a missing key names the field."""
    try:
        yield
    except (FieldMismatch, UnresolvedConfig, ConfigError) as exc:  # ConfigError: a guardian policy's setting
        raise UnreadableRecord(f"a {kind!r} record: {exc}") from exc
    except KeyError as exc:
        missing = f"field {exc.args[0]!r} is missing" if exc.args else "a field is missing"
        raise UnreadableRecord(f"a {kind!r} record: {missing}") from exc
    except (LookupError, TypeError, ValueError, AttributeError) as exc:
        raise UnreadableRecord(f"a {kind!r} record: {type(exc).__name__}: {exc}") from exc


def parse_records(
    data: Iterable[Mapping[str, Any]], configs: MutableMapping[str, GuardianConfig] | None = None
) -> tuple[LogRecord, ...]:
    """One entry's records, typed. ``configs`` collects the run's ``GuardianConfig`` records as they are read
    (they are not returned: they are the decisions' shared part): to read a run, pass one mapping for all of its
    entries, in log order. Without it, an entry's decisions must name configs of the same entry. A record this
    version cannot read raises ``UnreadableRecord``; read a stored entry with ``parse_entry``, which names it."""
    known: MutableMapping[str, GuardianConfig] = {} if configs is None else configs
    out: list[LogRecord] = []
    if isinstance(data, (str, bytes, Mapping)) or not isinstance(data, Iterable):
        raise UnreadableRecord(f"the records are {type(data).__name__}, not a list")
    for d in data:
        if isinstance(d, Mapping) and d.get("type") == GuardianConfig.TYPE:
            config = read_typed(GuardianConfig, d)
            known[config.key] = config
        else:
            out.append(parse_record(d, known))
    return tuple(out)


def parse_entry(entry: LogEntry, configs: MutableMapping[str, GuardianConfig] | None = None) -> tuple[LogRecord, ...]:
    """A stored entry's records, typed (``parse_records``, with ``configs`` as there). A record this version
    cannot read raises ``UnreadableEntry`` naming the session and the entry's seq: every read of a session's
    records (continuing, retrying or resuming a run, its result, its history, the views) goes through here."""
    try:
        return parse_records(entry.records, configs)
    except UnreadableRecord as exc:
        raise UnreadableEntry(entry.session_id, entry.seq, exc.why) from exc


def parse_log(entries: Iterable[LogEntry]) -> list[tuple[LogEntry, tuple[LogRecord, ...]]]:
    """Each entry with its typed records, read in log order with one ``configs`` mapping, as a run's guardian
    decisions need (they name a config an earlier entry holds). Use it whenever entries are read together. An
    entry this version cannot read raises ``UnreadableEntry`` (``parse_entry``)."""
    configs: dict[str, GuardianConfig] = {}
    return [(e, parse_entry(e, configs)) for e in entries]


class RunLog:
    """One run's entries, read once (``RunLog.of``) and handed to every reader of a resume (the suspended step, the
    restored leg), each entry's records typed when a reader first asks for them: a resume reads the few records it
    acts on (the suspended step's, the types the restored leg keeps), not every record of a long run again.

    What is read eagerly, by ``of``: each entry's records' ``"type"`` tags and the run's ``GuardianConfig`` records
    (the decisions' shared part, a few per run). An entry whose records are not a list of objects is parsed at once,
    so its ``UnreadableEntry`` is raised by ``of``, as before. An entry's records are typed (``parse_entry``, every
    field checked) the first time ``records`` or ``typed`` reaches them, with the configs written before the entry,
    so each reads as ``parse_log`` reads it and a damaged one raises the same ``UnreadableEntry``, then: before
    anything acts on it. A damaged record of a type no reader of the resume asks for is not refused by the resume
    (``docs/durability.md``); every view of the whole log (``parse_log``) still refuses it. Per resume only: the
    parsed records live as long as this value, never across resumes."""

    __slots__ = ("_config_at", "_parsed", "_tags", "configs", "entries")

    entries: tuple[LogEntry, ...]
    """The run's entries, in log order."""
    configs: Mapping[str, GuardianConfig]
    """The ``GuardianConfig`` records the entries hold, by key."""

    def __init__(
        self,
        entries: tuple[LogEntry, ...],
        tags: tuple[frozenset[str], ...],
        config_at: tuple[tuple[int, int, GuardianConfig], ...],
        parsed: dict[int, tuple[LogRecord, ...]],
    ) -> None:
        self.entries = entries
        self._tags = tags
        self._config_at = config_at
        self.configs = {c.key: c for _, _, c in config_at}
        self._parsed = parsed

    @classmethod
    def of(cls, entries: Iterable[LogEntry]) -> RunLog:
        """``entries`` (one run's, in log order): their tags and configs read, the rest on demand."""
        entries = tuple(entries)
        tags: list[frozenset[str]] = []
        config_at: list[tuple[int, int, GuardianConfig]] = []
        parsed: dict[int, tuple[LogRecord, ...]] = {}
        configs: dict[str, GuardianConfig] = {}
        sets: dict[tuple[str, ...], frozenset[str]] = {}  # the run's few tag sets, shared
        for i, e in enumerate(entries):
            data = e.records
            names = _tags(data)
            if names is not None:
                tagged = sets.get(names)
                if tagged is None:
                    tagged = sets[names] = frozenset(names)
                tags.append(tagged)
                if GuardianConfig.TYPE in tagged:
                    for j, d in enumerate(data):
                        if d["type"] == GuardianConfig.TYPE:
                            try:
                                config = read_typed(GuardianConfig, d)
                            except UnreadableRecord as exc:
                                raise UnreadableEntry(e.session_id, e.seq, exc.why) from exc
                            config_at.append((i, j, config))
                            configs[config.key] = config
                continue
            # Not the shape a store reads back (or a record without a tag): typed now, so that it is refused (or read)
            # when and as it was before.
            seen = dict(configs)
            parsed[i] = parse_entry(e, seen)
            tags.append(frozenset(type(r).TYPE for r in parsed[i] if not isinstance(r, UnknownRecord)))
            for key, config in seen.items():
                if configs.get(key) is not config:
                    config_at.append((i, -1, config))  # read before the entry's records: it is parsed already
                    configs[key] = config
        return cls(entries, tuple(tags), tuple(config_at), parsed)

    def records(self, index: int) -> tuple[LogRecord, ...]:
        """The typed records of ``entries[index]``, as ``parse_log`` reads them (``UnreadableEntry`` if they
        cannot be)."""
        got = self._parsed.get(index)
        if got is None:
            before = {c.key: c for i, _, c in self._config_at if i < index}
            got = self._parsed[index] = parse_entry(self.entries[index], before)
        return got

    def holds(self, index: int, *types: str) -> bool:
        """Whether ``entries[index]`` holds a record tagged with one of ``types`` (read without typing it)."""
        return not self._tags[index].isdisjoint(types)

    def typed(self, *classes: type[_T]) -> list[_T]:
        """The run's records of ``classes``, in log order: only the records tagged as one of them are typed (each as
        ``records`` would type it, with the configs written before it; ``UnreadableEntry`` naming its entry)."""
        wanted = {c.TYPE for c in classes}  # type: ignore[attr-defined]
        out: list[_T] = []
        configs: dict[str, GuardianConfig] = {}
        written = iter(self._config_at)  # in log order
        config = next(written, None)
        for i, tags in enumerate(self._tags):
            if tags.isdisjoint(wanted):
                continue
            got = self._parsed.get(i)
            if got is not None:
                out.extend(r for r in got if isinstance(r, classes))
                continue
            e = self.entries[i]
            for j, d in enumerate(e.records):
                if d["type"] not in wanted:
                    continue
                while config is not None and (config[0], config[1]) < (i, j):
                    configs[config[2].key] = config[2]
                    config = next(written, None)
                try:
                    record = parse_record(d, configs)
                except UnreadableRecord as exc:
                    raise UnreadableEntry(e.session_id, e.seq, exc.why) from exc
                if isinstance(record, classes):
                    out.append(record)
        return out


def _tags(data: object) -> tuple[str, ...] | None:
    """The ``"type"`` tags of an entry's records, in order; None unless they are a list of objects, each tagged
    with a text (what a store reads back)."""
    if type(data) is not tuple and type(data) is not list:
        return None
    names = []
    for d in data:
        if type(d) is not dict:
            return None
        name = d.get("type")
        if type(name) is not str:
            return None
        names.append(name)
    return tuple(names)


def to_data(records: Iterable[LogRecord], configs: set[str] | None = None) -> tuple[dict[str, Any], ...]:
    """The records as the store keeps them: JSON data tagged with ``"type"``.

    ``configs``: the keys of the ``GuardianConfig`` records the run's log holds. Given, each guardian decision is
    written in its log form, naming its config, and a config not in ``configs`` yet is written just before it (and
    added to ``configs``: the caller commits these records or ends its leg). Without it, decisions are whole."""
    out: list[dict[str, Any]] = []
    for r in records:
        if configs is not None and isinstance(r, GuardianDecision):
            key = r.config_key
            if key not in configs:
                out.append(GuardianConfig.of(r).to_data())
                configs.add(key)
            out.append(r.to_log_data(key))
        else:
            out.append(r.to_data())
    return tuple(out)
