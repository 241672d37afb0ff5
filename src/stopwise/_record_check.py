"""The field-type check of a record read back from the log: every field of the typed record, and every field of
its JSON data that a field of the same name is read from, holds what the record's annotations say.

A record's ``from_data`` reads what the log holds; a damaged log, or one a newer version wrote, may hold a field
of another type there, which ``from_data`` would pass through (a number where a text was) or convert into
something else (a text read as a tuple of its letters, ``"false"`` read as ``True``). ``check_data`` (the JSON,
before ``from_data``) and ``check_record`` (the record it read) refuse both, so such a record is an unreadable
entry, never a silent misread. The checks are built once per record class from its annotations
(``typing.get_type_hints``) and are plain ``isinstance`` tests, so reading a log stays cheap.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from enum import Enum
from typing import Any

__all__ = ["FieldMismatch", "check_data", "check_record"]


class FieldMismatch(ValueError):
    """A field of a record holds a value of another type than its annotation: ``path`` names the field (its
    names and indexes, outermost first), ``expected`` what it should hold."""

    def __init__(self, expected: str, value: object) -> None:
        super().__init__(expected, type(value).__name__)
        self.expected = expected
        self.got = type(value).__name__
        self.path: list[str] = []

    def within(self, segment: str) -> FieldMismatch:
        """This mismatch, found inside ``segment`` (a field name or ``[index]``) of the value checked."""
        self.path.insert(0, segment)
        return self

    def __str__(self) -> str:
        where = "".join(p if p.startswith("[") else f".{p}" for p in self.path).lstrip(".")
        return f"field {where or '(the record)'} holds {self.got}, not {self.expected}"


_Check = Callable[[object], None]
"""Raises ``FieldMismatch`` when the value does not fit. The path is added as the error goes up (so a value that
fits, the common case, costs no string work)."""

_RAW_EXEMPT: frozenset[tuple[str, str]] = frozenset({("ToolReceipt", "redacted"), ("PolicyInputs", "newer")})
"""Fields whose JSON key of the same name holds something else: a receipt's ``"redacted"`` is the redacted copy
(the flag is whether the key is there); policy inputs' ``newer`` is the keys this version does not know, so a
``"newer"`` key is one of them (a newer writer's input of that name), never the field."""


_FAST: dict[_Check, frozenset[type]] = {}
"""Per check, the types whose every value it passes (a value of one of them needs no call of the check): the
checks of the scalars, the enums and ``X | None`` of those. The field, item and value loops below test
``type(value) in`` these first, so a long run's records, mostly scalars, cost a set lookup per field, not a call;
any other value is handed to the check itself, which passes it or raises as before."""


def _fast(check: _Check, kinds: frozenset[type]) -> _Check:
    _FAST[check] = kinds
    return check


def _exact(kind: type, expected: str) -> _Check:
    # ``type(...) is``: a bool is not an int here, and JSON gives no subclasses.
    def check(value: object) -> None:
        if type(value) is not kind:
            raise FieldMismatch(expected, value)

    return _fast(check, frozenset({kind}))


def _instance(kind: type) -> _Check:
    def check(value: object) -> None:
        if not isinstance(value, kind):
            raise FieldMismatch(f"a {kind.__name__}", value)

    return check


def _number(value: object) -> None:
    if type(value) is not float and type(value) is not int:
        raise FieldMismatch("a number", value)


def _any(value: object) -> None:
    return None


_FAST[_number] = frozenset({float, int})


def _build(hint: Any, raw: bool) -> _Check:
    """The check of a value annotated ``hint``; ``raw``: of its JSON data (an enum's value where the record holds
    the member, an object where it holds a record)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return _any
    if hint is float:
        return _number
    for kind, expected in ((bool, "a boolean"), (int, "an integer"), (str, "a text"), (type(None), "null")):
        if hint is kind:
            return _exact(kind, expected)
    if origin is typing.Literal:
        allowed = frozenset(args)
        expected = f"one of {sorted(map(str, allowed))}"

        def literal(value: object) -> None:
            if not isinstance(value, (str, int)) or value not in allowed:
                raise FieldMismatch(expected, value)

        return literal
    if isinstance(hint, type) and issubclass(hint, Enum):
        return _enum(hint, raw)
    if origin is typing.Union or origin is types.UnionType:
        return _union(args, raw)
    if origin is tuple or origin is Sequence or origin is list:
        return _sequence(args, raw)
    if origin is Mapping or origin is dict:
        return _mapping(args[1], raw)
    if isinstance(hint, type) and issubclass(hint, Sequence) and hint not in (str, bytes):
        # A sequence class of its own (``history.Positions``): the record holds one, its JSON a list of integers.
        return _sequence((int, Ellipsis), raw) if raw else _instance(hint)
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record_raw(hint) if raw else _record(hint)
    raise TypeError(f"no field check for annotation {hint!r}")  # a record class with a field of a new kind


def _enum(enum: type[Enum], raw: bool) -> _Check:
    values = frozenset(m.value for m in enum)

    def member(value: object) -> None:
        if not isinstance(value, enum):
            raise FieldMismatch(f"a {enum.__name__}", value)

    def data(value: object) -> None:
        if not isinstance(value, (str, int)) or value not in values:
            raise FieldMismatch(f"a {enum.__name__} value", value)

    return data if raw else _fast(member, frozenset({enum}))


def _union(args: tuple[Any, ...], raw: bool) -> _Check:
    optional = type(None) in args
    options = [_build(a, raw) for a in args if a is not type(None)]
    expected = " or ".join(getattr(a, "__name__", str(a)) for a in args)
    if len(options) == 1:
        only = options[0]

        def maybe(value: object) -> None:  # ``X | None``, nearly every union of a record
            if value is not None:
                only(value)

        fast = _FAST.get(only)
        return maybe if fast is None else _fast(maybe, fast | {type(None)})

    def union(value: object) -> None:
        if value is None and optional:
            return
        for option in options:
            try:
                option(value)
            except FieldMismatch:
                continue
            return
        raise FieldMismatch(expected, value)

    return union


def _sequence(args: tuple[Any, ...], raw: bool) -> _Check:
    if len(args) != 2 or args[1] is not Ellipsis:
        if len(args) == 1:  # Sequence[X], list[X]
            args = (args[0], Ellipsis)
        else:
            return _fixed([_build(a, raw) for a in args])
    each = _build(args[0], raw)
    fast = _FAST.get(each, frozenset())

    def sequence(value: object) -> None:
        if type(value) is not tuple and type(value) is not list:
            raise FieldMismatch("a list", value)
        if each is not _any:
            for i, item in enumerate(value):
                if type(item) in fast:
                    continue
                try:
                    each(item)
                except FieldMismatch as exc:
                    raise exc.within(f"[{i}]") from None

    return sequence


def _fixed(items: list[_Check]) -> _Check:
    def fixed(value: object) -> None:
        if (type(value) is not tuple and type(value) is not list) or len(value) != len(items):
            raise FieldMismatch(f"a list of {len(items)}", value)
        for i, (item, check) in enumerate(zip(value, items, strict=True)):
            try:
                check(item)
            except FieldMismatch as exc:
                raise exc.within(f"[{i}]") from None

    return fixed


def _mapping(values_hint: Any, raw: bool) -> _Check:
    each = _build(values_hint, raw)
    fast = _FAST.get(each, frozenset())

    def mapping(value: object) -> None:
        if type(value) is not dict and not isinstance(value, Mapping):
            raise FieldMismatch("an object", value)
        for k, v in value.items():
            if type(k) is not str:
                raise FieldMismatch("a text", k).within("(a key)")
            if each is not _any and type(v) not in fast:
                try:
                    each(v)
                except FieldMismatch as exc:
                    raise exc.within(f"[{k!r}]") from None

    return mapping


def _fields(cls: type, raw: bool, skip: frozenset[str] = frozenset()) -> list[tuple[str, _Check, frozenset[type]]]:
    """Each field's name, its check (none for a field of ``Any``) and the types that check passes at once."""
    hints = typing.get_type_hints(cls)
    checks = [
        (f.name, _build(hints[f.name], raw))
        for f in dataclasses.fields(cls)
        if f.name not in skip and not (raw and (cls.__name__, f.name) in _RAW_EXEMPT)
    ]
    return [(name, check, _FAST.get(check, frozenset())) for name, check in checks if check is not _any]


_RECORDS: dict[tuple[type, frozenset[str]], _Check] = {}


def _record(cls: type, skip: frozenset[str] = frozenset()) -> _Check:
    """The check of a typed record: each field but those in ``skip``, recursively. Built lazily, once (records
    nest)."""
    key = (cls, skip)
    if key not in _RECORDS:
        fields: list[tuple[str, _Check, frozenset[type]]] = []

        def record(value: object) -> None:
            if not isinstance(value, cls):
                raise FieldMismatch(cls.__name__, value)
            for name, check, fast in fields:
                field = getattr(value, name)
                if type(field) in fast:
                    continue
                try:
                    check(field)
                except FieldMismatch as exc:
                    raise exc.within(name) from None

        _RECORDS[key] = record
        fields.extend(_fields(cls, False, skip))
    return _RECORDS[key]


_RAW_RECORDS: dict[type, _Check] = {}


def _record_raw(cls: type) -> _Check:
    """The check of a record's JSON data: an object whose keys named as a field hold that field's JSON form; keys
    that are absent (a default) or that name no field (a newer writer's addition) are not checked."""
    if cls not in _RAW_RECORDS:
        fields: list[tuple[str, _Check, frozenset[type]]] = []

        def record(value: object) -> None:
            if type(value) is not dict and not isinstance(value, Mapping):
                raise FieldMismatch("an object", value)
            for name, check, fast in fields:
                if name in value:
                    field = value[name]
                    if type(field) in fast:
                        continue
                    try:
                        check(field)
                    except FieldMismatch as exc:
                        raise exc.within(name) from None

        _RAW_RECORDS[cls] = record
        fields.extend(_fields(cls, True))
    return _RAW_RECORDS[cls]


def check_data(cls: type, data: object) -> None:
    """Raises ``FieldMismatch`` unless ``data`` (the JSON a record of ``cls`` is read from) is an object whose keys
    that name a field of ``cls`` hold that field's JSON form (a list for a tuple, an enum's value, an object for
    a nested record, recursively). Absent keys (a default) and keys that name no field are not checked."""
    _record_raw(cls)(data)


def check_record(record: object, skip: frozenset[str] = frozenset()) -> None:
    """Raises ``FieldMismatch`` naming the first field of ``record`` (a dataclass record as ``from_data`` read it),
    recursively, that does not hold its annotated type. ``skip``: fields not to check (checked where they were
    read: a guardian decision's fields from its config)."""
    _record(type(record), skip)(record)
