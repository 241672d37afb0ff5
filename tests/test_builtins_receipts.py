"""Nothing a guardrail redacted is persisted in clear: the tool receipt keeps the redacted copy, an HMAC of the raw
result when the application gives a key, and the raw result only when the application opts in by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from stopwise import Agent, Reply, Runner, ScriptedModel, SQLiteStore, ToolCall, tool
from stopwise.errors import ConfigError
from stopwise.guardrails import Block, Guardrails, Rewrite, ToolResultContext, max_tool_result_length, redact_secrets
from stopwise.guardrails.receipts import receipt_matches

KEY = b"receipt-key-0123456789abcdef"


def _secret() -> str:
    return "sk" + "_live_" + "4eC39HqLyjWDarjtT1zdp7dc" + "Zq8"


def _result() -> str:
    return f"STRIPE_SECRET_KEY={_secret()}\nDEBUG=false\n" + "log line\n" * 20


@tool
def read_env() -> str:
    """Read the environment file."""
    return _result()


def _agent(guardrails: Guardrails) -> Agent:
    model = ScriptedModel([Reply(tool_calls=[ToolCall("read_env", {})]), "The file configures Stripe."])
    return Agent("r", "Be careful.", model, tools=[read_env], guardrails=guardrails)


async def _receipt(tmp_path: Path, guardrails: Guardrails) -> tuple[dict[str, Any], bytes]:
    """The run's tool receipt, and every byte of the SQLite database (and its WAL) on disk."""
    path = tmp_path / "log.db"
    store = SQLiteStore(str(path))
    try:
        await Runner(store).run(_agent(guardrails), "What does the env file set?", session_id="s")
        snapshot = await store.load_session("s")
    finally:
        await store.close()
    assert snapshot is not None
    receipt = next(r for e in snapshot.entries for r in e.records if r.get("type") == "tool_receipt")
    return dict(receipt), _database_bytes(tmp_path)


def _database_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.name.startswith("log.db"))


async def test_a_redacted_secret_is_nowhere_in_the_database_file(tmp_path: Path) -> None:
    receipt, disk = await _receipt(tmp_path, Guardrails(on_tool_result=redact_secrets()))
    assert _secret().encode() not in disk
    assert "raw" not in receipt and "raw_hmac" not in receipt
    assert receipt["redacted"].startswith("STRIPE_SECRET_KEY=[redacted]\nDEBUG=false")
    assert receipt["metadata"]["content_encoding"] == "text"


async def test_with_a_key_the_receipt_holds_an_hmac_that_proves_the_original(tmp_path: Path) -> None:
    receipt, disk = await _receipt(tmp_path, Guardrails(on_tool_result=redact_secrets(), receipt_hmac_key=KEY))
    assert _secret().encode() not in disk
    assert receipt["raw_hmac"].startswith("hmac-sha256:")
    assert receipt_matches(receipt, _result(), KEY)
    assert not receipt_matches(receipt, _result().replace("false", "true"), KEY)
    assert not receipt_matches(receipt, _result(), b"another-key-0123456789abcdef")


async def test_raw_receipts_only_when_the_application_opts_in_by_name(tmp_path: Path) -> None:
    g = Guardrails(on_tool_result=redact_secrets(), store_redacted_results_in_clear=True)
    receipt, disk = await _receipt(tmp_path, g)
    assert receipt["raw"] == _result()
    assert _secret().encode() in disk


async def test_a_rewrite_that_is_not_a_redaction_keeps_the_raw_result_for_audit(tmp_path: Path) -> None:
    receipt, _ = await _receipt(tmp_path, Guardrails(on_tool_result=max_tool_result_length(10)))
    assert receipt["raw"] == _result()


async def test_a_redaction_then_a_truncation_keeps_the_redacted_whole_not_the_truncated(tmp_path: Path) -> None:
    g = Guardrails(on_tool_result=[redact_secrets(), max_tool_result_length(10)])
    receipt, disk = await _receipt(tmp_path, g)
    assert _secret().encode() not in disk
    assert receipt["redacted"] == _result().replace(_secret(), "[redacted]")


async def test_a_redacting_block_keeps_no_copy_at_all(tmp_path: Path) -> None:
    def no_stripe_keys(ctx: ToolResultContext) -> Block | None:
        return Block("the result holds a Stripe key", redacted=True) if "sk_live_" in ctx.result else None

    receipt, disk = await _receipt(tmp_path, Guardrails(on_tool_result=no_stripe_keys, receipt_hmac_key=KEY))
    assert _secret().encode() not in disk
    assert receipt["redacted"] is None and "raw" not in receipt
    assert receipt_matches(receipt, _result(), KEY)


async def test_a_redaction_by_the_applications_own_guardrail_counts_too(tmp_path: Path) -> None:
    def mask_keys(ctx: ToolResultContext) -> Rewrite:
        return Rewrite(result=ctx.result.replace(_secret(), "****"), redacted=True)

    receipt, disk = await _receipt(tmp_path, Guardrails(on_tool_result=mask_keys))
    assert _secret().encode() not in disk and receipt["redacted"].startswith("STRIPE_SECRET_KEY=****")


@pytest.mark.parametrize("key", [b"short", "a-string-not-bytes-0123456789"])
def test_a_receipt_key_must_be_sixteen_bytes_or_more(key: Any) -> None:
    with pytest.raises(ConfigError, match="receipt_hmac_key"):
        Guardrails(receipt_hmac_key=key)
