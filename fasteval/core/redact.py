"""Secrets never leave the process: one place that scrubs them from text before it is written.

An upstream may echo a request's ``Authorization`` header (or a key in a URL) back in an error
body, and that text flows into exceptions, tool results, records and log lines. Rather than
trusting every producer of error text, the two sinks that persist text (the record writer and
the log handlers) pass it through here, and so do the places that turn errors into text.

What is scrubbed: the values of every configured ``api_key_env`` variable (models, roles and tool
options anywhere in the config), and anything shaped like a bearer token or an ``sk-`` key.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "***"
_MIN_SECRET_LEN = 6
"""Shorter values would mask ordinary words; such a key is not a real secret anyway."""

_TOKEN_TEXT = re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{8,}")
_TOKEN_BYTES = re.compile(rb"(?i)\bbearer\s+[A-Za-z0-9._~+/=-]{8,}|\bsk-[A-Za-z0-9_-]{8,}")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_secrets_b: tuple[bytes, ...] = ()


def secret_env_names(config: Any) -> set[str]:
    """Every ``api_key_env`` value anywhere in a config tree (models, roles, tool options)."""
    names: set[str] = set()
    stack: list[Any] = [config]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            for key, value in node.items():
                if key == "api_key_env" and isinstance(value, str) and value:
                    names.add(value)
                else:
                    stack.append(value)
        elif isinstance(node, list | tuple):
            stack.extend(node)
    return names


_SECRET_NAME = re.compile(r"(?i)(api_?key|_token|_secret|password)$")


def secret_like_env_names(environ: Mapping[str, str] | None = None) -> set[str]:
    """Environment variables named like keys (``SERPER_API_KEY``, ``HF_TOKEN``...).

    Tools fall back to such default variables when a config names none, so their values are
    secrets too even though no ``api_key_env`` mentions them.
    """
    env = os.environ if environ is None else environ
    return {name for name in env if _SECRET_NAME.search(name)}


def add_secrets(values: Iterable[str]) -> None:
    """Register secret values to scrub from now on (process-wide; registering twice is harmless)."""
    global _secrets, _secrets_b
    with _lock:
        merged = set(_secrets) | {v.strip() for v in values if v and len(v.strip()) >= _MIN_SECRET_LEN}
        # Longest first, so a key that contains another is masked whole.
        _secrets = tuple(sorted(merged, key=len, reverse=True))
        _secrets_b = tuple(s.encode() for s in _secrets)


def add_secrets_from_env(env_names: Iterable[str], environ: Mapping[str, str] | None = None) -> None:
    """Register the current values of the named environment variables."""
    env = os.environ if environ is None else environ
    add_secrets(env.get(name, "") for name in env_names)


def clear_secrets() -> None:
    """Forget every registered value (tests)."""
    global _secrets, _secrets_b
    with _lock:
        _secrets, _secrets_b = (), ()


def redact_text(text: str) -> str:
    """``text`` with every registered secret and token-shaped string replaced by ``***``."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, MASK)
    if "earer" in text or "EARER" in text or "sk-" in text:
        text = _TOKEN_TEXT.sub(_mask_match, text)
    return text


def redact_bytes(data: bytes) -> bytes:
    """The bytes form of :func:`redact_text`, for serialized records (cheap when nothing matches)."""
    for secret in _secrets_b:
        if secret in data:
            data = data.replace(secret, MASK.encode())
    if b"earer" in data or b"EARER" in data or b"sk-" in data:
        data = _TOKEN_BYTES.sub(_mask_match_b, data)
    return data


def _mask_match(m: re.Match[str]) -> str:
    word = m.group(0)
    return f"{word.split()[0]} {MASK}" if word[:1] in "bB" else MASK


def _mask_match_b(m: re.Match[bytes]) -> bytes:
    word = m.group(0)
    return word.split()[0] + b" " + MASK.encode() if word[:1] in b"bB" else MASK.encode()


class RedactingFilter(logging.Filter):
    """A handler filter that scrubs the formatted message (and any traceback) of each log record."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = redact_text(record.getMessage())
        record.args = None
        if record.exc_info:
            record.exc_text = redact_text(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact_text(record.exc_text)
        return True
