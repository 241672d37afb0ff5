"""JSON encoding of records shared by the database stores."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from pydantic_core import PydanticSerializationError, to_json

from stopwise.errors import ErrorDetail, StateNotSerializable
from stopwise.messages import Usage

__all__ = ["dump_json", "error_from", "load_json", "usage_from"]


def dump_json(value: Any) -> str:
    """Compact JSON; pydantic models, dataclasses, dates and the like are converted as pydantic does."""
    return to_json(value).decode()


def load_json(text: str | bytes | None) -> Any:
    return None if text is None else json.loads(text)


def dump_state(state: Mapping[str, Any]) -> str:
    try:
        return dump_json(state)
    except (PydanticSerializationError, TypeError, ValueError) as exc:
        raise StateNotSerializable(f"session state must be JSON-serialisable: {exc}") from exc


def dump_usage(usage: Usage | None) -> str | None:
    """The usage's non-zero counts (``usage_from`` reads the others back as zero)."""
    # ``to_data``, not ``asdict``: this runs for every entry committed, and asdict's deep copy costs 3 us.
    return None if usage is None else dump_json({k: v for k, v in usage.to_data().items() if v})


def usage_from(text: str | None) -> Usage:
    data = load_json(text)
    return Usage(**data) if data else Usage()


def dump_error(error: ErrorDetail | None) -> str | None:
    return None if error is None else dump_json(asdict(error))


def error_from(text: str | None) -> ErrorDetail | None:
    data = load_json(text)
    return ErrorDetail(**data) if data else None
