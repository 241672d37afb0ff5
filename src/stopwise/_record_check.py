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
    """A field of a record holds a value of another type than its annotation: ``path`` names the field."""

    def __init__(self, path: str, expected: str, value: object) -> None:
        super().__init__(f"field {path} holds {type(value).__name__}, not {expected}")
        self.path = path


_Check = Callable[[object, str], None]
"""Raises ``FieldMismatch`` (naming the path given) when the value does not fit."""

_RAW_EXEMPT: frozenset[tuple[str, str]] = frozenset({("ToolReceipt", "redacted")})
"""Fields whose JSON key of the same name holds something else: a receipt's ``"redacted"`` is the redacted copy
(the flag is whether the key is there)."""


def _fail(path: str, expected: str, value: object) -> typing.NoReturn:
    raise FieldMismatch(path, expected, value)


def _scalar(kind: type, expected: str) -> _Check:
    def check(value: object, path: str) -> None:
        if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
            _fail(path, expected, value)

    return check


def _number(value: object, path: str) -> None:
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        _fail(path, "a number", value)


def _any(value: object, path: str) -> None:
    return None


def _build(hint: Any, raw: bool) -> _Check:
    """The check of a value annotated ``hint``; ``raw``: of its JSON data (a list where the record holds a tuple,
    an enum's value where it holds the member, an object where it holds a record)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return _any
    if hint is bool:
        return _scalar(bool, "a boolean")
    if hint is int:
        return _scalar(int, "an integer")
    if hint is float:
        return _number
    if hint is str:
        return _scalar(str, "a text")
    if hint is type(None):
        return _scalar(type(None), "null")
    if origin is typing.Literal:
        allowed = frozenset(args)

        def literal(value: object, path: str) -> None:
            if not isinstance(value, (str, int)) or value not in allowed:
                _fail(path, f"one of {sorted(map(str, allowed))}", value)

        return literal
    if isinstance(hint, type) and issubclass(hint, Enum):
        values = frozenset(m.value for m in hint)
        enum = hint
        if raw:
            return lambda value, path: None if value in values else _fail(path, f"a {enum.__name__} value", value)
        return lambda value, path: None if isinstance(value, enum) else _fail(path, f"a {enum.__name__}", value)
    if origin is typing.Union or origin is types.UnionType:
        options = [_build(a, raw) for a in args]

        def union(value: object, path: str) -> None:
            for option in options:
                try:
                    option(value, path)
                except FieldMismatch:
                    continue
                return
            _fail(path, " or ".join(str(a) for a in args), value)

        return union
    if origin is tuple or origin is Sequence or origin is list:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            items = [_build(a, raw) for a in args]

            def fixed(value: object, path: str) -> None:
                if not isinstance(value, (list, tuple)) or len(value) != len(items):
                    _fail(path, f"a sequence of {len(items)}", value)
                for i, (item, check) in enumerate(zip(value, items, strict=True)):
                    check(item, f"{path}[{i}]")

            return fixed
        each = _build(args[0], raw)

        def sequence(value: object, path: str) -> None:
            if not isinstance(value, (list, tuple)):
                _fail(path, "a sequence", value)
            if each is not _any:
                for i, item in enumerate(value):
                    each(item, f"{path}[{i}]")

        return sequence
    if origin is Mapping or origin is dict:
        values_check = _build(args[1], raw)

        def mapping(value: object, path: str) -> None:
            if not isinstance(value, Mapping):
                _fail(path, "an object", value)
            for k, v in value.items():
                if not isinstance(k, str):
                    _fail(f"{path} key", "a text", k)
                if values_check is not _any:
                    values_check(v, f"{path}[{k!r}]")

        return mapping
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return _record_raw(hint) if raw else _record(hint)
    raise TypeError(f"no field check for annotation {hint!r}")  # a record class with a field of a new kind


_CHECKS: dict[tuple[type, bool], _Check] = {}


def _fields(cls: type, raw: bool) -> list[tuple[str, _Check]]:
    hints = typing.get_type_hints(cls)
    return [
        (f.name, _build(hints[f.name], raw))
        for f in dataclasses.fields(cls)
        if not (raw and (cls.__name__, f.name) in _RAW_EXEMPT)
    ]


def _record(cls: type) -> _Check:
    """The check of a typed record: each field, recursively. Built lazily, once (records nest)."""
    key = (cls, False)
    if key not in _CHECKS:
        fields: list[tuple[str, _Check]] = []

        def record(value: object, path: str) -> None:
            if not isinstance(value, cls):
                _fail(path, cls.__name__, value)
            for name, check in fields:
                check(getattr(value, name), f"{path}.{name}" if path else name)

        _CHECKS[key] = record
        fields.extend(_fields(cls, False))
    return _CHECKS[key]


def _record_raw(cls: type) -> _Check:
    """The check of a record's JSON data: an object whose keys named as a field hold that field's JSON form; keys
    that are absent (a default) or that name no field (a newer writer's addition) are not checked."""
    key = (cls, True)
    if key not in _CHECKS:
        fields: list[tuple[str, _Check]] = []

        def record(value: object, path: str) -> None:
            if not isinstance(value, Mapping):
                _fail(path, "an object", value)
            for name, check in fields:
                if name in value:
                    check(value[name], f"{path}.{name}" if path else name)

        _CHECKS[key] = record
        fields.extend(_fields(cls, True))
    return _CHECKS[key]


def check_data(cls: type, data: object) -> None:
    """Raises ``FieldMismatch`` unless ``data`` (the JSON a record of ``cls`` is read from) is an object whose keys
    that name a field of ``cls`` hold that field's JSON form (a list for a tuple, an enum's value, an object for
    a nested record, recursively). Absent keys (a default) and keys that name no field are not checked."""
    _record_raw(cls)(data, "")


def check_record(record: object) -> None:
    """Raises ``FieldMismatch`` naming the first field of ``record`` (a dataclass record as ``from_data`` read it),
    recursively, that does not hold its annotated type."""
    _record(type(record))(record, "")
