"""Realistic secrets, one per format, built at run time from each vendor's published token format.

Each sample is written from the vendor's documentation of its format (prefix, alphabet, length, structure), not
from the patterns in ``stopwise.guardrails._secrets``; the random part comes from a seeded generator, so the
table is the same on every run. Secrets are assembled from parts ("sk" + "_live_" + ...) so no full token sits
in this file. Each sample is shown in a context where such a secret turns up in a tool result: an env file, a
JSON config, a log line, a shell command, prose.

Used by ``tests/test_builtins_secrets.py`` (at least 57 of these must be caught) and by
``evals/guardrail_builtins.py`` (which prints the coverage).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

__all__ = ["SecretSample", "secret_samples"]

UPPER = string.ascii_uppercase
LOWER = string.ascii_lowercase
DIGITS = string.digits
ALNUM = UPPER + LOWER + DIGITS
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
B64URL = ALNUM + "-_"
B32 = UPPER + "234567"


@dataclass(frozen=True)
class SecretSample:
    format: str
    """Which vendor format, in words."""
    secret: str
    """The secret itself: none of it may survive redaction."""
    text: str
    """The secret in a realistic context."""


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def secret_samples(seed: int = 20261201) -> list[SecretSample]:
    """The table: at least 60 formats."""
    rng = random.Random(seed)

    def r(alphabet: str, n: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(n))

    out: list[SecretSample] = []

    def add(fmt: str, secret: str, template: str) -> None:
        out.append(SecretSample(fmt, secret, template.format(s=secret)))

    # Cloud providers: AWS access key ids are 20 characters, a 4-letter kind prefix then base32.
    add("AWS access key id (AKIA)", "AK" + "IA" + r(B32, 16), "aws_access_key_id = {s}")
    add(
        "AWS temporary key id (ASIA)",
        "AS" + "IA" + r(B32, 16),
        '{{"Credentials": {{"AccessKeyId": "{s}", "Expiration": "2026-12-01T15:00:00Z"}}}}',
    )
    add("AWS secret access key", r(B64, 40), "aws_secret_access_key = {s}")
    add("AWS secret access key (env)", r(B64, 40), "export AWS_SECRET_ACCESS_KEY={s}")
    add("AWS session token", "FwoGZXIvYXdzE" + r(B64, 300), '"SessionToken": "{s}",')
    add("Google API key", "AI" + "za" + r(B64URL, 35), "https://maps.googleapis.com/maps/api/geocode/json?key={s}")
    add("Google OAuth client secret", "GOC" + "SPX-" + r(B64URL, 28), '"client_secret": "{s}"')
    add("Google OAuth access token", "ya" + "29." + r(B64URL, 120), "token: {s}")
    pem_body = "\\n".join(base64.b64encode(rng.randbytes(48)).decode() for _ in range(20))
    gcp_key = f"-----BEGIN PRIVATE KEY-----\\n{pem_body}\\n-----END PRIVATE KEY-----\\n"
    gcp_json = json.dumps(
        {
            "type": "service_account",
            "project_id": "acme-prod",
            "private_key_id": r(HEX, 40),
            "private_key": "@@KEY@@",
            "client_email": "deployer@acme-prod.iam.gserviceaccount.com",
        }
    ).replace("@@KEY@@", gcp_key)
    add(
        "GCP service account key (JSON)",
        gcp_key,
        gcp_json.replace("{", "{{").replace("}", "}}").replace(gcp_key, "{s}"),
    )
    add(
        "Azure storage account key",
        r(B64, 86) + "==",
        "DefaultEndpointsProtocol=https;AccountName=acmelogs;AccountKey={s};EndpointSuffix=core.windows.net",
    )
    add(
        "Azure SAS token signature",
        r(ALNUM, 43) + "%3D",
        "https://acmelogs.blob.core.windows.net/c/f.txt?sv=2022-11-02&ss=b&srt=o&sp=r&se=2026-12-31&sig={s}",
    )
    add("Azure AD client secret", r(ALNUM, 3) + r(DIGITS, 1) + "Q~" + r(ALNUM + "_~.-", 34), "AZURE_CLIENT_SECRET={s}")
    add("Alibaba Cloud access key id", "LT" + "AI" + r(ALNUM, 20), "accessKeyId: {s}")
    add("DigitalOcean personal access token", "do" + "p_v1_" + r(HEX, 64), "doctl auth init -t {s}")
    add("Heroku API key (HRKU)", "HR" + "KU-AA" + r(B64URL, 58), "HEROKU_API_KEY={s}")
    add("Databricks token", "da" + "pi" + r(HEX, 32), "DATABRICKS_TOKEN={s}")
    add("HashiCorp Vault token", "hv" + "s." + r(B64URL, 92), "VAULT_TOKEN={s}")
    add("Doppler service token", "dp" + ".st." + r(ALNUM, 43), "DOPPLER_TOKEN={s}")
    # Code hosting and package registries
    add("GitHub classic PAT", "gh" + "p_" + r(ALNUM, 36), "git remote set-url origin https://x:{s}@github.com/acme/app")
    add("GitHub OAuth token", "gh" + "o_" + r(ALNUM, 36), "GITHUB_TOKEN={s}")
    add("GitHub app installation token", "gh" + "s_" + r(ALNUM, 36), "token {s} expires in 1h")
    add(
        "GitHub fine-grained PAT",
        "github" + "_pat_" + r(ALNUM, 22) + "_" + r(ALNUM, 59),
        "gh auth login --with-token {s}",
    )
    add(
        "GitLab personal access token",
        "gl" + "pat-" + r(B64URL, 20),
        'curl --header "PRIVATE-TOKEN: {s}" https://gitlab.example.com/api/v4/projects',
    )
    add("GitLab deploy token", "gl" + "dt-" + r(B64URL, 20), "deploy token: {s}")
    add("GitLab runner token", "gl" + "rt-" + r(B64URL, 20), "gitlab-runner register --token {s}")
    add("npm access token", "np" + "m_" + r(ALNUM, 36), "NPM_TOKEN={s}")
    add("npm .npmrc auth token", r(B64, 40) + "=", "//registry.npmjs.org/:_authToken={s}")
    add("PyPI API token", "pypi-" + "AgEIcHlwaS5vcmc" + r(B64URL, 120), "TWINE_PASSWORD={s}")
    add("Docker Hub PAT", "dck" + "r_pat_" + r(B64URL, 27), "docker login -u acme -p {s}")
    add(
        "Docker config auth",
        base64.b64encode(b"acme:" + r(ALNUM, 20).encode()).decode(),
        '{{"auths": {{"https://index.docker.io/v1/": {{"auth": "{s}"}}}}}}',
    )
    add("RubyGems API key", "ruby" + "gems_" + r(HEX, 48), "GEM_HOST_API_KEY={s}")
    add("Atlassian API token", "ATA" + "TT3" + r(B64URL, 186), "JIRA_API_TOKEN={s}")
    # AI providers
    add("OpenAI project key", "sk-" + "proj-" + r(B64URL, 156), "OPENAI_API_KEY={s}")
    add("OpenAI legacy key", "sk-" + r(ALNUM, 20) + "T3Blbk" + "FJ" + r(ALNUM, 20), "openai.api_key = '{s}'")
    add("Anthropic API key", "sk-" + "ant-api03-" + r(B64URL, 93) + "AA", "x-api-key: {s}")
    add("Hugging Face token", "h" + "f_" + r(ALNUM, 34), "huggingface-cli login --token {s}")
    add("Perplexity API key", "pp" + "lx-" + r(ALNUM, 48), "PERPLEXITY_API_KEY={s}")
    add("Groq API key", "gs" + "k_" + r(ALNUM, 52), "GROQ_API_KEY={s}")
    add("Replicate token", "r" + "8_" + r(ALNUM, 37), "REPLICATE_API_TOKEN={s}")
    # Payments
    add("Stripe live secret key", "sk" + "_live_" + r(ALNUM, 99), 'stripe.api_key = "{s}"')
    add("Stripe restricted key", "rk" + "_live_" + r(ALNUM, 99), "Restricted key created: {s}")
    add("Stripe test secret key", "sk" + "_test_" + r(ALNUM, 99), "STRIPE_SECRET_KEY={s}")
    add("Stripe webhook secret", "wh" + "sec_" + r(ALNUM, 32), "STRIPE_WEBHOOK_SECRET={s}")
    add("Square access token", "EA" + "AA" + r(B64URL, 60), "SQUARE_ACCESS_TOKEN={s}")
    add("Shopify admin token", "sh" + "pat_" + r(HEX, 32), "X-Shopify-Access-Token: {s}")
    # Messaging, email, SaaS
    add(
        "Slack bot token",
        "xo" + "xb-" + r(DIGITS, 12) + "-" + r(DIGITS, 13) + "-" + r(ALNUM, 24),
        "SLACK_BOT_TOKEN={s}",
    )
    add(
        "Slack user token",
        "xo" + "xp-" + r(DIGITS, 12) + "-" + r(DIGITS, 12) + "-" + r(DIGITS, 13) + "-" + r(HEX, 32),
        "token={s}",
    )
    add(
        "Slack webhook URL",
        "T" + r(UPPER + DIGITS, 8) + "/B" + r(UPPER + DIGITS, 10) + "/" + r(ALNUM, 24),
        "curl -X POST https://hooks.slack.com/services/{s} -d @msg.json",
    )
    add("Discord webhook URL", r(B64URL, 68), "https://discord.com/api/webhooks/" + r(DIGITS, 18) + "/{s}")
    add("Telegram bot token", r(DIGITS, 10) + ":AA" + r(B64URL, 33), "https://api.telegram.org/bot{s}/getMe")
    add("SendGrid API key", "S" + "G." + r(B64URL, 22) + "." + r(B64URL, 43), "SENDGRID_API_KEY={s}")
    add(
        "Mailgun private API key",
        "ke" + "y-" + r(HEX + "ghijklmnopqrstuvwxyz", 32),
        "curl -s --user 'api:{s}' https://api.mailgun.net/v3/",
    )
    add(
        "Mailgun webhook signing key", r(HEX, 32) + "-" + r(HEX, 8) + "-" + r(HEX, 8), "MAILGUN_WEBHOOK_SIGNING_KEY={s}"
    )
    add("Mailchimp API key", r(HEX, 32) + "-us" + str(rng.randint(1, 21)), "MAILCHIMP_API_KEY={s}")
    add("Twilio API key", "S" + "K" + r(HEX, 32), "TWILIO_API_KEY={s}")
    add("Twilio auth token", r(HEX, 32), "TWILIO_AUTH_TOKEN={s}")
    add("Datadog API key", r(HEX, 32), "DD_API_KEY={s}")
    add("Datadog application key", r(HEX, 40), "datadog_app_key: {s}")
    add("New Relic user key", "NR" + "AK-" + r(UPPER + DIGITS, 27), "NEW_RELIC_API_KEY={s}")
    add("Grafana service account token", "gl" + "sa_" + r(ALNUM, 32) + "_" + r(HEX, 8), "GRAFANA_TOKEN={s}")
    add("Sentry user token", "sn" + "tryu_" + r(HEX, 64), "SENTRY_AUTH_TOKEN={s}")
    add("Linear API key", "lin" + "_api_" + r(ALNUM, 40), "LINEAR_API_KEY={s}")
    add("Notion integration token", "nt" + "n_" + r(DIGITS, 11) + r(ALNUM, 35), "NOTION_TOKEN={s}")
    add("Postman API key", "PM" + "AK-" + r(HEX, 24) + "-" + r(HEX, 34), "x-api-key: {s}")
    # Structured credentials
    header = _b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = _b64url(json.dumps({"sub": "user_" + r(DIGITS, 6), "iat": 1764590000, "role": "admin"}).encode())
    add(
        "JWT (no Bearer prefix)",
        f"{header}.{payload}.{_b64url(rng.randbytes(32))}",
        '{{"access_token": "{s}", "expires_in": 3600}}',
    )
    add("Bearer token in a header", r(B64URL, 40), "Authorization: Bearer {s}")
    add("Basic auth header", base64.b64encode(b"admin:" + r(ALNUM, 14).encode()).decode(), "Authorization: Basic {s}")
    add("Password in a postgres URL", r(ALNUM, 16), "DATABASE_URL=postgres://app_user:{s}@db.internal:5432/app")
    add("Password in a mysql URL", r(ALNUM, 14), "mysql://root:{s}@127.0.0.1:3306/shop")
    add(
        "Password in an https URL",
        r(ALNUM, 12),
        "fetching https://deploy:{s}@artifacts.example.com/builds/latest.tar.gz",
    )
    add("Password in a mongodb+srv URL", r(ALNUM, 18), "mongodb+srv://svc:{s}@cluster0.ab12c.mongodb.net/prod")
    add("Password in a redis URL (no user)", r(ALNUM, 20), "REDIS_URL=redis://:{s}@cache:6379/0")
    add("DB_PASSWORD assignment", r(ALNUM, 10) + "#" + r(ALNUM, 4), "DB_PASSWORD={s}")
    add("password in JSON", r(ALNUM, 9) + "!" + r(DIGITS, 3), '{{"username": "svc-backup", "password": "{s}"}}')
    add("password in YAML", r(ALNUM, 12) + r(DIGITS, 2), "  password: {s}")
    add("password in prose", r(ALNUM, 8) + r(DIGITS, 2) + "?", "The wifi password is {s} (ask at reception).")
    add(
        "ODBC connection string password",
        r(ALNUM, 12) + r(DIGITS, 2),
        "Server=tcp:sql.acme.net,1433;Database=crm;User ID=svc;Password={s};Encrypt=True",
    )
    add("Django SECRET_KEY", "django-insecure-" + r(LOWER + DIGITS + "!@#$%^&*(-_=+)", 50), "SECRET_KEY = '{s}'")
    add("client_secret assignment", r(ALNUM, 40), 'client_secret = "{s}"')
    add("generic high-entropy API key", r(ALNUM, 32), "API_KEY={s}")
    add("generic access token (key: value)", r(B64URL, 48), "access_token: {s}")
    # Private keys
    body = "\n".join(base64.b64encode(rng.randbytes(48)).decode() for _ in range(12))
    for kind in ("RSA ", "EC ", "OPENSSH ", "DSA ", ""):
        key = f"-----BEGIN {kind}PRIVATE KEY-----\n{body}\n-----END {kind}PRIVATE KEY-----"
        add(f"PEM private key ({kind.strip() or 'PKCS#8'})", key, "$ cat id_key\n{s}\n$")
    add(
        "PGP private key block",
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{body}\n-----END PGP PRIVATE KEY BLOCK-----",
        "{s}",
    )
    add("age secret key", "AGE-SECRET-KEY-1" + r("QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L", 58), "# created: 2026-12-01\n{s}")
    return out
