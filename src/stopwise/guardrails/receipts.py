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
from typing import Any

from stopwise.guardrails.hooks import ChainResult, Guardrails
from stopwise.messages import Message, encode_tool_result

__all__ = ["HMAC_PREFIX", "raw_result_hmac", "receipt_matches", "tool_receipt"]

HMAC_PREFIX = "hmac-sha256:"


def raw_result_hmac(key: bytes, content: str) -> str:
    """``hmac-sha256:<hex>`` of a tool row's stored content (a string result as is, anything else as JSON)."""
    return HMAC_PREFIX + hmac.new(key, content.encode("utf-8"), hashlib.sha256).hexdigest()


def tool_receipt(guardrails: Guardrails, call_id: str, row: Message, chain: ChainResult[Any]) -> dict[str, Any]:
    """The receipt record of a guarded tool row (``row``: the tool's own row, before the guardrails)."""
    receipt: dict[str, Any] = {"type": "tool_receipt", "tool_call_id": call_id}
    if not chain.redacted or guardrails.store_redacted_results_in_clear:
        receipt.update(raw=row.content, metadata=dict(row.metadata))
        return receipt
    if chain.clean is None and chain.block is not None:
        receipt.update(redacted=None, metadata={})
    else:
        copy = encode_tool_result(chain.clean, tool_call_id=call_id)
        receipt.update(redacted=copy.content, metadata=dict(copy.metadata))
    if guardrails.receipt_hmac_key is not None:
        receipt["raw_hmac"] = raw_result_hmac(guardrails.receipt_hmac_key, row.content)
    return receipt


def receipt_matches(receipt: Mapping[str, Any], result: Any, key: bytes) -> bool:
    """Whether ``result`` (a tool's return value) is the raw result a redacted ``receipt`` stands for; False when
    the receipt has no HMAC. Compared in constant time."""
    stored = receipt.get("raw_hmac")
    if not isinstance(stored, str):
        return False
    content = encode_tool_result(result, tool_call_id=str(receipt.get("tool_call_id", ""))).content
    return hmac.compare_digest(stored, raw_result_hmac(key, content))
