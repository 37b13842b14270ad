"""What every dialect of the sim's batch APIs shares: a batch's state, ids, times, the core's reply."""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import orjson
from aiohttp import web

ids = itertools.count(1)
"""One counter for every id the sim's batch APIs hand out (files, batches, requests)."""


@dataclass(slots=True)
class SimBatch:
    id: str
    dialect: str
    requests: list[dict[str, Any]]
    created_at: float
    input_file_id: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    status: str = "in_progress"
    results: list[bytes] = field(default_factory=list)
    errors: list[bytes] = field(default_factory=list)
    ended_at: float | None = None
    cancel: asyncio.Event = field(default_factory=asyncio.Event)
    failure: str | None = None
    task: asyncio.Task[None] | None = None
    succeeded: int = 0
    """Requests answered with a response (Gemini's batchStats count them)."""
    endpoint: str = "/v1/chat/completions"
    """OpenAI's: the endpoint every line of the batch goes to (``/v1/responses`` too)."""


def iso(t: float | None) -> str | None:
    return None if t is None else datetime.fromtimestamp(t, UTC).isoformat().replace("+00:00", "Z")


def reply_of(resp: web.StreamResponse) -> dict[str, Any] | None:
    """The core's completion choice (the policy's message and how it ended), or None for a fault.

    The dialects build their reply from the whole choice, so a batch answer ends (length,
    content_filter, refusal) exactly as the interactive one does.
    """
    if resp.status != 200 or not isinstance(resp, web.Response) or not isinstance(resp.body, bytes):
        return None
    try:
        choice: dict[str, Any] = orjson.loads(resp.body)["choices"][0]
        choice["message"]  # noqa: B018  (a choice without its message is a fault)
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    return choice
