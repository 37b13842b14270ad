"""What a wire dialect needs from the sim, and the plumbing every dialect shares.

The sim has one core (faults, latency, policies) that reads OpenAI-form requests. Each native
dialect (Anthropic, Gemini, OpenAI's Responses API) validates its own wire strictly, turns a
valid request into that form, asks the core, and turns the core's completion back into its own
shape. Dialects depend on this small protocol, never on the server class, so the server can
import them without a cycle.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any, Protocol

import orjson
from aiohttp import web

from providers.sim.spec import SimModel


class Rejected(Exception):
    """A request the real API would refuse: HTTP status, error type and message (and the field and
    error code, for the dialects whose errors carry them)."""

    def __init__(self, status: int, kind: str, message: str, param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.kind, self.message, self.param, self.code = status, kind, message, param, code


class SimCore(Protocol):
    """The sim's one OpenAI-form core, as the dialects see it."""

    models: dict[str, SimModel]
    api_keys: dict[str, str]
    """Per dialect: the only key accepted; any non-empty key when a dialect has none."""

    async def answer(self, body: dict[str, Any], request: web.Request | None) -> web.StreamResponse:
        """Faults, latency and the policy's reply (a chat completion) for an OpenAI-form body (no
        request for a batch line)."""
        ...


def json_response(status: int, body: bytes, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(status=status, body=body, content_type="application/json", headers=headers)


async def read_json(request: web.Request, kind: str = "invalid_request_error") -> Any:
    try:
        return orjson.loads(await request.read())
    except orjson.JSONDecodeError:
        raise Rejected(400, kind, "request body is not valid JSON") from None


def lower_headers(request: web.Request) -> dict[str, str]:
    return {k.lower(): v for k, v in request.headers.items()}


def core_choice(resp: web.StreamResponse) -> dict[str, Any] | None:
    """The core's completion choice (the policy's message and how it ended), or None when the
    core answered with something else (an error, a malformed body, a dropped connection)."""
    if not isinstance(resp, web.Response) or resp.status != 200 or not isinstance(resp.body, bytes):
        return None
    try:
        choice: dict[str, Any] = orjson.loads(resp.body)["choices"][0]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None
    return choice if isinstance(choice, dict) and isinstance(choice.get("message"), dict) else None


def core_error(resp: web.StreamResponse) -> tuple[int, str]:
    """The status and message of the core's error reply (an injected fault, an unknown model)."""
    message = ""
    if isinstance(resp, web.Response) and isinstance(resp.body, bytes):
        try:
            message = str(orjson.loads(resp.body)["error"]["message"])
        except (orjson.JSONDecodeError, KeyError, TypeError):
            message = ""
    return resp.status, message


async def relay(core: SimCore, body: dict[str, Any], request: web.Request,
                error: Callable[[int, str, web.StreamResponse], web.StreamResponse],
                reply: Callable[[dict[str, Any]], web.StreamResponse]) -> web.StreamResponse:
    """Ask the core with an OpenAI-form ``body``: the dialect's ``reply`` to the completion choice,
    or its ``error`` for the core's error status and message (with the core's response, for its
    headers). A malformed body or a dropped connection (a 200 without a choice) passes through
    as the fault it is."""
    resp = await core.answer(body, request)
    choice = core_choice(resp)
    if choice is not None:
        return reply(choice)
    if resp.status == 200:
        return resp
    status, message = core_error(resp)
    return error(status, message, resp)


class ItemPrefixCache:
    """A server's automatic prefix cache: the items (after the request's fixed head: instructions
    and tools) this server has seen before, in order from the start, count as cached tokens."""

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def count(self, head: object, items: Iterable[Any], tokens: Callable[[Any], int]) -> tuple[int, int]:
        """(prompt tokens, cached tokens), ``tokens`` counting one item; marks every prefix seen."""
        digest = hashlib.sha256(orjson.dumps(head, option=orjson.OPT_SORT_KEYS))
        total = cached = 0
        for item in items:
            digest.update(orjson.dumps(item, option=orjson.OPT_SORT_KEYS))
            total += tokens(item)
            key = digest.hexdigest()
            if key in self._seen:
                cached = total
            self._seen.add(key)
        return total, cached
