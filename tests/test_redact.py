"""Secrets are masked in every shape the module claims; ordinary text is left alone."""

from __future__ import annotations

import pytest

from ctxlab.redact import has_secret, redact

SECRETS = [
    ("anthropic-key", "sk-ant-api03-" + "Zx9_Qw8-" * 4),
    ("openai-key", "sk-proj-" + "Ab1Cd2Ef3Gh4" * 3),
    ("openai-key", "sk-" + "a1B2c3D4e5" * 3),
    ("github-token", "ghp_" + "A1b2C3d4E5" * 4),
    ("github-token", "github_pat_" + "11ABCDEFG0" * 4),
    ("aws-key", "AKIAIOSFODNN7EXAMPLE"),
    ("slack-token", "xoxb-1234567890-abcdefABCDEF"),
    ("slack-token", "xoxp-1234567890-1234567890-abcd"),
    ("google-key", "AIza" + "SyD-9tSrke72PouQMnMX-a7eZSW0jkFMBWY"[:35]),
    ("huggingface-token", "hf_" + "aB3dE6gH9j" * 3 + "kLm"),
    ("stripe-key", "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"),
    ("jwt", "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N"),
]


@pytest.mark.parametrize(("kind", "secret"), SECRETS, ids=[f"{k}-{i}" for i, (k, _) in
                                                          enumerate(SECRETS)])
def test_each_known_shape_is_masked_in_running_text(kind: str, secret: str):
    text = f"the key is {secret}, keep it safe"
    out = redact(text)
    assert secret not in out
    assert out == f"the key is [REDACTED:{kind}], keep it safe"


def test_bearer_keeps_the_scheme_and_masks_the_credential():
    out = redact('curl -H "Authorization: Bearer abc123def456ghi789jkl" https://x')
    assert out == 'curl -H "Authorization: Bearer [REDACTED:bearer]" https://x'


@pytest.mark.parametrize("text", [
    "api_key=9f86d081884c7d659a2feaa0c55ad015",
    'API_KEY="q8Z2xW7vB4nM1kL0pO9iU8yT"',
    '{"access_token": "ya29a0AfH6SMBx1y2z3w4v5u6t"}',
    "password: hunter2hunter2hunter2",
    "CLIENT_SECRET = '3q2+7wAbCdEfGh12345=='",
])
def test_random_values_assigned_to_a_secret_name_are_masked(text: str):
    out = redact(text)
    assert "[REDACTED:secret]" in out or (
        text.startswith("password") and "[REDACTED:password]" in out)
    name = text.split("=")[0].split(":")[0]
    assert out.startswith(name)  # the name stays readable


@pytest.mark.parametrize("text, expected", [
    ("curl -H 'authorization: bearer 9f8e7d6c5b4a39281716abcdef'",
     "curl -H 'authorization: bearer [REDACTED:bearer]'"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZDEyMw==", "Authorization: Basic [REDACTED:basic]"),
    ("DB_PASSWORD=P@ssw0rd!2024-Secure#99", "DB_PASSWORD=[REDACTED:password]"),
    ("PGPASSWORD='Tr0ub4dor&3-horse-battery' psql", "PGPASSWORD='[REDACTED:password]' psql"),
    ('{"password": "hunter2hunter2x9"}', '{"password": "[REDACTED:password]"}'),
    ("postgres://app:s3cr3tPass@db:5432/x", "postgres://app:[REDACTED:url-password]@db:5432/x"),
    # not secrets: code, a call, a URL without credentials
    ("password: string | null;", "password: string | null;"),
    ("password = get_password()", "password = get_password()"),
    ("http://127.0.0.1:5432/db", "http://127.0.0.1:5432/db"),
    ("the basic ctxlab/loaders/registry.py module", "the basic ctxlab/loaders/registry.py module"),
    ("The bearer authentication-scheme is defined", "The bearer authentication-scheme is defined"),
    ("    password = get_password(user1)", "    password = get_password(user1)"),
    ("pwd_hash = hashlib.sha256(pw.encode())", "pwd_hash = hashlib.sha256(pw.encode())"),
    # a password holding @: masked whole, up to the @ before the host
    ("postgres://app:p@ss1@db/app", "postgres://app:[REDACTED:url-password]@db/app"),
])
def test_credentials_of_any_case_and_passwords_with_punctuation(text: str, expected: str):
    assert redact(text) == expected


def test_a_private_key_block_is_masked_whole():
    pem = ("-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\nabc\n"
           "-----END RSA PRIVATE KEY-----")
    assert redact(f"key:\n{pem}\ndone") == "key:\n[REDACTED:private-key]\ndone"


@pytest.mark.parametrize("text", [
    "token = get_token_from_environment()",
    "tokens_before=12345678901234567890",
    "the staging API key lives in the env var CTX_TOKEN_924E",
    "sk-short",
    "see /home/dev/projects/quillstack/src/task-runner-1234567890.py",
    "commit 9f86d081884c7d659a2feaa0c55ad015b3b0f00a",
    "",
])
def test_ordinary_text_is_left_alone(text: str):
    assert redact(text) == text
    assert not has_secret(text)


def test_redaction_is_idempotent_and_html_safe():
    text = "a sk-ant-api03-" + "k" * 30 + " and Bearer " + "z9" * 12
    once = redact(text)
    assert redact(once) == once
    assert not set("<>&\"'") & set(once)
