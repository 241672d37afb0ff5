"""The secret rules behind ``redact_secrets``: one table of vendor token formats plus keyword-context rules.

The rule families follow the published gitleaks rule set (MIT; github.com/gitleaks/gitleaks, ``config/``), which
is kept up to date by its community, and each pattern is written from the vendor's published token format. Three
kinds of rule:

- **prefixed tokens**: a vendor's fixed prefix and alphabet (``ghp_``, ``sk_live_``, ``AKIA``, ``glpat-``...):
  precise, no context needed;
- **structured credentials**: PEM private keys, JWTs, passwords in URLs, connection strings, webhook URLs;
- **keyword context**: a value assigned to a name that says it is secret (``DB_PASSWORD=``, ``"client_secret":``,
  ``aws_secret_access_key =``), with filters for code references and placeholders and, for unprefixed values,
  a Shannon-entropy floor.

Every rule has keywords: it runs only on text that holds one (case-insensitive), which keeps a scan of ordinary
text cheap. A value that reads as a stand-in (``ghp_xxxx...``, ``AKIA...EXAMPLE``: ``is_placeholder_token``) is
dropped by every rule but the private keys. The table was checked against the peers' own test data (gitleaks'
rule tests, detect-secrets' plugin tests: ``evals/peer_eval.py``). Pure and deterministic: no I/O, no clock.
"""

from __future__ import annotations

import base64
import math
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass

from stopwise.guardrails._decoded import decoded_view

__all__ = ["SECRET_RULES", "SecretMatch", "SecretRule", "find_secrets", "is_placeholder_token", "redact_text"]

REDACTED = "[redacted]"


@dataclass(frozen=True, slots=True)
class SecretRule:
    """One secret format."""

    id: str
    """Stable, kebab-case: the vendor and the kind of secret (``aws-access-key-id``)."""
    pattern: re.Pattern[str]
    """What a secret looks like; a group named ``secret`` (when there is one) is the part that gets redacted."""
    keywords: tuple[str, ...]
    """Lower-case strings one of which the text must hold for the rule to run."""
    min_entropy: float = 0.0
    """The least Shannon entropy (bits per character) of the secret part: screens out ``xxxx`` and words."""
    accept: Callable[[str, bool], bool] | None = None
    """A last check on the secret part and whether it was quoted (placeholders, code references), where the
    pattern cannot say it."""
    not_names: re.Pattern[str] | None = None
    """For rules that find a value by the name it is assigned to (a group named ``name``): names that say the
    value is not secret although they hold a secret word (``public_token``, ``csrf-token``)."""
    placeholders_checked: bool = True
    """Whether a value that reads as a placeholder (``ghp_xxxx...``, ``AKIA...EXAMPLE``) is dropped; off for
    private keys, whose DER bodies hold long runs of ``A``."""


@dataclass(frozen=True, slots=True)
class SecretMatch:
    """Where a rule found a secret in a text: ``text[start:end]`` is the part to redact."""

    rule: str
    start: int
    end: int


def shannon_entropy(value: str) -> float:
    """Bits per character of ``value``'s character distribution."""
    if not value:
        return 0.0
    n = len(value)
    return -sum(c / n * math.log2(c / n) for c in Counter(value).values())


# Six or more of a filler character (``xxxxxx``, ``XXXXXX``, ``******``, ``######``, ``000000``): how
# documentation and templates leave a token out. A random token of 40 letters and digits holds six ``x`` in a row
# about once in 10^8. Other characters repeat in real tokens: base64 of binary data holds runs of ``A`` for zero
# bytes (Fly.io macaroons; Twitter's app-only bearer tokens start with twenty-odd), so a run of any other
# character makes a placeholder only when it is most of the value (``AIzaaaaaaaaa...``, ``glc_1111111...``).
_FILLER_RUN = re.compile(r"([xX*#.0])\1{5}")
_ANY_RUN = re.compile(r"(.)\1{7,}")


def is_placeholder_token(value: str) -> bool:
    """Whether a token-shaped value is a stand-in: a filler run (``glpat-XXXXXXXXXXXX``), one character repeated
    over half the value or more (``AIzaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa``), or AWS's documented example marker
    (``AKIAIOSFODNN7EXAMPLE``, ``...EXAMPLEKEY``)."""
    if "EXAMPLE" in value or _FILLER_RUN.search(value) is not None:
        return True
    return any(2 * len(m.group()) >= len(value) for m in _ANY_RUN.finditer(value))


# -- filters for values found by keyword -----------------------------------------------------------------------

_PLACEHOLDER = re.compile(
    r"""(?ix)^(?:
        \$\{?[\w.\-]+\}? | \{\{.*\}\} | %\(?[\w.]+\)?s? | %[\w]+% | <[^>]*> | \[[^\]]*\] | \*+ | x+ | \.+ | -+
        | none | null | nil | true | false | undefined | required | optional | (?:string|str|int|bytes|any)\??
        | password | passwd | pass | pwd | user | secret | token | changeme | change_me
        | your[_\-]?\w* | my[_\-]?\w* | example\w* | dummy\w* | replace[_\-]\w* | insert[_\-]\w*
        | placeholder\w* | redacted | hidden | todo | tbd | fixme | env | os\.environ.* | process\.env.* | getenv.*
    )$"""
)
# A reference to something else, not a value: ``self.password``, ``config["token"]``, ``get_secret()``.
_CODE_REF = re.compile(r"^[A-Za-z_][\w]*(?:(?:\.|->|::)[A-Za-z_]\w*)+$|[(\[{]|^[A-Za-z_]\w*\($")


