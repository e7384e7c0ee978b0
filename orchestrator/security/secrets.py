"""Secrets: which environment variables hold them, and masking their values in text."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping

# A name is secret when it holds SECRET, TOKEN, PASSWORD, PASSWD, CREDENTIAL or APIKEY anywhere
# (PGPASSWORD, SECRETKEY, GITHUB_TOKEN, AWS_SECRET_ACCESS_KEY), or KEY, PASS, PWD, AUTH as a
# word of its own (OPENAI_API_KEY, MYSQL_PWD, SMTP_PASS): not KEYBOARD, not PWD or OLDPWD (the
# current folder), not GIT_AUTHOR_NAME. A few well-known names that only look secret are not.
SECRET_NAME = re.compile(
    r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|APIKEY|(^|_)(KEY|PASS|AUTH)(_|$)|_PWD(_|$)",
    re.IGNORECASE,
)
NOT_SECRET = {"SSH_AUTH_SOCK", "TOKENIZERS_PARALLELISM"}
MIN_SECRET_LENGTH = 8
MASK = "[REDACTED]"
# The userinfo of a URL (`https://user:pass@host/`): whatever stands between `scheme://` and
# an `@` before the host, with no `/`, `?`, `#`, `@` or space in it.
URL_USERINFO = re.compile(r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)[^/?#@\s\"'<>]+@")


def secrets_from_environment(environ: Mapping[str, str] | None = None) -> list[str]:
    """Values of environment variables whose names say they are secret."""
    env = os.environ if environ is None else environ
    values = {v for k, v in env.items() if is_secret_name(k) and len(v) >= MIN_SECRET_LENGTH}
    return sorted(values, key=len, reverse=True)


def named_secrets(
    names: Iterable[str | None], environ: Mapping[str, str], literal: Iterable[str] = ()
) -> list[str]:
    """Values a spec names as credentials, whatever their variables are called: those of the
    environment variables `names` (a model's `api_key_env`, a remote agent's `token_env`), and
    the `literal` values written into it (a model's `headers`) long enough to be one."""
    named = [environ[name] for name in names if name and environ.get(name)]
    return named + [value for value in literal if len(value) >= MIN_SECRET_LENGTH]


def is_secret_name(name: str) -> bool:
    """Whether an environment variable's name says its value is secret."""
    return name.upper() not in NOT_SECRET and SECRET_NAME.search(name) is not None


def mask_url_credentials(text: str) -> str:
    """`text` with the userinfo of every URL in it (`user:password@`) replaced by `[REDACTED]`:
    a credential written into a URL is secret whatever variable it came from."""
    if "://" not in text or "@" not in text:
        return text
    return URL_USERINFO.sub(lambda match: f"{match['scheme']}{MASK}@", text)


class SecretMask:
    """Replaces every known secret in a text by `[REDACTED]`, JSON-escaped forms included
    (a secret holding a quote or a backslash appears escaped in a JSON line), and the
    credentials of every URL in it (`https://user:pass@host` becomes
    `https://[REDACTED]@host`), known or not."""

    def __init__(self, secrets: Iterable[str] | None = None) -> None:
        given = list(secrets) if secrets is not None else secrets_from_environment()
        self.secrets = sorted(
            {form for s in given if s for form in (s, json.dumps(s, ensure_ascii=False)[1:-1])},
            key=len,
            reverse=True,
        )

    def __call__(self, text: str) -> str:
        for secret in self.secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        return mask_url_credentials(text)
