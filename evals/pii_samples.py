"""Personal data and its look-alikes, built at run time from the published formats (seeded, so the same every run).

- ``pii_samples()``: card numbers of each network (IIN prefix and length from the networks' published ranges,
  a Luhn check digit computed here) written with each separator; US SSNs with dashes, spaces and none (bare ones
  after "SSN"); IBANs of several countries (registry lengths, ISO 7064 mod-97 check digits computed here); phone
  numbers in national and international formats (``phonenumbers``' example numbers for each region).
- ``lookalikes()``: numbers that are not personal data but look like it: random order numbers of 9 and 13-19
  digits (plain and grouped), Unix timestamps (s, ms), compact and ISO date-times, UUIDs, hex ids, invoice and
  tracking numbers.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

__all__ = ["PiiSample", "lookalikes", "pii_samples"]


@dataclass(frozen=True)
class PiiSample:
    kind: str
    """``card``, ``ssn``, ``iban``, ``phone``, or for look-alikes what the number is (``order``, ``timestamp``...)."""
    value: str
    text: str


def _luhn_digit(body: str) -> str:
    total = 0
    for i, ch in enumerate(reversed(body)):
        d = int(ch)
        if i % 2 == 0:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return str((10 - total % 10) % 10)


def _group(digits: str, sizes: tuple[int, ...], sep: str) -> str:
    out, at = [], 0
    for size in sizes:
        out.append(digits[at : at + size])
        at += size
    if at < len(digits):
        out.append(digits[at:])
    return sep.join(p for p in out if p)


_NETWORKS = (  # name, prefix, length, grouping
    ("Visa", "4", 16, (4, 4, 4, 4)),
    ("Visa 13", "4", 13, (4, 4, 5)),
    ("Mastercard", "53", 16, (4, 4, 4, 4)),
    ("Mastercard 2-series", "2720", 16, (4, 4, 4, 4)),
    ("American Express", "37", 15, (4, 6, 5)),
    ("Discover", "6011", 16, (4, 4, 4, 4)),
    ("JCB", "3530", 16, (4, 4, 4, 4)),
    ("Diners Club", "36", 14, (4, 6, 4)),
    ("UnionPay 19", "62", 19, (4, 4, 4, 4, 3)),
    ("Maestro", "6759", 16, (4, 4, 4, 4)),
    ("Mir", "2202", 16, (4, 4, 4, 4)),
)

_IBAN_COUNTRIES = {"DE": 22, "GB": 22, "FR": 27, "ES": 24, "NL": 18, "IT": 27, "CH": 21, "PL": 28, "BE": 16, "SE": 24}


def _iban(rng: random.Random, country: str, length: int) -> str:
    if country in ("GB", "NL"):
        bban = "".join(rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") for _ in range(4))
        bban += "".join(rng.choice("0123456789") for _ in range(length - 8))
    elif country in ("FR", "IT"):
        bban = "".join(rng.choice("0123456789") for _ in range(length - 5))
        bban = bban[:5] + rng.choice("ABCDEFGHIJKLMNOPQRSTUVWXYZ") + bban[5:]
    else:
        bban = "".join(rng.choice("0123456789") for _ in range(length - 4))
    numeric = "".join(str(int(c, 36)) for c in bban + country + "00")
    check = 98 - int(numeric) % 97
    return f"{country}{check:02d}{bban}"


def pii_samples(seed: int = 7) -> list[PiiSample]:
    rng = random.Random(seed)
    out: list[PiiSample] = []
    for name, prefix, length, groups in _NETWORKS:
        body = prefix + "".join(rng.choice("0123456789") for _ in range(length - len(prefix) - 1))
        number = body + _luhn_digit(body)
        for sep in ("", " ", "-", ".", "/"):
            shown = _group(number, groups, sep) if sep else number
            out.append(PiiSample("card", shown, f"{name} card on file: {shown}, expires 09/28."))
    for _ in range(8):
        area = rng.choice([n for n in range(1, 900) if n != 666])
        digits = f"{area:03d}{rng.randint(1, 99):02d}{rng.randint(1, 9999):04d}"
        dashed = f"{digits[:3]}-{digits[3:5]}-{digits[5:]}"
        out.append(PiiSample("ssn", dashed, f"Applicant SSN {dashed}, born 1984."))
        out.append(PiiSample("ssn", dashed.replace("-", " "), f"ssn: {dashed.replace('-', ' ')}"))
        out.append(PiiSample("ssn", digits, f"Social Security number {digits} on the W-2."))
        out.append(PiiSample("ssn", digits, f"SSN={digits}"))
    for country, length in _IBAN_COUNTRIES.items():
        iban = _iban(rng, country, length)
        spaced = " ".join(iban[i : i + 4] for i in range(0, len(iban), 4))
        out.append(PiiSample("iban", iban, f"Please wire the refund to {iban}."))
        out.append(PiiSample("iban", spaced, f"IBAN: {spaced} (BIC on request)"))
    try:
        import phonenumbers
    except ImportError:
        return out
    for region in ("US", "GB", "DE", "FR", "IN", "BR", "JP", "AU"):
        example = phonenumbers.example_number_for_type(region, phonenumbers.PhoneNumberType.MOBILE)
        international = phonenumbers.format_number(example, phonenumbers.PhoneNumberFormat.INTERNATIONAL)
        out.append(PiiSample("phone", international, f"Reach me on {international} after 6pm."))
        if region == "US":
            national = phonenumbers.format_number(example, phonenumbers.PhoneNumberFormat.NATIONAL)
            out.append(PiiSample("phone", national, f"Call {national} to confirm."))
    return out


def lookalikes(n: int = 2000, seed: int = 11) -> list[PiiSample]:
    """``n`` numbers of each kind that are not personal data, each in a line of the kind it turns up in."""
    rng = random.Random(seed)
    out: list[PiiSample] = []

    def digits(k: int) -> str:
        return str(rng.randint(1, 9)) + "".join(rng.choice("0123456789") for _ in range(k - 1))

    for _ in range(n):
        k = rng.randint(13, 19)
        order = digits(k)
        out.append(PiiSample("order number (13-19 digits)", order, f"Order {order} shipped."))
        grouped = _group(order, (4, 4, 4, 4, 3), rng.choice(" -"))
        out.append(PiiSample("order number (grouped)", grouped, f"Reference {grouped}"))
        nine = digits(9)
        out.append(PiiSample("order number (9 digits)", nine, f"Order #{nine} was delivered."))
        ts = rng.randint(946_684_800, 1_893_456_000)
        out.append(PiiSample("unix timestamp (s, ms)", str(ts), f'{{"created": {ts}, "updated_ms": {ts * 1000}}}'))
        y, mo, d = rng.randint(2000, 2030), rng.randint(1, 12), rng.randint(1, 28)
        h, mi, s = rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59)
        compact = f"{y}{mo:02d}{d:02d}{h:02d}{mi:02d}{s:02d}"
        iso = f"{y}-{mo:02d}-{d:02d}T{h:02d}:{mi:02d}:{s:02d}.{rng.randint(0, 999999):06d}Z"
        out.append(PiiSample("date-time", compact, f"batch_{compact} finished at {iso}"))
        u = uuid.UUID(int=rng.getrandbits(128), version=4)
        out.append(PiiSample("uuid", str(u), f"request_id={u}"))
        hexid = f"{rng.getrandbits(64):016x}"
        out.append(PiiSample("hex id", hexid, f"span {hexid} took 12ms"))
        invoice = f"INV-{y}-{rng.randint(0, 999999):06d}"
        tracking = "1Z" + "".join(rng.choice("0123456789ABCDEFGHJKLMNPRSTUVWXYZ") for _ in range(16))
        out.append(PiiSample("invoice / tracking number", invoice, f"{invoice}, tracking {tracking}"))
    return out
