"""Secrets never reach a record or a log, and nothing else is hidden: a value is removed
because its key names a credential (``api_key``, ``hf_token``, ``password``) or because it
looks like one (``hf_...``, ``sk-...``, a bearer token), never because a key mentions tokens
(``max_new_tokens``, ``add_tokens``, ``stop_token_ids``, ``tokenizer`` are settings)."""

from __future__ import annotations

import re
from collections.abc import Mapping

REDACTED = "<redacted>"
# A key whose last word is one of these names a secret ("db_password", "client_secret").
SECRET_WORDS = frozenset(
    {"password", "passwd", "passphrase", "secret", "credential", "credentials", "apikey", "authorization", "cookie"}
)
# ... or whose last two words are one of these ("openai_api_key", "aws_secret_access_key");
# "key" alone is a dictionary's or a sort's key.
SECRET_PAIRS = frozenset({("api", "key"), ("private", "key"), ("access", "key"), ("secret", "key")})
# A key ending in "token" is a credential ("hf_token", "GITHUB_TOKEN", "access_token") unless
# it names one of a tokenizer's own tokens ("eos_token", "pad_token"). Keys that end in another
# word ("max_new_tokens", "stop_token_ids", "HF_TOKEN_PATH", "api_key_env") say how long, which
# ids, or where a secret is kept, not the secret.
VOCABULARY_TOKENS = frozenset({"bos", "eos", "pad", "unk", "sep", "cls", "mask", "stop", "special", "mlt"})
# Values that are credentials whatever their key: Hugging Face, OpenAI/Anthropic-style and
# GitHub tokens, AWS access key ids, a bearer header's token, and any run of 32 or more letters
# and digits mixing upper case, lower case and digits (random-looking; a hex hash has no upper
# case, a model name has separators).
SECRET_VALUE = re.compile(
    r"\bhf_[A-Za-z0-9]{20,}"
    r"|\bsk-[A-Za-z0-9_-]{20,}"
    r"|\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
    r"|(?<=Bearer )[A-Za-z0-9._~+/=-]{16,}"
    r"|(?<![A-Za-z0-9])(?=[A-Za-z0-9]*[a-z])(?=[A-Za-z0-9]*[A-Z])(?=[A-Za-z0-9]*[0-9])[A-Za-z0-9]{32,}(?![A-Za-z0-9])"
)


def _words(key: str) -> list[str]:
    """``key``'s words, lower case: split at ``_``, ``-``, ``.``, spaces and camelCase."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", key)
    return [word for word in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if word]


def is_secret_key(key: str) -> bool:
    """Whether ``key`` (a config key or an environment variable's name) names a credential."""
    words = _words(key)
    if not words:
        return False
    if words[-1] in SECRET_WORDS or tuple(words[-2:]) in SECRET_PAIRS:
        return True
    return words[-1] == "token" and (len(words) == 1 or words[-2] not in VOCABULARY_TOKENS)


def redact_text(text: str) -> str:
    """``text`` with every credential-looking part replaced by ``<redacted>``."""
    return SECRET_VALUE.sub(REDACTED, text)


def redact(value):
    """A JSON-ready copy of ``value`` with every secret removed: the values of keys that name
    a credential, and credential-looking text anywhere."""
    if isinstance(value, Mapping):
        return {str(k): (REDACTED if is_secret_key(str(k)) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, (int, float, bool)) or value is None:
        return value
    return redact_text(str(value))
