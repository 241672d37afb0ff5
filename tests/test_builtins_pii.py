"""``block_pii`` and ``redact_pii``: cards by issuer prefix, length and Luhn with any one separator, SSNs with or
without dashes minus the ranges never issued, IBANs by registry length and mod-97, phone numbers through the
``pii`` extra; order numbers, timestamps and ids mostly left alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from stopwise import Agent, MemoryStore, Reply, Runner, ScriptedModel, ToolCall, decode_tool_result, tool
from stopwise.errors import ConfigError
from stopwise.guardrails import (
    Block,
    Guardrails,
    InputContext,
    OutputContext,
    Rewrite,
    ToolCallContext,
    ToolResultContext,
    block_pii,
    redact_pii,
)
from stopwise.guardrails._pii import PiiKind, find_pii, is_card_number, is_iban, is_ssn
from stopwise.messages import Message, Role

EVALS = Path(__file__).resolve().parents[1] / "evals"


def _evals_module(name: str) -> ModuleType:
    if str(EVALS) not in sys.path:
        sys.path.insert(0, str(EVALS))
    spec = importlib.util.spec_from_file_location(name, EVALS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


samples = _evals_module("pii_samples")
NO_PHONES = frozenset(PiiKind) - {PiiKind.PHONE}


def _input(text: str) -> InputContext:
    return InputContext((Message(Role.USER, text),), None, "s", "r", None)


def _result(value: Any) -> ToolResultContext:
    return ToolResultContext((), 1, "s", "r", None, ToolCall("lookup", {}, "c1"), value, False)


# -- detection ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sample",
    [s for s in samples.pii_samples() if s.kind != "phone"],
    ids=lambda s: f"{s.kind}:{s.text[:40]}",
)
def test_each_card_ssn_and_iban_format_is_found(sample: Any) -> None:
    found = find_pii(sample.text, NO_PHONES)
    start = sample.text.index(sample.value)
    assert any(f.kind.value == sample.kind and f.start <= start and f.end >= start + len(sample.value) for f in found)


@pytest.mark.parametrize("sep", ["", " ", "-", ".", "/", "_"])
def test_a_card_number_is_found_with_any_one_separator(sep: str) -> None:
    shown = sep.join(["4111", "1111", "1111", "1111"])
    assert isinstance(block_pii()(_input(f"my card is {shown}")), Block)


def test_a_card_needs_a_known_issuer_and_length_not_just_luhn() -> None:
    assert is_card_number("4111111111111111")
    assert not is_card_number("4111111111111112")  # Luhn fails
    assert not is_card_number("9111111111111119")  # Luhn-valid, no network starts with 9
    assert not is_card_number("3411111111111110")  # Luhn-valid, but an Amex number is 15 digits


def test_mixed_separators_or_single_digit_groups_are_not_a_card() -> None:
    assert find_pii("4111-1111 1111.1111", NO_PHONES) == []
    assert find_pii("4 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1", NO_PHONES) == []


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("ssn 536-90-1234", True),
        ("ssn 536 90 1234", True),
        ("SSN: 536901234", True),
        ("social security number 536901234", True),
        ("order 536901234", False),  # nine bare digits need the context
        ("ssn 000-12-3456", False),
        ("ssn 666-12-3456", False),
        ("ssn 912-34-5678", False),
        ("ssn 536-00-1234", False),
        ("ssn 536-90-0000", False),
        ("ssn 078-05-1120", False),  # the wallet-card number from an advertisement
    ],
)
def test_ssns_with_or_without_dashes_minus_the_ranges_never_issued(text: str, found: bool) -> None:
    assert bool(find_pii(text, frozenset({PiiKind.SSN}))) is found


def test_ssn_ranges() -> None:
    assert is_ssn("536901234") and not is_ssn("900123456") and not is_ssn("53690123")


@pytest.mark.parametrize(
    ("value", "valid"),
    [
        ("DE89 3704 0044 0532 0130 00", True),
        ("GB82WEST12345698765432", True),
        ("DE89 3704 0044 0532 0130 01", False),  # checksum
        ("DE89 3704 0044 0532 0130", False),  # length for Germany
        ("XX89 3704 0044 0532 0130 00", False),  # no such country
    ],
)
def test_ibans_need_the_registry_length_and_the_mod_97_checksum(value: str, valid: bool) -> None:
    assert is_iban(value) is valid
    assert bool(find_pii(f"pay to {value} today", frozenset({PiiKind.IBAN}))) is valid


# -- false positives -----------------------------------------------------------------------------------------------


def test_order_numbers_timestamps_and_ids_are_rarely_flagged() -> None:
    looks = samples.lookalikes(n=500)
    by_kind: dict[str, list[bool]] = {}
    for s in looks:
        by_kind.setdefault(s.kind, []).append(bool(find_pii(s.text, NO_PHONES)))
    # Luhn alone flagged about 10% of random 13-19 digit numbers; a random number that has a network's prefix,
    # length and check digit is a card number as far as anyone can tell, so about 1% remains.
    assert sum(by_kind["order number (13-19 digits)"]) <= 0.03 * 500
    assert sum(by_kind["order number (grouped)"]) <= 0.03 * 500
    for kind in ("order number (9 digits)", "date-time", "uuid", "hex id", "invoice / tracking number"):
        assert not any(by_kind[kind]), kind


# -- the guardrails on every hook --------------------------------------------------------------------------------


def test_block_pii_on_input_names_the_kind() -> None:
    verdict = block_pii()(_input("Wire it to DE89 3704 0044 0532 0130 00 please"))
    assert isinstance(verdict, Block) and "IBAN" in verdict.reason


def test_block_pii_on_a_tool_result_is_a_redacting_block() -> None:
    verdict = block_pii()(_result({"customer": {"ssn": "536-90-1234"}}))
    assert isinstance(verdict, Block) and verdict.redacted and "social security" in verdict.reason


def test_block_pii_reads_tool_call_arguments_and_the_answer() -> None:
    call = ToolCallContext((), 1, "s", "r", None, ToolCall("search", {"q": "card 4111 1111 1111 1111"}, "c1"))
    assert isinstance(block_pii()(call), Block)
    assert isinstance(block_pii()(OutputContext((), 1, "s", "r", None, "Your SSN is 536-90-1234.")), Block)


def test_redact_pii_rewrites_user_rows_only_on_input() -> None:
    ctx = InputContext(
        (Message(Role.SYSTEM, "card 4111 1111 1111 1111 is the test card"), Message(Role.USER, "ssn 536-90-1234")),
        None,
        "s",
        "r",
        None,
    )
    verdict = redact_pii()(ctx)
    assert isinstance(verdict, Rewrite) and verdict.messages is not None
    assert [m.content for m in verdict.messages] == [
        "card 4111 1111 1111 1111 is the test card",
        "ssn [redacted ssn]",
    ]


def test_redact_pii_on_a_tool_result_is_a_redaction_inside_json_too() -> None:
    verdict = redact_pii()(_result({"rows": ["Visa 4111.1111.1111.1111", "ok"], "n": 2}))
    assert isinstance(verdict, Rewrite) and verdict.redacted
    assert verdict.result == {"rows": ["Visa [redacted card]", "ok"], "n": 2}


def test_a_clean_text_passes_both() -> None:
    text = "Order 536901234 ships on 2026-12-01T10:00:00Z, request_id=550e8400-e29b-41d4-a716-446655440000"
    assert block_pii()(_input(text)) is None and redact_pii()(_input(text)) is None


async def test_redact_pii_in_a_run_keeps_the_number_out_of_the_model_and_the_log() -> None:
    @tool
    def customer() -> str:
        """Look up the customer."""
        return "Jane Roe, card 5500 0000 0000 0004, IBAN GB82 WEST 1234 5698 7654 32"

    model = ScriptedModel([Reply(tool_calls=[ToolCall("customer", {})]), "Found her."])
    agent = Agent("p", "", model, tools=[customer], guardrails=Guardrails(on_tool_result=redact_pii()))
    store = MemoryStore()
    result = await Runner(store).run(agent, "who is it?", session_id="s")
    assert decode_tool_result(result.messages[2]) == "Jane Roe, card [redacted card], IBAN [redacted iban]"
    assert "5500" not in str(model.requests[1].messages)
    snapshot = await store.load_session("s")
    assert snapshot is not None
    receipt = next(r for e in snapshot.entries for r in e.records if r.get("type") == "tool_receipt")
    assert "raw" not in receipt and "5500" not in str(receipt)


# -- phone numbers (extra: pii) ------------------------------------------------------------------------------------


def test_phone_numbers_are_off_unless_asked_for() -> None:
    assert block_pii()(_input("call me on +44 20 7946 0958")) is None


def test_phone_numbers_need_the_pii_extra_and_say_how_to_install_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "phonenumbers", None)  # as if it were not installed
    with pytest.raises(ConfigError, match=r"pip install 'stopwise\[pii\]'"):
        block_pii(phones=True)


def test_phone_numbers_valid_for_their_region_are_found() -> None:
    pytest.importorskip("phonenumbers")
    guard = block_pii(phones=True)
    for text in ("call me on +44 20 7946 0958", "call (415) 555-2671", "ring +49 30 901820"):
        verdict = guard(_input(text))
        assert isinstance(verdict, Block) and "phone" in verdict.reason, text
    assert guard(_input("call me at 555-123-4567")) is None  # 555-123 numbers are not valid
    assert guard(_input("INV-2024-578469 was paid")) is None


def test_an_unknown_phone_region_is_a_config_error() -> None:
    pytest.importorskip("phonenumbers")
    with pytest.raises(ConfigError, match="phone_region"):
        redact_pii(phones=True, phone_region="XX")


def test_turning_every_kind_off_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        block_pii(cards=False, ssns=False, ibans=False)
