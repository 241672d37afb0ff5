"""The personal-data detectors behind ``block_pii`` and ``redact_pii``: payment cards, US social security numbers,
IBANs and (with the ``pii`` extra) phone numbers.

Each reads the raw text (never the evasion normaliser: folding digits would break them) and handles separators
itself. Cards, SSNs and IBANs are checked with their own arithmetic, in the core; phone numbers need the region
metadata of Google's libphonenumber, through the ``phonenumbers`` package (``pip install 'stopwise[pii]'``).
Pure and deterministic: no I/O, no clock.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from stopwise.errors import ConfigError
from stopwise.guardrails._decoded import decoded_view

__all__ = ["PiiKind", "PiiMatch", "find_pii", "is_card_number", "is_iban", "is_ssn", "require_phonenumbers"]


class PiiKind(StrEnum):
    """What kind of personal data a match is."""

    CARD = "card"
    """A payment card number: a known issuer's prefix and length, and a valid Luhn check digit."""
    SSN = "ssn"
    """A US social security number outside the ranges never issued."""
    IBAN = "iban"
    """An international bank account number of a known country's length, with a valid mod-97 checksum."""
    PHONE = "phone"
    """A phone number that is valid for its region (``phonenumbers``)."""


@dataclass(frozen=True, slots=True)
class PiiMatch:
    """Where personal data was found: ``text[start:end]``."""

    kind: PiiKind
    start: int
    end: int


# -- cards ----------------------------------------------------------------------------------------------------

# A run of 12-19 digits, optionally grouped by one kind of separator (space, dash, dot, slash, underscore).
_CARD_RUN = re.compile(r"(?<![\w.\-/])\d(?:[ \-./_]?\d){11,18}(?![\w]|[.\-/]\d)")

# Issuer identification: (prefixes as (low, high) ranges over the first n digits, allowed lengths). From the
# card networks' published IIN ranges.
_ISSUERS: tuple[tuple[int, int, int, frozenset[int]], ...] = (
    # digits, low, high, lengths
    (1, 4, 4, frozenset({13, 16, 19})),  # Visa
    (2, 51, 55, frozenset({16})),  # Mastercard
    (4, 2221, 2720, frozenset({16})),  # Mastercard 2-series
    (2, 34, 34, frozenset({15})),  # American Express
    (2, 37, 37, frozenset({15})),
    (4, 6011, 6011, frozenset({16, 17, 18, 19})),  # Discover
    (3, 644, 649, frozenset({16, 17, 18, 19})),
    (2, 65, 65, frozenset({16, 17, 18, 19})),
    (6, 622126, 622925, frozenset({16, 17, 18, 19})),
    (4, 3528, 3589, frozenset({16, 17, 18, 19})),  # JCB
    (3, 300, 305, frozenset({14, 16, 17, 18, 19})),  # Diners Club
    (2, 36, 36, frozenset({14, 16, 17, 18, 19})),
    (2, 38, 39, frozenset({14, 16, 17, 18, 19})),
    (4, 3095, 3095, frozenset({14, 16, 17, 18, 19})),
    (2, 62, 62, frozenset({16, 17, 18, 19})),  # UnionPay
    (4, 2200, 2204, frozenset({16, 17, 18, 19})),  # Mir
    (1, 1, 1, frozenset({15})),  # UATP (airline cards)
    (4, 5019, 5019, frozenset({16})),  # Dankort
    (4, 5018, 5018, frozenset(range(12, 20))),  # Maestro
    (4, 5020, 5020, frozenset(range(12, 20))),
    (4, 5038, 5038, frozenset(range(12, 20))),
    (4, 5893, 5893, frozenset(range(12, 20))),
    (4, 6304, 6304, frozenset(range(12, 20))),
    (4, 6759, 6759, frozenset(range(12, 20))),
    (4, 6761, 6763, frozenset(range(12, 20))),
)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def is_card_number(digits: str) -> bool:
    """Whether a string of digits is a payment card number: a known issuer's prefix and length, and Luhn-valid."""
    if not digits.isdigit():
        return False
    n = len(digits)
    return any(n in lengths and low <= int(digits[:width]) <= high for width, low, high, lengths in _ISSUERS) and _luhn(
        digits
    )


def _card_groups_ok(run: str) -> bool:
    """One kind of separator throughout, and groups of three digits or more (``4111 1111 1111 1111``,
    ``3782-822463-10005``), or none at all."""
    seps = set(re.findall(r"[ \-./_]", run))
    if not seps:
        return True
    if len(seps) > 1:
        return False
    return all(len(g) >= 3 for g in re.split(r"[ \-./_]", run))


