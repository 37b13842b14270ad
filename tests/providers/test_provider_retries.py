"""The retry taxonomy, Retry-After, AIMD and the in-flight cap, against the real sim server."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest

from providers.base import ChatRequest, ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import OpenAICompatProvider, Timeouts
from providers.sim import Faults, SimModel, SimServer

HELLO = ChatRequest(messages=[{"role": "user", "content": "hello"}])


@pytest.fixture
async def server() -> AsyncIterator[SimServer]:
    srv = SimServer([
        SimModel("m", policy="direct"),
        SimModel("slow", policy="direct", latency_ms=20),
    ])
    await srv.start()
    yield srv
    await srv.stop()


def client(srv: SimServer, model: str = "m", *, attempts: int = 4, concurrency: int = 16,
           timeouts: Timeouts | None = None) -> ModelClient:
    prov = OpenAICompatProvider(srv.base_url, model, timeouts=timeouts)
    return ModelClient(model, prov, concurrency=concurrency,
                       retry=RetryPolicy(max_attempts=attempts, base_delay_s=0.01, max_delay_s=0.05))


def schedule(srv: SimServer, model: str, *entries: str) -> None:
    srv._schedules[model] = list(entries)


async def test_rate_limit_honours_retry_after_and_shrinks_window(server: SimServer) -> None:
    server.models["m"].faults = Faults(retry_after_s=0.2)
    schedule(server, "m", "429", "ok")
    c = client(server)
    before = c.limit.limit
    resp = await c.chat(HELLO)
    assert resp.content
    assert c.stats.retries == 1 and c.stats.rate_limited == 1
    assert c.stats.backoff_s >= 0.2  # the server's Retry-After, not our exponential guess
    assert c.limit.limit < before
    await c.close()


async def test_transient_errors_back_off_without_shrinking(server: SimServer) -> None:
    schedule(server, "m", "500", "drop", "malformed", "ok")
    c = client(server, attempts=5)
    before = c.limit.limit
    resp = await c.chat(HELLO)
    assert resp.content
    assert c.stats.retries == 3
    assert c.stats.by_kind == {"transient": 2, "bad_response": 1}
    assert c.limit.limit == before
    await c.close()


@pytest.mark.parametrize("fault,kind", [("401", "auth"), ("400", "fatal")])
async def test_fatal_errors_are_not_retried(server: SimServer, fault: str, kind: str) -> None:
    schedule(server, "m", fault, "ok")
    c = client(server)
    with pytest.raises(ProviderError) as info:
        await c.chat(HELLO)
    assert info.value.kind == kind
    assert server.requests == 1 and c.stats.retries == 0
    await c.close()


async def test_context_overflow_is_classified_not_retried(server: SimServer) -> None:
    schedule(server, "m", "overflow", "ok")
    c = client(server)
    with pytest.raises(ProviderError) as info:
        await c.chat(HELLO)
    assert info.value.kind == "context_overflow"
    assert server.requests == 1
    await c.close()


async def test_hung_request_hits_its_timeout_then_gives_up(server: SimServer) -> None:
    server.models["m"].faults = Faults(hang_s=30)
    schedule(server, "m", "hang", "hang")
    c = client(server, attempts=2, timeouts=Timeouts(connect_s=1, read_s=0.3, attempt_s=0.5))
    with pytest.raises(ProviderError) as info:
        await c.chat(HELLO)
    assert info.value.kind == "timeout"
    assert server.requests == 2
    await c.close()


async def test_exhausted_retries_raise_the_last_error(server: SimServer) -> None:
    schedule(server, "m", "500", "500", "500")
    c = client(server, attempts=3)
    with pytest.raises(ProviderError) as info:
        await c.chat(HELLO)
    assert info.value.kind == "transient" and info.value.status == 500
    assert c.stats.errors == 1
    await c.close()


async def test_in_flight_never_exceeds_the_endpoint_cap(server: SimServer) -> None:
    c = client(server, "slow", concurrency=7)
    await asyncio.gather(*(c.chat(HELLO) for _ in range(120)))
    assert server.max_in_flight <= 7
    assert server.max_in_flight >= 2  # it did run concurrently
    await c.close()


async def test_missing_api_key_env_is_an_auth_error_before_any_request(server: SimServer,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FASTEVAL_TEST_MISSING_KEY", raising=False)
    prov = OpenAICompatProvider(server.base_url, "m", api_key_env="FASTEVAL_TEST_MISSING_KEY")
    with pytest.raises(ProviderError) as info:
        await prov.chat(HELLO)
    assert info.value.kind == "auth" and server.requests == 0
    await prov.close()


async def test_seed_and_params_reach_the_server(server: SimServer) -> None:
    seen: list[dict[str, object]] = []

    async def handler(request: aiohttp.web.Request) -> aiohttp.web.Response:
        seen.append(await request.json())
        return aiohttp.web.json_response({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]})

    app = aiohttp.web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = aiohttp.web.AppRunner(app)
    await runner.setup()
    site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    prov = OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", "x", extra_body={"top_k": 5})
    c = ModelClient("x", prov, params={"temperature": 0.7})
    await c.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}], params={"max_tokens": 9}, seed=3))
    assert seen[0]["seed"] == 3 and seen[0]["temperature"] == 0.7
    assert seen[0]["max_tokens"] == 9 and seen[0]["top_k"] == 5
    await c.close()
    await runner.cleanup()