def _bare(value: str) -> str:
    """An unquoted value without what ends the sentence or the call it sits in (``password=None):``, ``the
    password is required.``)."""
    return value.strip().rstrip(".,;:!?)")


def _literal_value(value: str, quoted: bool) -> bool:
    """A value assigned to a secret-named key is a secret unless it is a placeholder or names something else."""
    v = value.strip() if quoted else _bare(value)
    if len(v) < 6 or _PLACEHOLDER.match(v) or (not quoted and _CODE_REF.search(v)):
        return False
    if v.isidentifier() and not any(c.isdigit() for c in v):
        # ``password=pwd``, ``token=access_token``: a variable or a name. A real password has a digit or a sign.
        return False
    return not v.isdigit() or len(v) >= 8


# A dotted name in lower case: a module path or a setting's key (``subsampling.0``, ``state.layer1.weight``).
_DOTTED_NAME = re.compile(r"^[a-z_][a-z0-9_]{0,15}(?:\.(?:[a-z_][a-z0-9_]{0,15}|\d+))+$")
# A name then a version: ``jjwt-jackson-0.11.2``, ``requests@2.31.0``, ``node:20.11.1-alpine`` (package
# coordinates and image tags, which sit after names such as ``io.jsonwebtoken:`` or ``auth-lib:``).
_VERSIONED_NAME = re.compile(r"^[A-Za-z][\w.\-]*?[-_.@:/]v?\d+(?:\.\d+){1,3}(?:[-+][\w.\-]*)?$")


def _random_value(value: str, quoted: bool) -> bool:
    if all(c in "0123456789abcdefABCDEF" for c in value) and len(value) < 32:
        return False  # a short hex string is an id or a digest prefix; hex API keys are 32 characters or more
    if _VERSIONED_NAME.match(value) or _DOTTED_NAME.match(value):
        return False
    if _URL_VALUE.match(value) and not _random_url_part(value):
        # ``MONGO_NO_AUTH = "mongodb://localhost:27017/db"``: an address; a password in it is url-password's.
        return False
    return _literal_value(value, quoted) and any(c.isdigit() for c in value) and any(c.isalpha() for c in value)


def _element_password(value: str, quoted: bool) -> bool:
    """An XML element's text is delimited as a quoted value is."""
    return _literal_value(value, True)


def _element_secret(value: str, quoted: bool) -> bool:
    return _random_value(value, True)


def _connection_password(value: str, quoted: bool) -> bool:
    """A connection string's password, unless a placeholder or a reference (``password=None,`` and
    ``password=self.ssl_password,`` on a line of their own are keyword arguments)."""
    bare = _bare(value)
    return _url_password(bare, quoted) and not _CODE_REF.search(bare)


def _url_password(value: str, quoted: bool) -> bool:
    """Not a placeholder (``REPLACE_WITH_PASSWORD``), a variable, nor one or two characters repeated (``1111``)."""
    return not _PLACEHOLDER.match(value) and not value.startswith(("$", "{", "%", "<")) and len(set(value.lower())) > 2