def _cards(text: str) -> Iterator[PiiMatch]:
    for m in _CARD_RUN.finditer(text):
        run = m.group()
        if _card_groups_ok(run) and is_card_number(re.sub(r"\D", "", run)):
            yield PiiMatch(PiiKind.CARD, m.start(), m.end())


# -- US social security numbers -------------------------------------------------------------------------------

# Dashes, spaces or dots (``536.90.1234``), one kind throughout. Not an IP address (its groups are 1-3 digits) nor
# a version (``100.12.1234`` would be a strange one).
_SSN_SEPARATED = re.compile(r"(?<![\w\-.])(\d{3})([ \-.])(\d{2})\2(\d{4})(?![\w]|[\-.]\d)")
_SSN_BARE = re.compile(r"(?<![\w\-.])(\d{3})(\d{2})(\d{4})(?![\w]|[\-.]\d)")
# Nine bare digits are an SSN only where the text says so: ids, order numbers and phone numbers are nine digits
# too. The context is looked for in the 40 characters before the number.
_SSN_CONTEXT = re.compile(r"(?i)\b(?:ssn|ss#|ss no|social security|social sec|taxpayer id|tin|itin)\b")
# Numbers printed in advertisements (a wallet insert, a bank's sample card), invalidated by the SSA.
_SSN_NEVER_ISSUED = frozenset({"078051120", "219099999", "457555462"})


def is_ssn(digits: str) -> bool:
    """Whether nine digits can be a US SSN: area not 000, 666 or 900-999, group not 00, serial not 0000, and
    not one of the numbers invalidated after being printed in advertising."""
    if len(digits) != 9 or not digits.isdigit() or digits in _SSN_NEVER_ISSUED:
        return False
    area, group, serial = int(digits[:3]), digits[3:5], digits[5:]
    return 0 < area < 900 and area != 666 and group != "00" and serial != "0000"


def _ssns(text: str) -> Iterator[PiiMatch]:
    for m in _SSN_SEPARATED.finditer(text):
        if is_ssn(m.group(1) + m.group(3) + m.group(4)):
            yield PiiMatch(PiiKind.SSN, m.start(), m.end())
    for m in _SSN_BARE.finditer(text):
        if is_ssn(m.group()) and _SSN_CONTEXT.search(text, max(0, m.start() - 40), m.start()):
            yield PiiMatch(PiiKind.SSN, m.start(), m.end())


# -- IBANs ----------------------------------------------------------------------------------------------------

# Lengths of the IBAN of each country in the SWIFT IBAN registry (ISO 13616).
_IBAN_LENGTHS: dict[str, int] = {
    "AD": 24, "AE": 23, "AL": 28, "AT": 20, "AZ": 28, "BA": 20, "BE": 16, "BG": 22, "BH": 22, "BI": 27, "BR": 29,
    "BY": 28, "CH": 21, "CR": 22, "CY": 28, "CZ": 24, "DE": 22, "DJ": 27, "DK": 18, "DO": 28, "EE": 20, "EG": 29,
    "ES": 24, "FI": 18, "FK": 18, "FO": 18, "FR": 27, "GB": 22, "GE": 22, "GI": 23, "GL": 18, "GR": 27, "GT": 28,
    "HR": 21, "HU": 28, "IE": 22, "IL": 23, "IQ": 23, "IS": 26, "IT": 27, "JO": 30, "KW": 30, "KZ": 20, "LB": 28,
    "LC": 32, "LI": 21, "LT": 20, "LU": 20, "LV": 21, "LY": 25, "MC": 27, "MD": 24, "ME": 22, "MK": 19, "MN": 20,
    "MR": 27, "MT": 31, "MU": 30, "NI": 28, "NL": 18, "NO": 15, "OM": 23, "PK": 24, "PL": 28, "PS": 29, "PT": 25,
    "QA": 29, "RO": 24, "RS": 22, "RU": 33, "SA": 24, "SC": 31, "SD": 18, "SE": 24, "SI": 19, "SK": 24, "SM": 27,
    "SO": 23, "ST": 25, "SV": 28, "TL": 23, "TN": 24, "TR": 26, "UA": 29, "VA": 22, "VG": 24, "XK": 20, "YE": 30,
}  # fmt: skip
# Two letters, two check digits, then the account in groups of four, any case: run together, or grouped by spaces
# or by dashes (one kind throughout).
_IBAN_RUN = re.compile(
    r"(?<![A-Za-z0-9\-])[A-Za-z]{2}\d{2}(?:(?: ?[A-Za-z0-9]{4}){2,7}(?: ?[A-Za-z0-9]{1,3})?"
    r"|(?:-[A-Za-z0-9]{4}){2,7}(?:-[A-Za-z0-9]{1,3})?)(?![A-Za-z0-9]|-[A-Za-z0-9])"
)


