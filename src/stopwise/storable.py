"""The storable-text rule: one rule that makes any Python string safe to commit to every store.

A Python ``str`` can hold what no store can keep: a lone UTF-16 surrogate (``"\\ud800"``, which valid JSON such
as ``"\\\\ud800"`` decodes to, and which UTF-8 cannot encode) and NUL (``"\\x00"``, which PostgreSQL refuses in
text). The rule: the string is read as UTF-16, so a surrogate *pair* becomes the character it encodes; a lone
surrogate and NUL each become U+FFFD (the replacement character). Everything else is kept as it is.

Untrusted text passes through the rule where it enters (the model's reply, tool arguments, tool results), and
every store applies it again to everything it keeps (the database stores when they write, the in-memory store's
log when it is read back, since nothing else can see it), so a string the rule did not reach on the way in is
never an exception at commit time. Each replacement is reported by a warning on the ``stopwise`` logger naming where
it happened; the rule itself never raises. A value that contains itself (which no store can keep either) raises
``CyclicValue`` naming where and the cycle, instead of walking forever.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from typing import Any, TypeVar

from stopwise.errors import CyclicValue

__all__ = ["REPLACEMENT", "is_storable", "needs_rule", "storable", "storable_text", "text_fields"]

REPLACEMENT = "\ufffd"
"""What a lone surrogate or a NUL becomes."""

_log = logging.getLogger("stopwise")

T = TypeVar("T")


def is_storable(text: str) -> bool:
    """Whether ``text`` is kept unchanged by the rule (no lone surrogate, no NUL)."""
    if "\x00" in text:
        return False
    if text.isascii():
        return True
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _fix(text: str) -> tuple[str, int]:
    """``text`` under the rule, and how many characters were replaced."""
    fixed = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace").replace("\x00", REPLACEMENT)
    # A surrogate pair shrinks to one character, so count replacement characters that were not there before.
    return fixed, fixed.count(REPLACEMENT) - text.count(REPLACEMENT)


def storable_text(text: str, *, where: str = "text") -> str:
    """``text`` under the storable-text rule; the same object when nothing needs replacing."""
    if is_storable(text):
        return text
    fixed, replaced = _fix(text)
    _note(replaced, where)
    return fixed


def storable(value: T, *, where: str = "value") -> T:
    """``value`` with the rule applied to every string inside it: mapping keys and values, list and tuple items,
    and the fields of dataclass instances (messages, tool calls, log entries, run records). Returns the same
    object when nothing needs replacing, so the common case allocates nothing. Raises ``CyclicValue`` for a value
    that contains itself."""
    if _clean(value, where):
        return value
    # _clean may have stopped at a string to replace before it reached a cycle, which _walk would recurse into
    # forever: the rare value with something to replace is checked whole first.
    _refuse_cycle(value, where)
    counter = [0]
    out = _walk(value, counter)
    if counter[0]:
        _note(counter[0], where)
    return out  # type: ignore[no-any-return]


def needs_rule(value: Any) -> bool:
    """Whether some string inside ``value`` would be changed by ``storable``: a caller on a hot path checks this
    first and spells out ``where`` only when it is needed. Raises ``CyclicValue`` for a value that contains
    itself."""
    return not _clean(value, "value")


_FIELDS: dict[type, tuple[str, ...]] = {}


def text_fields(cls: type, *names: str) -> None:
    """Declare that only ``names`` of dataclass ``cls`` can hold text the rule must see (the other fields are
    numbers, enums of ours, or text the class already made storable when it was built): the check every commit
    pays then skips the rest."""
    _FIELDS[cls] = names


def _field_names(cls: type) -> tuple[str, ...] | None:
    """The fields of a dataclass the rule looks at (cached per class), or None when ``cls`` is not one."""
    names = _FIELDS.get(cls)
    if names is None:
        if not dataclasses.is_dataclass(cls):
            return None
        names = _FIELDS[cls] = tuple(f.name for f in dataclasses.fields(cls) if f.init)
    return names


_SCALARS = frozenset({int, float, bool, type(None), bytes})


def _clean(value: Any, where: str) -> bool:
    """True when no string inside ``value`` needs the rule. Every commit pays for this check, so it is a plain
    loop over a stack that allocates little, looks at each container once, and tests the common exact types
    before the slower abstract ones.

    A cycle would keep this loop going forever, and telling one from a container merely shared (the same list
    in two places) needs the path to each container, which costs every check. So each container's id is kept,
    and only when one is met again does ``_refuse_cycle`` walk the value once to tell which it is: a cycle raises
    ``CyclicValue``; a shared container is skipped, its contents having been seen already."""
    stack = [value]
    pop, push, extend = stack.pop, stack.append, stack.extend
    seen: set[int] = set()
    mark = seen.add
    shared_ok = False  # set once _refuse_cycle found no cycle: further repeats are shared containers
    while stack:
        v = pop()
        kind = type(v)
        if kind is str:
            if "\x00" in v or (not v.isascii() and not is_storable(v)):
                return False
            continue
        if kind in _SCALARS:
            continue
        # Only a container this loop looks inside is kept: leaves and empty containers shared everywhere (enum
        # members, the empty tuple, a constant empty dict) would otherwise look like repeats.
        if ((kind is dict or kind is list or kind is tuple) and v) or kind in _FIELDS:
            pass
        elif isinstance(v, str):  # a str subclass (an enum member)
            if not is_storable(v):
                return False
            continue
        elif not (isinstance(v, (Mapping, list, tuple)) and v) and _field_names(kind) is None:
            continue
        if (i := id(v)) in seen:
            if not shared_ok:
                _refuse_cycle(value, where)
                shared_ok = True
            continue
        mark(i)
        if kind is dict:
            extend(v.keys())
            extend(v.values())
        elif kind is tuple or kind is list:
            extend(v)
        elif (names := _FIELDS.get(kind)) is not None:
            for name in names:
                push(getattr(v, name))
        elif isinstance(v, Mapping):
            extend(v.keys())
            extend(v.values())
        elif isinstance(v, (list, tuple)):
            extend(v)
        elif (names := _field_names(kind)) is not None:
            for name in names:
                push(getattr(v, name))
    return True


def _children(v: Any) -> list[tuple[str, Any]] | None:
    """The values inside ``v`` that ``_clean`` looks at, each with the step of its access path; None for a leaf."""
    if isinstance(v, (str, int, float, bytes)) or v is None:
        return None
    if isinstance(v, Mapping):
        return [(f"[{k!r}]", x) for k, x in v.items()] + [(f" key {k!r}", k) for k in v]
    if isinstance(v, (list, tuple)):
        return [(f"[{n}]", x) for n, x in enumerate(v)]
    names = _field_names(type(v))
    if names is None:
        return None
    return [(f".{name}", getattr(v, name)) for name in names]


def _refuse_cycle(value: Any, where: str) -> None:
    """Raise ``CyclicValue`` naming the first cycle inside ``value``; return when it has none."""
    on_path: dict[int, str] = {}
    done: set[int] = set()
    stack: list[tuple[Any, str, bool]] = [(value, "", False)]
    while stack:
        v, path, leaving = stack.pop()
        i = id(v)
        if leaving:
            del on_path[i]
            done.add(i)
            continue
        children = _children(v)
        if not children or i in done:
            continue
        if i in on_path:
            raise CyclicValue(where, f"{path} is {on_path[i] or 'the value itself'}")
        on_path[i] = path
        stack.append((v, path, True))
        stack.extend((child, path + step, False) for step, child in children)


def _walk(value: Any, counter: list[int]) -> Any:
    # Only runs when _clean found something to replace, on a value without cycles. Its depth is bounded by what
    # reaches it: replies are depth-checked at the model boundary, and the rest is data this process built.
    if isinstance(value, str):
        if is_storable(value):
            return value
        fixed, replaced = _fix(value)
        counter[0] += max(replaced, 1)
        return fixed
    if value is None or isinstance(value, (int, float, bytes)):
        return value
    if isinstance(value, Mapping):
        changed = False
        items = []
        for k, v in value.items():
            k2, v2 = _walk(k, counter), _walk(v, counter)
            changed = changed or k2 is not k or v2 is not v
            items.append((k2, v2))
        return dict(items) if changed else value
    if isinstance(value, (list, tuple)):
        new = [_walk(v, counter) for v in value]
        if all(a is b for a, b in zip(new, value, strict=True)):
            return value
        return new if isinstance(value, list) else tuple(new)
    names = _field_names(type(value))
    if names is not None:
        changes = {}
        for name in names:
            old = getattr(value, name)
            new_value = _walk(old, counter)
            if new_value is not old:
                changes[name] = new_value
        return dataclasses.replace(value, **changes) if changes else value
    return value


def _note(replaced: int, where: str) -> None:
    _log.warning("stopwise: %d unstorable character(s) (lone surrogate or NUL) in %s became U+FFFD", replaced, where)
