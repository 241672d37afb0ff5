"""Round 12 red team of the built-in guardrails: secrets and personal data in the shapes tool arguments and results
carry them (encoded, escaped, disguised, cut short, streamed), the redacted text they leave, and ordinary text
that must pass. Every secret is built at run time from the vendor's published format (none is real)."""

from __future__ import annotations

import base64
import json
import random
import string
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import pytest

from stopwise import Agent, Reply, Runner
from stopwise.events import RunFinished
from stopwise.guardrails import Guardrails, Rewrite, ToolResultContext, block_pii, redact_pii, redact_secrets
from stopwise.guardrails._pii import PiiKind, find_pii
from stopwise.guardrails._secrets import find_secrets, redact_text
from stopwise.messages import ToolCall
from stopwise.models import ModelRequest
from stopwise.store import SQLiteStore

_RNG = random.Random(12)
_ALNUM = string.ascii_letters + string.digits
_B64 = _ALNUM + "+/"


def _r(n: int, alphabet: str = _ALNUM) -> str:
    return "".join(_RNG.choice(alphabet) for _ in range(n))


GITHUB = "ghp_" + _r(36)
AWS_ID = "AKIA" + _r(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567")
AWS_SECRET = _r(40, _B64)
# Vendors' published formats: prefix, alphabet and length.
PROVIDER_TOKENS = {
    "aws-access-key-id": AWS_ID,
    "github-classic": GITHUB,
    "github-fine-grained": "github_pat_11" + _r(20, string.ascii_uppercase + string.digits) + "_" + _r(59),
    "slack-bot": f"xoxb-{_RNG.randint(10**10, 10**11)}-{_RNG.randint(10**12, 10**13)}-{_r(24)}",
    "stripe-live": "sk_live_" + _r(99),
    "stripe-test": "sk_test_" + _r(24),
    "openai-project": "sk-proj-" + _r(74, _ALNUM + "_-") + "T3BlbkFJ" + _r(74, _ALNUM + "_-"),
    "anthropic": "sk-ant-api03-" + _r(93, _ALNUM + "_-") + "AA",
    "huggingface": "hf_" + _r(34),
    "npm": "npm_" + _r(36),
    "pypi": "pypi-AgEIcHlwaS5vcmc" + _r(70, _ALNUM + "_-"),
    "twilio-api-key": "SK" + _r(32, "0123456789abcdef"),
    "sendgrid": "SG." + _r(22) + "." + _r(43),
    "gcp-api-key": "AIza" + _r(35, _ALNUM + "_-"),
    "azure-ad-client-secret": _r(3) + "8Q~" + _r(34, _ALNUM + "_~."),
}
# Where a tool argument or result carries a token: ``{}`` is the token.
CARRIERS = {
    "dotenv": "export SERVICE_TOKEN={}\nDEBUG=1\n",
    "yaml": "service:\n  credentials:\n    token: '{}'\n",
    "ini": "[service]\napi_key = {}\n",
    "curl-header": "curl -sS -H 'Authorization: Bearer {}' https://api.example.com/v1/me",
    "nested-json": '{{"data": {{"items": [{{"cfg": {{"auth": "{}"}}}}]}}}}',
    "code-comment": "def main():\n    # old key, rotate me: {}\n    return run()\n",
    "html-attribute": '<meta name="deploy" content="{}">',
    "url-query": "https://hooks.example.com/in?access_token={}&ok=1",
    "percent-encoded-query": "next=%2Fcb%3Ftoken%3D{}%26x%3D1",
    "zero-width-inside": "key: {}",
}


def _fragments(secret: str, n: int = 8) -> list[str]:
    """Every run of ``n`` characters of ``secret``: what a partial leak would show."""
    return [secret[i : i + n] for i in range(len(secret) - n + 1)]


def _leaks(secret: str, text: str) -> list[str]:
    return [f for f in _fragments(secret) if f in text]


def _result_ctx(value: Any) -> ToolResultContext:
    return ToolResultContext((), 1, "s", "r", None, ToolCall("read", {}, "c1"), value, False)


def _redacted_result(value: Any) -> Any:
    verdict = redact_secrets()(_result_ctx(value))
    assert isinstance(verdict, Rewrite) and verdict.redacted
    return verdict.result


# --- every provider format in every carrier ------------------------------------------------------------------


@pytest.mark.parametrize("carrier", sorted(CARRIERS))
@pytest.mark.parametrize("provider", sorted(PROVIDER_TOKENS))
def test_a_provider_token_in_any_carrier_is_redacted_with_no_fragment_left(provider: str, carrier: str) -> None:
    token = PROVIDER_TOKENS[provider]
    shown = token[:9] + "\u200b" + token[9:] if carrier == "zero-width-inside" else token
    text = CARRIERS[carrier].format(shown)
    redacted = redact_text(text)
    assert "[redacted]" in redacted
    assert _leaks(token, redacted.replace("\u200b", "")) == []


# --- encodings and escapes -----------------------------------------------------------------------------------


def test_a_token_after_a_percent_encoded_equals_sign_is_redacted() -> None:
    """``%3D`` ends in a letter, which read raw glued the token to it (no token boundary)."""
    for text in (f"https://x.example/cb?token%3D{GITHUB}", f"q=access%3D{GITHUB}%26x=1"):
        assert _leaks(GITHUB, redact_text(text)) == []


def test_a_percent_encoded_json_body_and_password_are_redacted() -> None:
    key = _r(32)
    body = urllib.parse.quote(json.dumps({"api_key": key, "user": "bob"}))
    assert _leaks(key, redact_text(body)) == []
    form = "grant_type=password&username=bob&password%3DHunt3r2Secret%21"
    assert "Hunt3r2Secret" not in redact_text(form)


def test_a_secret_in_json_nested_as_a_json_string_is_redacted_and_both_levels_stay_json() -> None:
    """A tool returning a JSON document whose field is itself a JSON text: the inner quotes are escaped."""
    inner = json.dumps({"password": "Tr0ub4dor&3xyz", "api_key": (key := _r(32)), "user": "bob"})
    result = _redacted_result({"body": inner, "status": 200})
    decoded = json.loads(result["body"])
    assert decoded == {"password": "[redacted]", "api_key": "[redacted]", "user": "bob"}
    as_text = _redacted_result(json.dumps({"body": inner}))
    assert json.loads(json.loads(as_text)["body"])["user"] == "bob" and _leaks(key, as_text) == []


def test_json_in_an_html_attribute_and_go_style_unicode_escapes_are_read() -> None:
    """A web page's ``data-config="{&quot;apiKey&quot;:...}"``; Go's JSON writes ``&`` as ``\\u0026`` in a URL."""
    key = _r(24)
    page = f'<div data-config="{{&quot;apiKey&quot;:&quot;{key}&quot;,&quot;user&quot;:&quot;bob&quot;}}">'
    assert redact_text(page) == page.replace(key, "[redacted]")
    go = json.dumps({"url": f"https://x.example/cb?a=1&access_token={key}"}).replace("&", "\\u0026")
    redacted = redact_text(go)
    assert key not in redacted and json.loads(redacted)["url"] == "https://x.example/cb?a=1&access_token=[redacted]"
    assert find_secrets("Tom &amp; Jerry &quot;quoted&quot; &#39;text&#39;") == []


def test_a_quoted_password_holding_the_other_quote_or_an_escaped_quote_is_redacted_whole_and_json_stays_valid() -> None:
    """Redacting up to the first quote of any kind left the rest of the value, and broke a JSON text."""
    for value in ("Tr0ub'4dor&3", 'Tr0ub"4dor&3', "it's-S3cret!"):
        text = json.dumps({"password": value, "user": "bob"})
        redacted = redact_text(text)
        assert json.loads(redacted) == {"password": "[redacted]", "user": "bob"}, redacted
    assert redact_text("password = 'ab\\'cdef12'") == "password = '[redacted]'"


def test_zero_width_characters_and_a_soft_hyphen_inside_a_token_do_not_hide_it() -> None:
    for mark in ("\u200b", "\u200c", "\u200d", "\u2060", "\ufeff", "\u00ad"):
        for token in (GITHUB, AWS_ID, PROVIDER_TOKENS["stripe-live"]):
            text = f"found {token[:8]}{mark}{token[8:]} in the logs"
            redacted = redact_text(text)
            assert _leaks(token, redacted.replace(mark, "")) == [], (repr(mark), redacted)
            assert redacted == "found [redacted] in the logs", (repr(mark), redacted)


def test_disguised_secrets_deep_inside_a_long_escaped_result_are_redacted_where_they_are() -> None:
    """The decoded view is read around what it decoded: finds far into a long text map back to their place."""
    filler = "lorem ipsum dolor sit amet " * 400
    token = PROVIDER_TOKENS["npm"]
    text = (
        f'{{\\"note\\": \\"start\\"}} {filler} found {token[:6]}\u200b{token[6:]} here {filler}'
        f" next=%2Fcb%3Ftoken%3D{GITHUB} {filler} pan 4111\u00a01111\u00a01111\u00a01111 end"
    )
    redacted = redact_text(text)
    assert _leaks(token, redacted.replace("\u200b", "")) == [] and _leaks(GITHUB, redacted) == []
    assert f"{filler} found [redacted] here {filler}" in redacted and "next=%2Fcb%3Ftoken%3D[redacted] " in redacted
    [card] = find_pii(text, _ALL)
    assert text[card.start : card.end] == "4111\u00a01111\u00a01111\u00a01111"


def test_a_secret_encoded_once_in_base64_is_redacted() -> None:
    plain = base64.b64encode(f"token={GITHUB}".encode()).decode()
    assert redact_text(f"payload: {plain}") == "payload: [redacted]"
    # A Kubernetes image pull secret: the registry login is base64 inside base64 of the Docker config.
    auth = base64.b64encode(b"robot:" + _r(40).encode()).decode()
    config = base64.b64encode(json.dumps({"auths": {"r.example.com": {"auth": auth}}}).encode()).decode()
    manifest = f"kind: Secret\ntype: kubernetes.io/dockerconfigjson\ndata:\n  .dockerconfigjson: {config}\n"
    assert config not in redact_text(manifest)
    url_safe = base64.urlsafe_b64encode(f'{{"password": "{_r(10)}?>{_r(6)}"}}'.encode()).decode()
    assert redact_text(url_safe) == "[redacted]"


def test_base64_of_binary_data_identifiers_and_hashes_is_left_alone() -> None:
    rng = random.Random(3)
    texts = [
        base64.b64encode(rng.randbytes(300)).decode(),
        "requiredCharacteristicTypesForDisplayMetadata",
        "sha256-" + base64.b64encode(rng.randbytes(32)).decode(),
        base64.b64encode(b"just some ordinary words, nothing secret in them").decode(),
        "a7f3c9e1b2d4f6a8c0e2b4d6f8a0c2e4",
    ]
    assert [t for t in texts if find_secrets(t)] == []


# --- structured credentials ----------------------------------------------------------------------------------


def _key_lines(n: int, width: int = 64) -> list[str]:
    return [_r(width, _B64) for _ in range(n)]


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\\n"])
def test_a_private_key_cut_short_is_redacted(newline: str) -> None:
    """A capped tool result (``head -c``, ``max_tool_result_length``) ends inside the key: no footer."""
    for header in ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN OPENSSH PRIVATE KEY-----"):
        body = _key_lines(6)
        text = "$ head -c 450 id_rsa" + newline + header + newline + newline.join(body)[:380]
        redacted = redact_text(text)
        assert redacted.startswith("$ head -c 450 id_rsa" + newline + "[redacted]"), redacted
        assert [line for line in body if line[:40] in redacted] == []


def test_an_encrypted_pem_key_with_headers_cut_short_is_redacted_from_the_header_on() -> None:
    body = _key_lines(4)
    text = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0A1B\n\n" + "\n".join(body)
    assert redact_text(text) == "[redacted]"


def test_a_whole_pem_key_with_crlf_inside_a_json_service_account_is_redacted() -> None:
    pem = "-----BEGIN PRIVATE KEY-----\r\n" + "\r\n".join(_key_lines(5)) + "\r\n-----END PRIVATE KEY-----\r\n"
    account = {"type": "service_account", "private_key_id": _r(40, "0123456789abcdef"), "private_key": pem}
    result = _redacted_result(json.dumps(account))
    assert json.loads(result)["private_key"] == "[redacted]"
    assert json.loads(result)["private_key_id"] == "[redacted]"


def test_a_url_password_holding_an_at_sign_is_redacted_whole() -> None:
    for url, password in (
        ("postgres://admin:p@ssw0rd1@db.internal:5432/app", "p@ssw0rd1"),
        ("mongodb+srv://app:Xk29@dLq0@cluster0.example.net/db?retryWrites=true", "Xk29@dLq0"),
    ):
        redacted = redact_text(f"DATABASE_URL={url}")
        assert password.split("@")[1] not in redacted and "[redacted]@" in redacted, redacted
    assert redact_text("see https://example.com/@user and mailto:bob@example.com") == (
        "see https://example.com/@user and mailto:bob@example.com"
    )


def test_passwords_and_tokens_on_command_lines_and_in_sql_are_redacted() -> None:
    cases = {
        "psql --password Hunter2Secret -h db": "Hunter2Secret",
        f"gh auth login --with-token --token={GITHUB[:4]}x{_r(20)}": "--token=[redacted]",
        "deploy --api-key 9f8a7b6c5d4e3f2a1b0c --env prod": "9f8a7b6c5d4e3f2a1b0c",
        "mysql -h db -u root -pHunter2Secret app": "Hunter2Secret",
        "CREATE USER 'app'@'%' IDENTIFIED BY 'Hunter2Secret';": "Hunter2Secret",
        "ALTER USER app IDENTIFIED WITH mysql_native_password BY 'S3cret!pw';": "S3cret!pw",
        "CREATE ROLE app WITH LOGIN PASSWORD 'S3cret!pw';": "S3cret!pw",
        "SET PASSWORD FOR 'bob'@'%' = 'Hunter2Secret';": "Hunter2Secret",
    }
    for text, secret in cases.items():
        redacted = redact_text(text)
        if secret.endswith("[redacted]"):
            assert secret in redacted, redacted
        else:
            assert secret not in redacted and "[redacted]" in redacted, redacted


def test_command_line_flags_and_sql_given_variables_words_or_nothing_are_left_alone() -> None:
    texts = [
        'gh auth login --token "$GITHUB_TOKEN"',
        'psql --password "$(cat /run/secrets/pg)"',
        "docker login --password-stdin < pw.txt",
        "Use --password to be prompted, or --token option for CI.",
        "mysql -u root -p app",
        "mysql -h db -P3306 -u root app",
        "CREATE USER app IDENTIFIED BY '${DB_PASSWORD}';",
        "--api-key %API_KEY% --secret <your-secret>",
    ]
    assert [t for t in texts if find_secrets(t)] == []


def test_documented_example_keys_are_placeholders_and_real_shaped_test_keys_are_secrets() -> None:
    """AWS's documented examples mark themselves (``EXAMPLE``): not secrets. A Stripe test-mode key is a working
    credential for a test account, so it is redacted like a live one."""
    assert find_secrets("aws_access_key_id = AKIAIOSFODNN7EXAMPLE") == []
    assert find_secrets("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY") == []
    assert redact_text("STRIPE_KEY=" + PROVIDER_TOKENS["stripe-test"]) == "STRIPE_KEY=[redacted]"


# --- the rewrite: no prefix, no fragment, JSON kept ----------------------------------------------------------


def test_a_redacted_json_result_keeps_its_shape_and_no_part_of_any_token() -> None:
    result = {
        "env": [{"name": k, "value": v} for k, v in sorted(PROVIDER_TOKENS.items())],
        "count": len(PROVIDER_TOKENS),
        "ok": True,
    }
    redacted = _redacted_result(result)
    assert [e["value"] for e in redacted["env"]] == ["[redacted]"] * len(PROVIDER_TOKENS)
    assert [e["name"] for e in redacted["env"]] == sorted(PROVIDER_TOKENS) and redacted["count"] == len(PROVIDER_TOKENS)
    dumped = json.dumps(redacted)
    for prefix in ("ghp_", "sk_live_", "sk-proj-", "sk-ant-", "xoxb-", "AKIA", "hf_", "npm_", "pypi-", "SG."):
        assert prefix not in dumped


# --- streaming: the answer the hook judges is the whole answer -----------------------------------------------


class _ChunkedModel:
    """Streams each reply's text in the given chunks, then the reply: a secret can straddle two chunks."""

    def __init__(self, chunks: list[str]) -> None:
        self._chunks = chunks

    async def generate(self, request: ModelRequest) -> Reply:
        return Reply(text="".join(self._chunks))

    async def stream(self, request: ModelRequest) -> AsyncIterator[str | Reply]:
        for chunk in self._chunks:
            yield chunk
        yield Reply(text="".join(self._chunks))


@pytest.mark.parametrize(
    ("secret", "guardrail", "redacted_as"),
    [(GITHUB, redact_secrets(), "[redacted]"), ("4111 1111 1111 1111", redact_pii(), "[redacted card]")],
)
async def test_a_secret_or_a_card_streamed_across_two_chunks_is_redacted_from_the_answer_and_the_log(
    tmp_path: Any, secret: str, guardrail: Any, redacted_as: str
) -> None:
    half = len(secret) // 2
    model = _ChunkedModel([f"Here it is: {secret[:half]}", f"{secret[half:]} (keep it safe)"])
    agent = Agent("a", "Answer.", model, guardrails=Guardrails(on_output=guardrail))
    store = SQLiteStore(tmp_path / "log.db")
    try:
        events = [e async for e in Runner(store).stream(agent, "give me the key", session_id="s")]
        finished = events[-1]
        assert isinstance(finished, RunFinished)
        assert finished.result.output == f"Here it is: {redacted_as} (keep it safe)"
    finally:
        await store.close()
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert secret.encode() not in stored and secret[:half].encode() + secret[half:].encode() not in stored


# --- personal data -------------------------------------------------------------------------------------------

_ALL = frozenset({PiiKind.CARD, PiiKind.SSN, PiiKind.IBAN})


def test_cards_ibans_and_ssns_grouped_by_no_break_thin_spaces_or_typographic_dashes_are_found() -> None:
    """What a web page or a word processor puts between the groups when the number is copied from it."""
    for sep in ("\u00a0", "\u2009", "\u202f", "\u2007"):
        assert [m.kind for m in find_pii(sep.join(["4111", "1111", "1111", "1111"]), _ALL)] == [PiiKind.CARD]
        assert [m.kind for m in find_pii("IBAN " + sep.join(["DE89", "3704", "0044", "0532", "0130", "00"]), _ALL)] == [
            PiiKind.IBAN
        ]
        assert [m.kind for m in find_pii(f"SSN 536{sep}90{sep}1234", _ALL)] == [PiiKind.SSN]
    for dash in ("\u2010", "\u2011", "\u2013", "\u2212"):
        assert [m.kind for m in find_pii(f"SSN 536{dash}90{dash}1234", _ALL)] == [PiiKind.SSN]
        assert [m.kind for m in find_pii(dash.join(["5555", "5555", "5555", "4444"]), _ALL)] == [PiiKind.CARD]


def test_a_card_with_zero_width_characters_or_percent_encoded_is_found_and_redacted_whole() -> None:
    scan = redact_pii()
    for text in ("pan=4111\u200b1111\u200b1111\u200b1111;", "pan%3D4111111111111111%26cvv%3D123"):
        verdict = scan(_result_ctx(text))
        assert isinstance(verdict, Rewrite)
        assert "1111" not in verdict.result and "[redacted card]" in verdict.result


def test_block_pii_refuses_a_tool_call_whose_card_is_percent_encoded_in_a_url() -> None:
    from stopwise.guardrails import ToolCallContext

    call = ToolCall("fetch", {"url": "https://pay.example.com/charge?card%3D4111111111111111"}, "c1")
    verdict = block_pii()(ToolCallContext((), 1, "s", "r", None, call))
    assert verdict is not None and "payment card" in verdict.reason


def test_ordinary_numbers_ids_and_typeset_amounts_are_not_personal_data() -> None:
    texts = [
        "Order #100-2345678-1234567 shipped on 2024-12-02T07:30:00Z (02/12/2024).",
        "version 4.111.1111.1111, v12.34.5678, build 20241202.1",
        "id 41111111-1111-1111-1111-111111111111",
        "commit 4111111111111111111111111111111111111111",
        "color: #411111; background: #123456; border: 1px solid #ffffff",
        "10.123.45.67 and 192.168.100.200:8080",
        "ISBN 978-0-306-40615-7 / 9780306406157, EAN 4006381333931",
        "ts=1733124600000 and 1733124600",
        "tracking 1Z999AA10123456784",
        "Total: 4,111,111,111,111.11 USD",
        "Population\u202f: 67\u202f750\u202f000 habitants, budget 1\u202f234\u202f567\u202f890\u00a0€",
        "Pages 12\u201334 and 1990\u20132024",
        "uuid=550e8400-e29b-41d4-a716-446655440000&ref=%2Fhome%2F4111",
    ]
    assert [t for t in texts if find_pii(t, _ALL)] == []


def test_international_phone_numbers_are_found_with_phones_on() -> None:
    pytest.importorskip("phonenumbers")
    import phonenumbers

    for text in ("call +44 20 7946 0958", "Tel. +49 30 901820", "+33 1 42 68 53 00", "+91 98765 43210"):
        assert [m.kind for m in find_pii(text, frozenset({PiiKind.PHONE}), phonenumbers=phonenumbers)] == [
            PiiKind.PHONE
        ], text


# --- where in a JSON value: keys and numbers -----------------------------------------------------------------


def test_a_secret_used_as_a_json_key_is_redacted_and_no_entry_is_lost() -> None:
    """A tool listing keys by key (``{"keys": {"sk_live_...": {...}}}``): the key is data too."""
    live, test = PROVIDER_TOKENS["stripe-live"], PROVIDER_TOKENS["stripe-test"]
    result = _redacted_result({"keys": {live: {"mode": "live"}, test: {"mode": "test"}, "count": 2}})
    assert result == {"keys": {"[redacted]": {"mode": "live"}, "[redacted] (2)": {"mode": "test"}, "count": 2}}


def test_a_card_number_stored_as_a_json_number_is_found_and_redacted() -> None:
    """A database row returns the card as an integer, not a string."""
    row = {"id": 7, "pan": 4111111111111111, "amount": 1250, "ok": True}
    verdict = redact_pii()(_result_ctx(row))
    assert isinstance(verdict, Rewrite) and verdict.result == {**row, "pan": "[redacted card]"}
    assert block_pii()(_result_ctx({"by_card": {"4111111111111111": 3}})) is not None
    from stopwise.guardrails import ToolCallContext

    call = ToolCall("charge", {"card": 4111111111111111, "cents": 500}, "c1")
    assert block_pii()(ToolCallContext((), 1, "s", "r", None, call)) is not None
    assert redact_pii()(_result_ctx({"id": 12345678901234, "total": 4111, "flag": True})) is None
