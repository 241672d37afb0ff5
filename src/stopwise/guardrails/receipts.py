"""The tool receipt: what the log keeps of a tool's output when a tool-result guardrail rewrote or blocked it.

Without a redaction the receipt keeps the raw result, so an audit or a replay sees what the tool returned. When a
guardrail in the chain redacted (``Rewrite(..., redacted=True)``, ``Block(..., redacted=True)``), nothing
redacted is stored in clear: the receipt keeps the redacted copy (none after a redacting block) and, when the
application gave ``Guardrails(receipt_hmac_key=...)``, an HMAC-SHA256 of the raw result. Only
``Guardrails(store_redacted_results_in_clear=True)`` puts the raw result back.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from stopwise.guardrails.hooks import ChainResult, Guardrails
from stopwise.messages import Message, encode_tool_result

__all__ = ["HMAC_PREFIX", "ToolReceipt", "raw_result_hmac", "receipt_matches", "tool_receipt", "withheld_receipt"]

HMAC_PREFIX = "hmac-sha256:"


def raw_result_hmac(key: bytes, content: str) -> str:
    """``hmac-sha256:<hex>`` of a tool row's stored content (a string result as is, anything else as JSON)."""
    return HMAC_PREFIX + hmac.new(key, content.encode("utf-8"), hashlib.sha256).hexdigest()


@dataclass(frozen=True, slots=True)
class ToolReceipt:
    """What the log keeps of a tool's output when the model was shown something else (a guardrail rewrote or
    blocked it, or the guardian quarantined it)."""

    TYPE: ClassVar[str] = "tool_receipt"
    tool_call_id: str
    raw: str | None
    """The result's stored content as the tool returned it; None when a redaction keeps it out of the log."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    quarantined: bool = False
    """Withheld by the guardian until a reviewer releases it."""
    redacted: bool = False
    """A guardrail redacted the result: ``raw`` is not kept (unless the application opted in)."""
    redacted_copy: str | None = None
    """The redacted result as the model saw it (None after a redacting block)."""
    raw_hmac: str | None = None
    """``hmac-sha256:<hex>`` of the raw result, when the application gave a key."""

    def to_data(self) -> dict[str, Any]:
        data: dict[str, Any] = {"type": self.TYPE, "tool_call_id": self.tool_call_id}
        if self.raw is not None:
            data["raw"] = self.raw
        if self.redacted and self.raw is None:
            data["redacted"] = self.redacted_copy
        data["metadata"] = dict(self.metadata)
        if self.raw_hmac is not None:
            data["raw_hmac"] = self.raw_hmac
        if self.quarantined:
            data["quarantined"] = True
        return data

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> ToolReceipt:
        return cls(
            data["tool_call_id"],
            data.get("raw"),
            data.get("metadata") or {},
            bool(data.get("quarantined")),
            "redacted" in data,
            data.get("redacted"),
            data.get("raw_hmac"),
        )


def tool_receipt(guardrails: Guardrails, call_id: str, row: Message, chain: ChainResult[Any]) -> ToolReceipt:
    """The receipt record of a guarded tool row (``row``: the tool's own row, before the guardrails)."""
    if not chain.redacted or guardrails.store_redacted_results_in_clear:
        return ToolReceipt(call_id, row.content, dict(row.metadata))
    key = guardrails.receipt_hmac_key
    digest = raw_result_hmac(key, row.content) if key is not None else None
    if chain.clean is None and chain.block is not None:
        return ToolReceipt(call_id, None, {}, redacted=True, raw_hmac=digest)
    copy = encode_tool_result(chain.clean, tool_call_id=call_id)
    return ToolReceipt(call_id, None, dict(copy.metadata), redacted=True, redacted_copy=copy.content, raw_hmac=digest)


def withheld_receipt(guardrails: Guardrails, call_id: str, row: Message) -> ToolReceipt:
    """The receipt of a tool row no guardrail could judge (one raised): the tool ran, so the log keeps that it did,
    but the raw result is kept in clear only where the guardrails allow it (it was never checked), else its HMAC."""
    if guardrails.store_redacted_results_in_clear:
        return ToolReceipt(call_id, row.content, dict(row.metadata))
    key = guardrails.receipt_hmac_key
    digest = raw_result_hmac(key, row.content) if key is not None else None
    return ToolReceipt(call_id, None, {}, redacted=True, raw_hmac=digest)


def receipt_matches(receipt: Mapping[str, Any], result: Any, key: bytes) -> bool:
    """Whether ``result`` (a tool's return value) is the raw result a redacted ``receipt`` stands for; False when
    the receipt has no HMAC. Compared in constant time."""
    stored = receipt.get("raw_hmac")
    if not isinstance(stored, str):
        return False
    content = encode_tool_result(result, tool_call_id=str(receipt.get("tool_call_id", ""))).content
    return hmac.compare_digest(stored, raw_result_hmac(key, content))
