"""Secrets never reach a record: values of secret-looking keys are removed."""

from __future__ import annotations

from collections.abc import Mapping

SECRET_MARKERS = ("token", "secret", "password", "api_key", "apikey", "credential")


def is_secret_key(key: str) -> bool:
    lowered = key.lower()
    return any(marker in lowered for marker in SECRET_MARKERS)


def redact(value):
    """A JSON-ready copy of ``value`` with every secret-looking key's value removed."""
    if isinstance(value, Mapping):
        return {str(k): ("<redacted>" if is_secret_key(str(k)) else redact(v)) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    return str(value)