def _basic_credentials(value: str, quoted: bool) -> bool:
    """HTTP Basic credentials are base64 of ``user:password`` (RFC 7617): a value that decodes to text without
    the colon, or to a JSON object (a JWT's header pasted after ``Basic``), is not one. A value that does not
    decode (cut short, mangled) is still taken: it may be the credential all the same."""
    try:
        decoded = base64.b64decode(value + "=" * (-len(value) % 4), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return True
    if not decoded.isprintable():
        return True
    user, sep, password = decoded.partition(":")
    return bool(sep) and not decoded.startswith("{") and not (_PLACEHOLDER.match(user) and _PLACEHOLDER.match(password))


_KEY_BODY = re.compile(r"[A-Za-z0-9+/]{40}")


def _key_body(value: str, quoted: bool) -> bool:
    """A private key block holds base64 lines (64 characters in PEM, 70 in OpenSSH); ``-----BEGIN PRIVATE
    KEY-----\\nanything\\n-----END...`` in documentation does not."""
    return _KEY_BODY.search(value) is not None


def _credential_pair(value: str, quoted: bool) -> bool:
    """``user:password``, or a token as the user name with no password (``-u sk_live_...:``): the password (or
    that token) must be a value, not a placeholder (``<user:password>``, ``neo4j:[PASSWORD]``, ``xxx:yyy``), a
    variable or a template (``"$USER:${APPID}"``, ``{{ .Values.password }}``), nor the user name again
    (``test:test``)."""
    if ":" not in value or any(t in value for t in ("${", "{{", "$(", "%(")):
        return False  # without a colon it is a user name only: curl asks for the password
    user, _, password = value.strip("\"'").partition(":")
    user, password = user.strip("\"'{}"), password.strip("\"'{}")
    secret = password or user
    return (
        len(secret) >= 4
        and secret != user * (password != "")  # ``test:test``
        and len(set(secret.lower())) > 2
        and not _PLACEHOLDER.match(secret)
        and not secret.startswith(("$", "%", "<", "["))
        and not secret.endswith((">", "]"))
    )


def _flag_value(value: str, quoted: bool) -> bool:
    """A password or token given on a command line or in SQL: a literal, not a variable or a substitution
    (``"$GITHUB_TOKEN"``, ``"$(cat token)"``, ``%PASSWORD%``)."""
    return _literal_value(value, quoted) and not value.startswith(("$", "%", "<", "{", "`"))


def _header_value(value: str, quoted: bool) -> bool:
    """The value of an authentication header: a digit and a letter, not a placeholder or a variable."""
    return (
        not _PLACEHOLDER.match(value)
        and not value.startswith(("$", "{", "%", "<"))
        and any(c.isdigit() for c in value)
        and any(c.isalpha() for c in value)
    )


_RUN = re.compile(r"[A-Za-z0-9]{16,}")


def _random_run(value: str, quoted: bool) -> bool:
    """A random key holds a run of 16 or more letters and digits with a digit in it; hyphenated words that share a
    key's prefix (``sk-ant-api02-notarealkey``, a CSS class ``sk-folding-cube-...``) do not."""
    return any(any(c.isdigit() for c in m.group()) for m in _RUN.finditer(value))


_URL_VALUE = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_URL_PART = re.compile(r"[^/?&=:@.#;]+")


def _random_url_part(value: str) -> bool:
    """Whether a URL holds a part (between ``/ ? & = : @ .``) that reads as a token: 16 characters or more with
    letters and digits."""
    return any(
        len(p) >= 16 and any(c.isdigit() for c in p) and any(c.isalpha() for c in p) for p in _URL_PART.findall(value)
    )


def _mixed(value: str, quoted: bool) -> bool:
    return any(c.isdigit() for c in value) and any(c.isupper() for c in value) and any(c.islower() for c in value)


# -- the table ------------------------------------------------------------------------------------------------

_B = r"(?<![A-Za-z0-9_\-])"  # a token starts after a non-token character
_E = r"(?![A-Za-z0-9_\-])"  # and ends before one
# A name that says its value is secret, then an assignment (``=``, ``:``, ``=>``, ``:=``), optionally quoted.
# The value is on the same line: ``snowflake.password=`` followed by a newline is an empty setting, and what the
# next line holds is not its value. Makefile's ``::=``, ``:::=`` and ``?=`` are assignments too.
_ASSIGN = r"""["']?[ \t]*(?:=|:{1,3}=|\?=|=>|:|[ \t]+is[ \t]+)[ \t]*(?:["'`]|(?=[^\s"'`]))"""
_PASSWORD_NAMES = r"[\w.\-]*?(?:password|passwd|passphrase|pwd)"
_SECRET_NAMES = (
    r"[\w.\-]*?(?:(?:secret|token|auth|credentials?)(?:[_\-.]?key)?|api[_\-.]?key|apikey|access[_\-.]?key|auth[_\-.]?key|private[_\-.]?key"
    r"|signing[_\-.]?key|encryption[_\-.]?key|master[_\-.]?key|license[_\-.]?key|client[_\-.]?key|app[_\-.]?key"
    # Any other ``<name>_key`` and camel-case ``<name>Key`` (``cashboard_key``, ``storageAccountKey``); ``monkey``
    # and ``hockey`` are words.
    r"|[_\-.]key|(?-i:(?<=[a-z0-9])Key)"
    r")"
)


# Public and publishable keys are meant to be seen; a CSRF token is a per-page form value.
_NOT_SECRET_NAMES = r"(?i)public|publishable|csrf|xsrf"

# The three base64url parts of a JWT after ``eyJ`` (its header's ``{"``).
_JWT_BODY = r"eyJ[A-Za-z0-9_\-]+\.eyJ[A-Za-z0-9_\-]+\.[A-Za-z0-9_\-]+"


def _value(least: int, unquoted: str) -> str:
    """The secret group: everything between quotes, or a run of ``unquoted`` characters when there are none."""
    # Unquoted, the whole run (possessive) and not a call: ``x = SomeClass2(config)`` assigns no value.
    # Quoted, up to the same quote, past escaped ones: ``"Tr0ub'4dor&3"`` and ``"Tr0ub\\"4dor"`` are one value
    # (redacting to the escape would leave the rest, and break a JSON text).
    quoted = "|".join(rf"(?<={q})(?:[^{q}\\\n]|\\.){{{least},2000}}(?={q})" for q in ('"', "'", "`"))
    return rf"(?P<secret>{quoted}|(?<![\"'`]){unquoted}{{{least},}}+(?!\())"


def _r(pattern: str, flags: int = 0) -> re.Pattern[str]:
    return re.compile(pattern, flags)


def _rule(
    id: str,
    pattern: str,
    keywords: str,
    *,
    entropy: float = 0.0,
    accept: Callable[[str, bool], bool] | None = None,
    flags: int = 0,
    not_names: str | None = None,
    placeholders_checked: bool = True,
) -> SecretRule:
    return SecretRule(
        id,
        _r(pattern, flags),
        tuple(keywords.lower().split()),
        entropy,
        accept,
        _r(not_names) if not_names else None,
        placeholders_checked,
    )


SECRET_RULES: tuple[SecretRule, ...] = (
    # Private keys (PEM, OpenSSH, PGP, PuTTY, age), also inside JSON strings where newlines are ``\n``.
    # The body holds no ``-----`` (so each header is read up to the next one, never to the end of the text: many
    # headers without a footer cost one pass); a block cut short (``head -c``, a capped result) is its header
    # and the base64 lines that follow it.
    _rule(
        "private-key",
        r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[^-]*(?:-(?!----)[^-]*)*-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----"
        r"|(?:(?:\s|\\[rn])+(?:[A-Za-z][\w\-]*:[^\n\\]*|[A-Za-z0-9+/=]+))+)",
        "PRIVATE",
        accept=_key_body,
        placeholders_checked=False,
    ),
    _rule(
        "putty-private-key",
        # Up to the next key file's header at most: many headers without a MAC cost one pass.
        r"PuTTY-User-Key-File-\d: (?:(?!PuTTY-User-Key-File)[\s\S])*?Private-MAC: [0-9a-f]{40,64}",
        "PuTTY-User-Key-File",
        placeholders_checked=False,
    ),
    _rule("age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}", "AGE-SECRET-KEY"),
    # Cloud providers
    _rule("aws-access-key-id", _B + r"(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])[A-Z2-7]{16}" + _E, "AKIA ASIA ABIA ACCA A3T"),
    _rule(
        "aws-secret-access-key",
        r"(?i)aws[\w.\-]{0,20}?(?:secret|sk)[\w.\-]{0,20}"
        + _ASSIGN
        + r"(?P<secret>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "aws",
    ),
    _rule(
        "aws-session-token",
        r"(?i)aws[\w.\-]{0,20}?session[\w.\-]{0,10}token" + _ASSIGN + r"(?P<secret>[A-Za-z0-9/+=]{100,})",
        "aws",
    ),
    _rule("aws-bedrock-api-key", _B + r"ABSK[A-Za-z0-9+/]{100,}={0,2}", "ABSK"),
    _rule("gcp-api-key", _B + r"AIza[0-9A-Za-z_\-]{35}" + _E, "AIza"),
    _rule("gcp-oauth-client-secret", _B + r"GOCSPX-[A-Za-z0-9_\-]{28}" + _E, "GOCSPX"),
    _rule("gcp-oauth-access-token", _B + r"ya29\.[0-9A-Za-z_\-]{30,}", "ya29"),
    _rule(
        "gcp-service-account-key-id",
        r"""(?i)"private_key_id"\s*:\s*"(?P<secret>[a-f0-9]{40})\"""",
        "private_key_id",
    ),
    _rule(
        "azure-storage-account-key",
        r"(?i)AccountKey=(?P<secret>[A-Za-z0-9+/]{60,}={0,2})",
        "AccountKey",
    ),
    _rule(
        "azure-sas-signature",
        r"(?i)[?&]sig=(?P<secret>[A-Za-z0-9%+/]{40,}(?:%3D|=){0,2})",
        "sig=",
    ),
    _rule(
        "azure-ad-client-secret",
        r"(?<![A-Za-z0-9_~.\-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.\-]{31,34}(?![A-Za-z0-9_~.\-])",
        "Q~",
    ),
    _rule("alibaba-access-key-id", _B + r"LTAI[A-Za-z0-9]{20}" + _E, "LTAI"),
    _rule("digitalocean-token", _B + r"do[opr]_v1_[a-f0-9]{64}" + _E, "dop_v1 doo_v1 dor_v1"),
    _rule("heroku-api-key-v2", _B + r"HRKU-AA[0-9A-Za-z_\-]{58}" + _E, "HRKU-"),
    _rule(
        "heroku-api-key",
        r"(?i)(?<![a-z])heroku[\w.\-]{0,20}"
        + _ASSIGN
        + r"(?P<secret>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})",
        "heroku",
    ),
    _rule("cloudflare-origin-ca-key", _B + r"v1\.0-[a-f0-9]{24}-[a-f0-9]{146}" + _E, "v1.0-"),
    _rule("databricks-token", _B + r"dapi[a-f0-9]{32}(?:-\d)?" + _E, "dapi"),
    _rule("flyio-token", _B + r"fo1_[\w\-]{43}" + _E + r"|FlyV1 fm\d+_[A-Za-z0-9+/=,_\-]{100,}", "fo1_ FlyV1"),
    _rule("terraform-cloud-token", r"(?i)[a-z0-9]{14}\.atlasv1\.[a-z0-9\-_=]{60,70}", "atlasv1"),
    _rule("pulumi-token", _B + r"pul-[a-f0-9]{40}" + _E, "pul-"),
    _rule("doppler-token", _B + r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}" + _E, "dp.pt dp.st dp.sa dp.ct"),
    # Code hosting and packages
    # GitHub App installation tokens also come as ``ghs_<installation id>_<JWT>``.
    _rule(
        "github-token",
        _B + r"(?:gh[pousr]_[A-Za-z0-9]{36,255}|ghs_\d{1,20}_" + _JWT_BODY + ")" + _E,
        "ghp_ gho_ ghu_ ghs_ ghr_",
    ),
    _rule("github-fine-grained-pat", _B + r"github_pat_[A-Za-z0-9_]{82}" + _E, "github_pat_"),
    _rule(
        "gitlab-token",
        _B + r"gl(?:pat|dt|rt|ptt|cbt|ft|soat|imt|oas|agent)-[A-Za-z0-9_\-]{20,}" + _E,
        "glpat- gldt- glrt- glptt- glcbt- glft- glsoat- glimt- gloas- glagent-",
    ),
    _rule("gitlab-runner-registration-token", _B + r"GR1348941[A-Za-z0-9_\-]{20,}" + _E, "GR1348941"),
    _rule("bitbucket-app-password", _B + r"ATBB[A-Za-z0-9_=.\-]{32,}" + _E, "ATBB"),
    _rule("atlassian-api-token", _B + r"ATATT3[A-Za-z0-9_\-=]{180,}" + _E, "ATATT3"),
    _rule("npm-token", _B + r"npm_[A-Za-z0-9]{36}" + _E, "npm_"),
    _rule("npmrc-auth-token", r"(?i):_auth(?:Token)?\s*=\s*(?P<secret>[A-Za-z0-9+/=_\-.:]{20,})", "_auth"),
    _rule("pypi-token", _B + r"pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_\-]{50,}", "pypi-AgEI"),
    _rule("rubygems-token", _B + r"rubygems_[a-f0-9]{48}" + _E, "rubygems_"),
    _rule("clojars-token", r"(?i)CLOJARS_[a-z0-9]{60}", "clojars_"),
    _rule("dockerhub-token", _B + r"dckr_(?:pat|oat)_[A-Za-z0-9_\-]{27,}" + _E, "dckr_pat_ dckr_oat_"),
    _rule("docker-config-auth", r""""auth"\s*:\s*"(?P<secret>[A-Za-z0-9+/]{16,}={0,2})\"""", '"auth"'),
    _rule("jfrog-token", _B + r"(?:AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56})" + _E, "AKCp cmVmdGtu"),
    _rule("sourcegraph-token", _B + r"sgp_(?:[a-fA-F0-9]{16}_|local_)?[a-fA-F0-9]{40}" + _E, "sgp_"),
    _rule("sonarqube-token", _B + r"sq[pua]_[a-fA-F0-9]{40}" + _E, "sqp_ squ_ sqa_"),
    # Bundler's per-host credentials: ``BUNDLE_GEMS__CONTRIBSYS__COM=user:password`` (the host with dots as ``__``).
    _rule(
        "bundler-host-credentials",
        r"\bBUNDLE_(?:[A-Z0-9\-]+__)+[A-Z0-9\-]+[\"']?[ \t]*[=:][ \t]*[\"']?(?P<secret>[^\s\"':;]+:[^\s\"';&]+)",
        "BUNDLE_",
    ),
    # AI providers
    _rule(
        "openai-or-anthropic-key",
        _B + r"sk-(?:proj-|svcacct-|admin-|ant-(?:api|admin)\d\d-)?[A-Za-z0-9_\-]{20,}" + _E,
        "sk-",
        accept=_random_run,
    ),
    # Exactly 34 characters after the prefix: a longer run is an identifier that shares it
    # (``hf_requiredCharacteristicTypesForDisplayMetadata``).
    _rule("huggingface-token", _B + r"(?:hf|api_org)_[A-Za-z0-9]{34}" + _E, "hf_ api_org_"),
    _rule("perplexity-key", _B + r"pplx-[A-Za-z0-9]{48}" + _E, "pplx-"),
    _rule("groq-key", _B + r"gsk_[A-Za-z0-9]{52}" + _E, "gsk_"),
    _rule("xai-key", _B + r"xai-[A-Za-z0-9]{80}" + _E, "xai-"),
    _rule("replicate-token", _B + r"r8_[A-Za-z0-9]{37}" + _E, "r8_"),
    # LangSmith personal (``pt``) and service (``sk``) keys: 32 hex, an underscore, 10 hex.
    _rule("langsmith-key", _B + r"lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10}" + _E, "lsv2_"),
    # Pinecone API keys: ``pcsk_``, a key id of 5 or 6 characters, ``_`` and 63 characters.
    _rule("pinecone-key", _B + r"pcsk_[A-Za-z0-9]{5,6}_[A-Za-z0-9]{63}" + _E, "pcsk_"),
    # Payments
    _rule("stripe-key", _B + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}" + _E, "sk_live_ sk_test_ rk_live_ rk_test_"),
    _rule("stripe-webhook-secret", _B + r"whsec_[A-Za-z0-9+/=]{32,}", "whsec_"),
    _rule(
        "square-token",
        _B + r"(?:EAAA[A-Za-z0-9_\-]{60}|sq0atp-[0-9A-Za-z_\-]{22}|sq0csp-[0-9A-Za-z_\-]{43})" + _E,
        "EAAA sq0atp- sq0csp-",
    ),
    # 32 hex characters, and the longer mixed-case ones of Shopify's changelog ("token lengths are increasing").
    _rule("shopify-token", _B + r"shp(?:at|ca|pa|ss)_[A-Za-z0-9]{32,64}" + _E, "shpat_ shpca_ shppa_ shpss_"),
    _rule(
        "flutterwave-key",
        _B + r"FLW(?:SECK|PUBK)(?:_TEST)?-[a-hA-H0-9]{32}-X" + _E + r"|FLWSECK_TEST[a-h0-9]{12}",
        "FLW",
    ),
    _rule("paypal-braintree-token", _B + r"access_token\$production\$[0-9a-z]{16}\$[0-9a-f]{32}", "access_token$"),
    # Messaging, email, SaaS
    # Slack tokens carry the workspace's and user's numeric ids after the prefix (``xoxb-<id>-<id>-<secret>``).
    _rule("slack-token", _B + r"xox[abposre]-\d+-[A-Za-z0-9\-]{10,}", "xoxa- xoxb- xoxp- xoxo- xoxs- xoxr- xoxe-"),
    _rule("slack-app-token", _B + r"xapp-\d-[A-Z0-9]+-\d+-[a-f0-9]+" + _E, "xapp-"),
    _rule(
        "slack-webhook-url",
        r"(?i)hooks\.slack\.com/(?:services|workflows|triggers)/(?P<secret>[A-Za-z0-9+/_\-]{20,})",
        "hooks.slack.com",
    ),
    _rule(
        "discord-webhook-url",
        r"(?i)discord(?:app)?\.com/api/webhooks/\d+/(?P<secret>[A-Za-z0-9_\-]{60,})",
        "discord",
    ),
    _rule(
        "teams-webhook-url",
        r"(?i)\.webhook\.office\.com/webhookb2/(?P<secret>[a-z0-9\-@/]{100,})",
        "webhook.office.com",
    ),
    _rule("discord-bot-token", _B + r"[MN][A-Za-z0-9]{23,25}\.[A-Za-z0-9_\-]{6}\.[A-Za-z0-9_\-]{27,38}" + _E, "."),
    _rule("telegram-bot-token", r"(?<!\d)\d{8,10}:AA[A-Za-z0-9_\-]{33}" + _E, ":AA"),
    _rule("sendgrid-key", _B + r"SG\.[A-Za-z0-9_\-]{22}\.[A-Za-z0-9_\-]{43}" + _E, "SG."),
    _rule("sendinblue-key", _B + r"xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16}" + _E, "xkeysib-"),
    _rule("mailgun-key", _B + r"(?:key|pubkey)-[0-9a-z]{32}" + _E, "key-"),
    _rule(
        "mailgun-signing-key",
        r"(?i)(?<![a-z])mailgun[\w.\-]{0,20}" + _ASSIGN + r"(?P<secret>[a-f0-9]{32}-[a-f0-9]{8}-[a-f0-9]{8})",
        "mailgun",
    ),
    _rule("mailchimp-key", _B + r"[0-9a-f]{32}-us\d{1,2}" + _E, "-us"),
    _rule("twilio-api-key", _B + r"SK[0-9a-fA-F]{32}" + _E, "SK"),
    _rule(
        "twilio-auth-token",
        r"(?i)(?<![a-z])twilio[\w.\-]{0,20}(?:auth|token|secret)[\w.\-]{0,10}"
        + _ASSIGN
        + r"(?P<secret>[a-f0-9]{32})"
        + _E,
        "twilio",
    ),
    _rule(
        "datadog-key",
        r"(?i)(?:datadog|\bdd)[\w.\-]{0,20}(?:api|app|application|client)[\w.\-]{0,10}key"
        + _ASSIGN
        + r"(?P<secret>[a-f0-9]{32}(?:[a-f0-9]{8})?)"
        + _E,
        "datadog dd_ dd-",
    ),
    # User, REST, insights insert and query, and browser keys carry a prefix; license keys end in ``NRAL``.
    _rule(
        "newrelic-key",
        _B + r"(?:NR(?:AK|JS|II)-[A-Za-z0-9]{19,32}|NRI[IQ]-[A-Za-z0-9_\-]{25,32}|NRBR-[a-f0-9]{19}"
        r"|(?:eu01xx[a-fA-F0-9]{30}|[a-fA-F0-9]{36})NRAL)" + _E,
        "NRAK- NRJS- NRII- NRIQ- NRBR- NRAL",
    ),
    _rule("grafana-token", _B + r"(?:glc_[A-Za-z0-9+/]{32,}={0,2}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8})", "glc_ glsa_"),
    _rule("sentry-token", _B + r"(?:sntrys_eyJ[A-Za-z0-9+/=_\-]{50,}|sntryu_[a-f0-9]{64})", "sntrys_ sntryu_"),
    _rule("linear-key", _B + r"lin_(?:api|oauth)_[A-Za-z0-9]{40}" + _E, "lin_api_ lin_oauth_"),
    _rule("notion-token", _B + r"(?:secret_[A-Za-z0-9]{43}|ntn_[0-9]{11}[A-Za-z0-9]{35})" + _E, "secret_ ntn_"),
    _rule("postman-key", _B + r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}" + _E, "PMAK-"),
    _rule("planetscale-token", _B + r"pscale_(?:tkn|oauth|pw)_[A-Za-z0-9_\-.=]{32,64}" + _E, "pscale_"),
    _rule("readme-key", _B + r"rdme_[a-z0-9]{70}" + _E, "rdme_"),
    _rule("dropbox-token", _B + r"sl\.[A-Za-z0-9_\-=]{130,}", "sl."),
    _rule("facebook-token", _B + r"EAA[A-Za-z0-9]{100,}" + _E, "EAA"),
    # Tailscale API, auth, OAuth client, SCIM and webhook keys: ``tskey-<kind>-<key id>-<secret>``.
    _rule("tailscale-key", _B + r"tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}" + _E, "tskey-"),
    # Vercel's prefixed personal, integration, app, refresh and API keys.
    _rule("vercel-token", _B + r"vc[pikar]_[A-Za-z0-9]{24,80}" + _E, "vcp_ vci_ vck_ vca_ vcr_"),
    _rule("figma-token", _B + r"figd_[A-Za-z0-9_\-]{40}" + _E, "figd_"),
    _rule("airtable-token", _B + r"pat[A-Za-z0-9]{14}\.[a-f0-9]{64}" + _E, "pat"),
    _rule(
        "okta-token", r"(?i)(?<![a-z])okta[\w.\-]{0,20}" + _ASSIGN + r"(?P<secret>00[A-Za-z0-9_\-]{40})" + _E, "okta"
    ),
    _rule("1password-token", _B + r"ops_eyJ[A-Za-z0-9+/]{250,}={0,3}", "ops_eyJ"),
    _rule("vault-token", _B + r"hv[sb]\.[A-Za-z0-9_\-]{90,}" + _E, "hvs. hvb."),
    # Vault service tokens before 1.10: ``s.`` and 24 letters and digits, mixed case.
    # (The literal first and the boundary looked behind it lets ``re`` skip ahead to each ``s.``: this rule's
    # keyword is in nearly every text.)
    _rule("vault-legacy-token", r"s\.(?<![\w.\-/]s\.)[A-Za-z0-9]{24}" + _E, "s.", accept=_mixed),
    # 1Password account Secret Key: ``A3-`` then the account id and five groups (34 characters).
    _rule(
        "1password-secret-key",
        _B + r"A3-[A-Z0-9]{6}-(?:[A-Z0-9]{11}|[A-Z0-9]{6}-[A-Z0-9]{5})-[A-Z0-9]{5}-[A-Z0-9]{5}-[A-Z0-9]{5}" + _E,
        "A3-",
    ),
    # Facebook app access token: the app id, a pipe (or %7C in a URL), the app secret or client token.
    _rule(
        "facebook-app-access-token",
        r"(?<![\w])\d{15,16}(?:\||%7[Cc])(?P<secret>[0-9A-Za-z_\-]{27,40})" + _E,
        "facebook access_token fb_ fb-",
        entropy=3.0,
    ),
    # Not after a dot or a slash: ``video_box.ico-<md5>.png`` is a file name with a content hash.
    _rule("infracost-token", r"(?<![\w.\-/])ico-[A-Za-z0-9]{32}" + _E, "ico-"),
    _rule("intra42-client-secret", _B + r"s-s4t2(?:ud|af)-[a-f0-9]{64}" + _E, "s-s4t2"),
    _rule("easypost-token", _B + r"EZ[AT]K[A-Za-z0-9]{54}" + _E, "EZAK EZTK"),
    # OpenShift's OAuth access tokens: ``sha256~`` and 43 base64url characters.
    _rule("openshift-token", _B + r"sha256~[A-Za-z0-9_\-]{43}" + _E, "sha256~"),
    _rule("adobe-client-secret", _B + r"p8e-[A-Za-z0-9]{32}" + _E, "p8e-"),
    # Structured credentials
    _rule("jwt", _B + r"eyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]*", "eyJ"),
    _rule("bearer-token", r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)", "bearer", entropy=2.5),
    _rule(
        "basic-auth-header",
        r"(?i)\bauthorization\s*:\s*basic\s+(?P<secret>[A-Za-z0-9+/]{8,}={0,2})",
        "basic",
        accept=_basic_credentials,
    ),
    # Other authentication headers: ``Authorization: Token ...``, ``Authorization: <key>``, ``X-API-Key: ...``,
    # ``Api-Token: ...`` (Bearer and Basic have their own rules above).
    _rule(
        "auth-header",
        # Header names are hyphenated (``X-API-Key``), not ``AWS::AppSync::ApiKey`` (a CloudFormation type).
        r"(?i)(?<![\w\-:])(?:proxy-)?(?:authorization|x-api-key|api-key|api-token|x-auth-token|x-access-token"
        r"|private-token)[\"']?[ \t]*[:=][ \t]*[\"']?(?!(?:bearer|basic)\b)(?:[A-Za-z][\w\-]{1,20}[ \t]+)?"
        r"(?P<secret>[A-Za-z0-9\-._~+/@=]{8,}(?<![.,]))",
        "authorization api-key api-token auth-token access-token private-token",
        accept=_header_value,
    ),
    # curl's ``-u`` / ``--user user:password`` (also a token as the user name, ``-u sk_live_...:``), on one line or
    # continued with backslashes.
    _rule(
        "curl-user-credentials",
        # Up to the next ``curl`` at most: a line of many ``curl`` words costs one pass.
        r"\bcurl\b(?:(?!curl\b)[^\n]|\\\n)*?\s(?:-u|--user)[ \t]+(?P<secret>(?:\"[^\"\n]*\"|'[^'\n]*'|[^\s\"'])+)",
        "curl",
        accept=_credential_pair,
    ),
    _rule(
        "url-password",
        # The user name again as the password (``postgres://postgres:postgres@localhost``) is a local default.
        r"(?i)\b[a-z][a-z0-9+.\-]{1,20}://(?P<user>[^\s:/@'\"<>]{0,64}):(?!(?P=user)@)"
        # An ``@`` in the password (``admin:p@ss@db``, unescaped as people write it): up to the last one.
        r"(?P<secret>[^\s@/'\"<>](?:[^\s/'\"<>]{0,126}[^\s@/'\"<>])?)@[a-z0-9\[]",
        "://",
        accept=_url_password,
    ),
    _rule(
        "connection-string-password",
        r"(?i)(?:^|;)\s*(?:password|pwd)\s*=\s*(?P<secret>[^;\s\"']{3,})\s*(?=;|$)",
        "password= pwd=",
        accept=_connection_password,
    ),
    # Command lines: ``--password Hunter2``, ``--api-key=...``, mysql's ``-pHunter2``.
    _rule(
        "command-line-secret",
        r"(?i)(?<![\w\-])--(?:[\w\-]*[\-_])?(?:password|passwd|token|secret|api[\-_]?key|access[\-_]?key)"
        r"(?:[ \t]+|=)(?!-)[\"'`]?" + _value(6, r"[^\s\"'`]"),
        "--",
        accept=_flag_value,
    ),
    _rule(
        "mysql-password-flag",
        r"\b(?i:mysql(?:dump|admin|import|sh)?)\b(?:(?!(?i:mysql))[^\n])*?[ \t]-p(?P<secret>[^\s\"'\-][^\s\"']{3,})",
        "mysql",
        accept=_flag_value,
    ),
    # SQL: ``CREATE USER ... IDENTIFIED BY '...'``, ``WITH PASSWORD '...'``, ``SET PASSWORD FOR u = '...'``.
    _rule(
        "sql-password",
        r"(?i)\b(?:identified[ \t]+(?:with[ \t]+\w+[ \t]+)?by|password(?:[ \t]+for[ \t]+\S+[ \t]*=)?)"
        r"[ \t]+'(?P<secret>[^'\n]{4,128})'",
        "identified password",
        accept=_flag_value,
    ),
    # Keyword context: a value assigned to a name that says it is secret.
    _rule(
        "password-assignment",
        r"(?i)(?<![\w.\-])" + _PASSWORD_NAMES + r"(?![A-Za-z])" + _ASSIGN + _value(4, r"[^\s\"'`,;]"),
        "pass pwd",
        accept=_literal_value,
    ),
    # The same names as XML elements: Jenkins' ``credentials.xml`` (``<secret>{AQAAABAAA...}</secret>``), Maven's
    # ``settings.xml`` (``<password>``), ``<account_key>``; the element's text is the value, as if quoted.
    _rule(
        "password-xml-element",
        r"(?i)<(?P<name>" + _PASSWORD_NAMES + r")>(?P<secret>[^<\n]{4,2000})</(?P=name)>",
        "pass pwd",
        accept=_element_password,
    ),
    _rule(
        "secret-xml-element",
        r"(?i)<(?P<name>" + _SECRET_NAMES + r")>(?P<secret>[^<\n]{12,2000})</(?P=name)>",
        "secret token key auth credential",
        entropy=3.0,
        accept=_element_secret,
        not_names=_NOT_SECRET_NAMES,
    ),
    _rule(
        "secret-assignment",
        # Not the name again: ``entity_mask2_token=entity_mask2_token`` passes a variable on.
        r"(?i)(?<![\w.\-])(?P<name>"
        + _SECRET_NAMES
        + r")(?![A-Za-z])"
        + _ASSIGN
        + r"(?!(?P=name)(?![\w\-.]))"
        + _value(12, r"[A-Za-z0-9+/=_\-.~:]"),
        "secret token key auth credential",
        entropy=3.0,
        accept=_random_value,
        not_names=_NOT_SECRET_NAMES,
    ),
)
"""Every rule ``redact_secrets`` applies, in order."""


def find_secrets(text: str, rules: tuple[SecretRule, ...] = SECRET_RULES) -> list[SecretMatch]:
    """Every secret ``rules`` find in ``text``, overlapping finds merged, in text order.

    Also read: the text's decoded view around what it decoded (``stopwise.guardrails._decoded``: percent-escapes,
    escaped quotes, HTML entities, invisible characters), each find mapped back to the span it was decoded from;
    and each run of base64 that decodes to text, once (a secret found in it takes the whole run)."""
    spans = _scan(text, rules) + _scan_view(text, rules)
    for m in _BASE64_RUN.finditer(text):
        decoded = _base64_text(m.group())
        if decoded is not None and (found := _scan(decoded, rules) or _scan_view(decoded, rules)):
            spans.append(SecretMatch(found[0].rule, m.start(), m.end()))
    return _merged(spans)


# A run of base64 (standard or URL-safe) long enough to hold ``password=`` and a value.
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{16,}={0,2}(?![A-Za-z0-9+/=_\-])")


def _base64_text(run: str) -> str | None:
    """The text a base64 run encodes, or None when it does not decode to printable UTF-8 (an identifier, a hash,
    binary data: random bytes are printable text about once in 10^6 for 12 bytes)."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:
        return None
    try:
        raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=b"-_" if "-" in body or "_" in body else None)
        decoded = raw.decode("utf-8")
    except (ValueError, UnicodeDecodeError):
        return None
    return decoded if decoded.replace("\n", "").replace("\r", "").replace("\t", "").isprintable() else None


def _scan_view(text: str, rules: tuple[SecretRule, ...]) -> list[SecretMatch]:
    """What the rules find in the decoded view's windows, as spans of ``text``."""
    view = decoded_view(text, numbers=False)
    if view is None:
        return []
    return [
        SecretMatch(s.rule, *view.source_span(lo + s.start, lo + s.end))
        for lo, hi in view.windows()
        for s in _scan(view.text[lo:hi], rules)
    ]


def _scan(text: str, rules: tuple[SecretRule, ...]) -> list[SecretMatch]:
    """What each rule finds in ``text`` as written, unmerged."""
    lowered = text.lower()
    spans: list[SecretMatch] = []
    for rule in rules:
        if not any(k in lowered for k in rule.keywords):
            continue
        for m in rule.pattern.finditer(text):
            start, end = m.span("secret") if "secret" in rule.pattern.groupindex else m.span()
            value = text[start:end]
            if rule.min_entropy and shannon_entropy(value) < rule.min_entropy:
                continue
            if rule.accept is not None and not rule.accept(value, start > 0 and text[start - 1] in "\"'`"):
                continue
            if rule.placeholders_checked and is_placeholder_token(value):
                continue
            if rule.not_names is not None and rule.not_names.search(m.group("name")):
                continue
            spans.append(SecretMatch(rule.id, start, end))
    return spans


def _merged(spans: list[SecretMatch]) -> list[SecretMatch]:
    spans.sort(key=lambda s: (s.start, -s.end))
    merged: list[SecretMatch] = []
    for s in spans:
        if merged and s.start < merged[-1].end:
            last = merged[-1]
            merged[-1] = SecretMatch(last.rule, last.start, max(last.end, s.end))
        else:
            merged.append(s)
    return merged


def redact_text(text: str, rules: tuple[SecretRule, ...] = SECRET_RULES) -> str:
    """``text`` with every secret ``rules`` find replaced by ``[redacted]``."""
    found = find_secrets(text, rules)
    if not found:
        return text
    parts = []
    at = 0
    for s in found:
        parts.append(text[at : s.start])
        parts.append(REDACTED)
        at = s.end
    parts.append(text[at:])
    return "".join(parts)
