"""The sweep's shared services besides the sandbox: the result cache and one HTTP session.

``cache``: the content-addressed SQLite cache (``run.cache.path``, ``run.cache.modes``), used by
retrieval tools and by model roles (judge verdicts) so rescoring and reruns cost nothing.
``http``: one aiohttp session for tools that fetch pages or call search/weather APIs.
"""

from __future__ import annotations

import sqlite3
from typing import Any

import aiohttp

from cache import Cache, CacheMiss, CacheValue, chat_key, parse_modes
from fasteval.core.errors import ConfigError
from fasteval.core.types import Usage
from fasteval.services.registry import Closer, register_service
from providers import ChatRequest, ChatResponse, ModelClient, ProviderError, ResponseCache, ToolCallRequest


def cache_from_config(run_cfg: dict[str, Any]) -> Cache:
    """The cache ``run.cache`` (or ``--cache``/``--cache-mode``) asks for; a bad mode is a ConfigError."""
    opts = dict(run_cfg.get("cache") or {})
    modes = opts.get("modes")
    try:
        if isinstance(modes, str):
            modes = parse_modes(modes)
        return Cache(opts.get("path"), modes=modes)
    except ValueError as e:
        raise ConfigError(f"run.cache (or --cache-mode): {e}") from None


@register_service("cache")
async def start_cache(run_cfg: dict[str, Any]) -> tuple[Cache, Closer]:
    cache = cache_from_config(run_cfg)
    try:
        await cache.open()
    except (OSError, sqlite3.Error) as e:  # a path the user gave that cannot hold a database
        raise ConfigError(f"cannot open the cache {cache.path} ({getattr(e, 'strerror', None) or e}): use a "
                          "writable --cache or run.cache.path") from None
    return cache, cache.close


@register_service("http")
async def start_http(run_cfg: dict[str, Any]) -> tuple[aiohttp.ClientSession, Closer]:
    """One pooled session for every tool; per-request timeouts are set by the tools."""
    opts = dict(run_cfg.get("http") or {})
    connector = aiohttp.TCPConnector(limit=int(opts.get("connections", 256)), ttl_dns_cache=300)
    session = aiohttp.ClientSession(connector=connector, headers={"User-Agent": opts.get(
        "user_agent", "Mozilla/5.0 (compatible; fasteval/0.1; +https://github.com/)")})
    return session, session.close


def response_to_value(resp: ChatResponse) -> dict[str, Any]:
    return {"content": resp.content, "finish_reason": resp.finish_reason,
            "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in resp.tool_calls],
            "usage": [resp.usage.prompt_tokens, resp.usage.completion_tokens, resp.usage.cache_read_tokens,
                      resp.usage.cache_write_tokens, resp.usage.reasoning_tokens], "native": resp.native}


def value_to_response(value: CacheValue) -> ChatResponse:
    if not isinstance(value, dict):
        raise TypeError(f"a cached chat response must be a JSON object, got {type(value).__name__}")
    usage = [*(value.get("usage") or []), 0, 0, 0, 0, 0][:5]  # older entries hold two or four counts
    native = value.get("native")
    return ChatResponse(content=value.get("content"), finish_reason=str(value.get("finish_reason", "stop")),
                        tool_calls=[ToolCallRequest(**c) for c in value.get("tool_calls") or []],
                        usage=Usage(int(usage[0]), int(usage[1]), int(usage[2]), int(usage[3]), int(usage[4])),
                        native=native if isinstance(native, dict) else None)


def _cacheable(value: CacheValue) -> bool:
    """Never store empty or content-filtered outputs."""
    return isinstance(value, dict) and value.get("finish_reason") != "content_filter" and bool(
        value.get("content") or value.get("tool_calls"))


def response_cache(cache: Cache, namespace: str, client: ModelClient) -> ResponseCache:
    """Wrap a client's requests in the cache; the key holds endpoint, model, request and seed."""
    endpoint = client.provider.endpoint_id()
    model = str(getattr(client.provider, "model", client.name))  # the served model id, not the role name

    async def cached(request: ChatRequest, compute: Any) -> ChatResponse:
        key = chat_key(namespace, endpoint, model, request)

        computed = False

        async def run() -> CacheValue:
            nonlocal computed
            computed = True
            return response_to_value(await compute())

        try:
            value = await cache.get_or_compute(namespace, key, run, cacheable=_cacheable)
        except CacheMiss as e:
            raise ProviderError("cache_miss", str(e)) from None
        if not computed:
            client.stats.cache_hits += 1
        return value_to_response(value)

    return cached
