"""Content-addressed cache keys: sha256 of a canonical JSON rendering of everything that decides a result.

A key must change whenever the answer could change (model, endpoint, sampling parameters, tool
schemas, seed or repeat index, the full input with images by content hash, the schema version) and
must not change for things that cannot affect the answer (timeouts, API keys, request ids). Getting
this wrong either contaminates results across models (lm-eval #2715, #4063) or silently never hits.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import orjson

if TYPE_CHECKING:
    from providers import ChatRequest

SCHEMA_VERSION = 1
"""Bump when the meaning of a stored value changes, so old entries stop matching (lmms-eval PR #1217)."""

TRANSPORT_FIELDS: frozenset[str] = frozenset({
    "timeout", "request_timeout", "read_timeout", "connect_timeout",
    "api_key", "api_base", "base_url", "organization", "headers", "extra_headers",
    "request_id", "idempotency_key", "user", "max_retries", "retries",
    "stream", "stream_options",
})
"""Request fields that change how a request travels, never what it answers; left out of keys."""


def _canonical(value: Any) -> Any:
    """Normalise values whose spelling varies but whose meaning does not (1.0 vs 1, data URIs)."""
    if isinstance(value, bool) or value is None or isinstance(value, (int, str)):
        return value
    if isinstance(value, float):
        # temperature=1 and temperature=1.0 must hit the same entry.
        return int(value) if value.is_integer() else value
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            if k == "url" and isinstance(v, str) and v.startswith("data:"):
                # Inline images are keyed by content hash, like our {"type":"image"} refs.
                out[k] = "sha256:" + hashlib.sha256(v.encode()).hexdigest()
            else:
                out[str(k)] = _canonical(v)
        return out
    if isinstance(value, (list, tuple)):
        return [_canonical(v) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "sha256:" + hashlib.sha256(bytes(value)).hexdigest()
    raise TypeError(f"cache key part of type {type(value).__name__} has no canonical form")


def canonical_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Sampling parameters minus transport fields; ``None`` means "default", same as absent."""
    return {k: _canonical(v) for k, v in params.items() if k not in TRANSPORT_FIELDS and v is not None}


def cache_key(namespace: str, **parts: Any) -> str:
    """sha256 hex of the canonical JSON (sorted keys) of namespace, schema version and ``parts``."""
    payload = {"namespace": namespace, "schema_version": SCHEMA_VERSION, "parts": _canonical(parts)}
    return hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()


def chat_key(namespace: str, endpoint_id: str, model: str, request: ChatRequest,
             *, repeat: int | None = None) -> str:
    """Key of one chat request. ``repeat`` is the seed/epoch index for endpoints that take no seed.

    Without ``repeat`` (or ``request.seed``), five sampled repeats of one prompt would share one
    cached answer, so callers running repeats on seedless endpoints must pass it.
    """
    return cache_key(
        namespace,
        endpoint=endpoint_id,
        model=model,
        messages=request.messages,
        tools=request.tools,
        params=canonical_params(request.params),
        seed=request.seed,
        repeat=repeat,
    )