def is_iban(value: str) -> bool:
    """Whether ``value`` (spaces or dashes allowed) is an IBAN: a registry country, its length, and the mod-97
    check."""
    iban = value.replace(" ", "").replace("-", "").upper()
    if _IBAN_LENGTHS.get(iban[:2]) != len(iban) or not iban.isalnum():
        return False
    rearranged = iban[4:] + iban[:4]
    return int("".join(str(int(c, 36)) for c in rearranged)) % 97 == 1


def _ibans(text: str) -> Iterator[PiiMatch]:
    for m in _IBAN_RUN.finditer(text):
        run = m.group()
        if is_iban(run):
            yield PiiMatch(PiiKind.IBAN, m.start(), m.end())
        elif run.endswith(tuple("0123456789")) or " " in run or "-" in run:
            # The run may have swallowed a following word's start: try the longest prefix of whole groups.
            for cut in range(len(run) - 1, 14, -1):
                if is_iban(run[:cut]):
                    yield PiiMatch(PiiKind.IBAN, m.start(), m.start() + cut)
                    break


# -- phone numbers (extra: pii) -------------------------------------------------------------------------------


def require_phonenumbers(where: str) -> Any:
    """The ``phonenumbers`` module, or a ``ConfigError`` saying which extra to install."""
    try:
        import phonenumbers
    except ImportError as exc:
        raise ConfigError(where, "phone numbers need the pii extra: pip install 'stopwise[pii]'") from exc
    return phonenumbers


def _phones(text: str, region: str, phonenumbers: Any) -> Iterator[PiiMatch]:
    matcher = phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.STRICT_GROUPING)
    for m in matcher:
        # Digits glued to an identifier (``issuecomment-2106349096``, ``build_4155552671``) are part of it.
        before = text[m.start - 1] if m.start > 0 else " "
        after = text[m.end] if m.end < len(text) else " "
        if before.isalnum() or before in "-_/#." or after.isalnum() or after in "_/":
            continue
        yield PiiMatch(PiiKind.PHONE, m.start, m.end)


# -- all of them ----------------------------------------------------------------------------------------------


def find_pii(
    text: str, kinds: frozenset[PiiKind], *, phone_region: str = "US", phonenumbers: Any = None
) -> list[PiiMatch]:
    """The personal data of ``kinds`` in ``text``, overlapping finds merged (the first kind wins), in order.
    ``phonenumbers`` is the module (from ``require_phonenumbers``) when ``kinds`` has ``PHONE``.

    The text's decoded view is read too, around what it decoded (``stopwise.guardrails._decoded``: no-break and
    thin spaces, typographic dashes, invisible characters, percent-escapes), each find mapped back to the span it
    was decoded from."""
    found = _find(text, kinds, phone_region, phonenumbers)
    view = decoded_view(text, numbers=True)
    if view is not None:
        found += [
            PiiMatch(f.kind, *view.source_span(lo + f.start, lo + f.end))
            for lo, hi in view.windows()
            for f in _find(view.text[lo:hi], kinds, phone_region, phonenumbers)
        ]
    found.sort(key=lambda f: (f.start, -f.end))
    merged: list[PiiMatch] = []
    for f in found:
        if merged and f.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = PiiMatch(last.kind, last.start, max(last.end, f.end))
        else:
            merged.append(f)
    return merged


def _find(text: str, kinds: frozenset[PiiKind], phone_region: str, phonenumbers: Any) -> list[PiiMatch]:
    found: list[PiiMatch] = []
    if PiiKind.CARD in kinds:
        found.extend(_cards(text))
    if PiiKind.SSN in kinds:
        found.extend(_ssns(text))
    if PiiKind.IBAN in kinds:
        found.extend(_ibans(text))
    if PiiKind.PHONE in kinds:
        found.extend(_phones(text, phone_region, phonenumbers))
    return found
