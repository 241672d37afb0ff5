"""``redact_secrets``: a rule table covering the common vendor formats, structured credentials and secret-named
assignments; ordinary text, placeholders and code references left alone."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from stopwise.guardrails import Rewrite, ToolResultContext, redact_secrets
from stopwise.guardrails._secrets import SECRET_RULES, find_secrets, redact_text
from stopwise.messages import ToolCall

EVALS = Path(__file__).resolve().parents[1] / "evals"


def _evals_module(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EVALS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


SAMPLES = _evals_module("secret_samples").secret_samples()


def _survives(secret: str, text: str) -> bool:
    return any(secret[i : i + 8] in text for i in range(0, len(secret) - 7))


def test_the_format_table_has_at_least_sixty_formats() -> None:
    assert len({s.format for s in SAMPLES}) >= 60


def test_at_least_57_formats_are_caught_with_nothing_of_the_secret_left() -> None:
    missed = [s.format for s in SAMPLES if _survives(s.secret, redact_text(s.text))]
    assert len(SAMPLES) - len(missed) >= 57, missed


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.format for s in SAMPLES])
def test_each_format_is_redacted(sample: object) -> None:
    secret, text = sample.secret, sample.text  # type: ignore[attr-defined]
    out = redact_text(text)
    assert not _survives(secret, out), out
    assert "[redacted]" in out


def _ctx(result: object) -> ToolResultContext:
    return ToolResultContext((), 1, "s", "r", None, ToolCall("read", {}, "c1"), result, False)


def test_redact_secrets_reaches_strings_nested_in_json_results() -> None:
    token = "gh" + "p_" + "Ab3" * 12
    verdict = redact_secrets()(_ctx({"config": {"env": [f"GITHUB_TOKEN={token}", "DEBUG=1"]}, "n": 3}))
    assert isinstance(verdict, Rewrite)
    assert verdict.result == {"config": {"env": ["GITHUB_TOKEN=[redacted]", "DEBUG=1"]}, "n": 3}


def test_redact_secrets_marks_its_rewrite_as_a_redaction() -> None:
    verdict = redact_secrets()(_ctx("key: " + "sk" + "_live_" + "x1Y2" * 8))
    assert isinstance(verdict, Rewrite) and verdict.redacted


def test_a_result_without_secrets_passes() -> None:
    result = "Build 4471 passed in 3m12s; artefact sha256 9f86d081884c7d659a2feaa0c55ad015"
    assert redact_secrets()(_ctx(result)) is None


def test_only_the_password_of_a_url_is_redacted() -> None:
    text = "postgres://app:" + "S3cr3tPassw0rd" + "@db.internal:5432/app"
    assert redact_text(text) == "postgres://app:[redacted]@db.internal:5432/app"


@pytest.mark.parametrize(
    "line",
    [
        "password = os.environ['DB_PASSWORD']",
        "password=${DB_PASSWORD}",
        "token = self.token",
        "api_key = get_api_key()",
        "password: str | None = None",
        'password = "<your password here>"',
        "The password is required.",
        "max_tokens = 1024",
        "session_id = 550e8400-e29b-41d4-a716-446655440000",
        "commit 3f786850e387550fdab836ed7e6dc881de23001b (HEAD -> main)",
        "https://example.com:8443/path?query=1#frag",
        "tokenizer = AutoTokenizer.from_pretrained('bert-base-uncased')",
        '"AWS::AppSync::ApiKey": "3d104ea0be48564b",',
        "client = Client(password=password, token=token)",
        "See https://user:pass@host/ for the URL syntax.",
    ],
)
def test_ordinary_code_placeholders_and_ids_are_not_flagged(line: str) -> None:
    assert find_secrets(line) == [], find_secrets(line)


@pytest.mark.parametrize(
    "line",
    [
        # Lines of installed packages' source that were flagged (a scan of 2.2 million lines, round 10):
        "        password=None,",
        "        password=self.ssl_keyfile_password,",
        "def change_password(self, user: bytes, passwd: bytes) -> None: ...",
        "proxy_username=None, proxy_password=None):",
        '"password": "string?",',
        "entity_mask2_token=entity_mask2_token,",
        "self.cross_attn_image_to_token = Sam3TrackerVideoAttention(config)",
    ],
)
def test_keyword_arguments_calls_and_type_names_after_a_secret_name_are_not_flagged(line: str) -> None:
    assert find_secrets(line) == [], find_secrets(line)


@pytest.mark.parametrize(
    ("line", "secret"),
    [
        ("Server=db;Database=app;Uid=sa;Pwd=Xk29!aLq3;", "Xk29!aLq3"),
        ("password=hunter2x,", "hunter2x"),
        ("TOKEN=Ab12Cd34Ef56Gh78Ij90", "Ab12Cd34Ef56Gh78Ij90"),
        ("client = Client(token=Ab12Cd34Ef56Gh78Ij90)", "Ab12Cd34Ef56Gh78Ij90"),
    ],
)
def test_values_before_a_comma_or_a_closing_bracket_are_still_redacted(line: str, secret: str) -> None:
    assert secret not in redact_text(line)


def test_every_rule_has_keywords_and_a_unique_id() -> None:
    ids = [r.id for r in SECRET_RULES]
    assert len(ids) == len(set(ids))
    assert all(r.keywords and all(k == k.lower() for k in r.keywords) for r in SECRET_RULES)


@pytest.mark.slow
def test_at_most_one_percent_of_ordinary_lines_are_flagged() -> None:
    corpus = _evals_module("ordinary_text").ordinary_lines(per_kind=800)
    lines = [line for kind in corpus.values() for line in kind]
    if len(lines) < 3000:
        pytest.skip("too little installed text on this machine to build the corpus")
    flagged = [line for line in lines if find_secrets(line)]
    assert len(flagged) <= len(lines) // 100, flagged[:10]
