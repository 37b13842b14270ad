"""web_search / google_search against a loopback Serper and SerpAPI."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest

from cache import Cache
from fasteval.tools.base import TOOLS, ToolContext, make_tool
from tests.tools.retrieval.conftest import KEYS, Sleeps
from tests.tools.retrieval.retrieval_upstream import Upstream


def _tool(upstream: Upstream, backend: str = "serpapi", **opts: Any) -> Any:
    return make_tool("web_search", backend=backend, base_url=f"{upstream.url}/{backend}", **opts)


def _no_secret(result: Any) -> None:
    blob = result.output + orjson.dumps(result.extra, default=str).decode() + str(result.error)
    for secret in KEYS.values():
        assert secret not in blob


async def test_serpapi_results_in_reference_format_with_provenance(upstream: Upstream,
                                                                   make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"query": "pharos  lighthouse ", "num_results": 3}, make_ctx())
    assert res.status == "ok"
    out = orjson.loads(res.output)
    assert set(out) == {"results", "query", "status", "total_results"}
    assert out["status"] == "success" and out["total_results"] == 12345 and len(out["results"]) == 3
    assert set(out["results"][0]) == {"title", "snippet", "url", "display_link"}
    assert out["results"][0]["display_link"] == "site1.example"
    assert upstream.seen[0]["query"]["num"] == "3" and upstream.seen[0]["query"]["q"] == "pharos lighthouse"
    assert res.extra["provider"] == "serpapi" and res.extra["query"] == "pharos lighthouse"
    assert [r["rank"] for r in res.extra["ranks"]] == [1, 2, 3] and res.extra["timestamp"]
    _no_secret(res)


async def test_num_results_defaults_to_five_and_is_capped_at_ten(upstream: Upstream,
                                                                 make_ctx: Callable[..., ToolContext]) -> None:
    await _tool(upstream).run({"query": "a"}, make_ctx())
    await _tool(upstream).run({"query": "b", "num_results": 50}, make_ctx())
    assert [s["query"]["num"] for s in upstream.seen] == ["5", "10"]
    bad = await _tool(upstream).run({"query": "c", "num_results": "many"}, make_ctx())
    assert bad.status == "error" and "num_results" in bad.output


async def test_serper_sends_key_in_header_and_derives_display_link(upstream: Upstream,
                                                                   make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream, "serper").run({"query": "pharos"}, make_ctx())
    out = orjson.loads(res.output)
    assert res.status == "ok" and len(out["results"]) == 5
    assert out["results"][0]["display_link"] == f"127.0.0.1:{upstream.port}"
    assert upstream.seen[0]["headers"]["X-API-KEY"] == KEYS["SERPER_API_KEY"]
    assert upstream.seen[0]["body"] == {"q": "pharos", "num": 5}
    _no_secret(res)


async def test_google_search_is_the_same_tool_under_the_reference_name(upstream: Upstream,
                                                                       make_ctx: Callable[..., ToolContext]) -> None:
    assert issubclass(TOOLS["google_search"], TOOLS["web_search"])  # type: ignore[arg-type]
    tool = make_tool("google_search", base_url=f"{upstream.url}/serpapi")
    assert tool.spec()["function"]["name"] == "google_search"
    assert (await tool.run({"query": "x"}, make_ctx())).status == "ok"


async def test_429_waits_as_long_as_retry_after_then_succeeds(upstream: Upstream, sleeps: Sleeps,
                                                              make_ctx: Callable[..., ToolContext]) -> None:
    upstream.fail_next("serpapi", 429, headers={"Retry-After": "7"}, times=2)
    res = await _tool(upstream, sleep=sleeps, attempts=3).run({"query": "x"}, make_ctx())
    assert res.status == "ok" and upstream.hits["serpapi"] == 3 and sleeps == [7.0, 7.0]


async def test_retry_after_is_capped_and_attempts_are_bounded(upstream: Upstream, sleeps: Sleeps,
                                                              make_ctx: Callable[..., ToolContext]) -> None:
    upstream.fail_next("serpapi", 429, headers={"Retry-After": "3600"}, times=5)
    res = await _tool(upstream, sleep=sleeps, attempts=2, max_retry_after_s=20).run({"query": "x"}, make_ctx())
    assert res.status == "error" and "HTTP 429" in res.output
    assert upstream.hits["serpapi"] == 2 and sleeps == [20.0]


async def test_4xx_other_than_429_is_not_retried_and_echoed_key_is_redacted(
        upstream: Upstream, sleeps: Sleeps, make_ctx: Callable[..., ToolContext]) -> None:
    upstream.fail_next("serpapi", 400, body=f"Invalid request: api_key={KEYS['SERPAPI_API_KEY']} is wrong")
    res = await _tool(upstream, sleep=sleeps).run({"query": "x"}, make_ctx())
    assert res.status == "error" and upstream.hits["serpapi"] == 1 and sleeps == []
    assert "HTTP 400" in res.output and "***" in res.output
    _no_secret(res)


async def test_timeout_is_a_tool_error(upstream: Upstream, sleeps: Sleeps,
                                       make_ctx: Callable[..., ToolContext]) -> None:
    upstream.hang.add("serper")
    res = await _tool(upstream, "serper", timeout_s=0.2, attempts=2, sleep=sleeps).run({"query": "x"}, make_ctx())
    assert res.status == "error" and "no answer within 0.2 s" in res.output and upstream.hits["serper"] == 2


async def test_missing_key_is_a_clear_error(upstream: Upstream, make_ctx: Callable[..., ToolContext],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SERPAPI_API_KEY")
    res = await _tool(upstream).run({"query": "x"}, make_ctx())
    assert res.status == "error" and "SERPAPI_API_KEY" in res.output and upstream.hits["serpapi"] == 0
    res = await _tool(upstream, api_key_env="MY_KEY").run({"query": "x"}, make_ctx())
    assert "MY_KEY" in res.output


async def test_second_identical_search_makes_no_upstream_request(upstream: Upstream, cache: Cache,
                                                                 make_ctx: Callable[..., ToolContext]) -> None:
    ctx = make_ctx(cache=cache)
    first = await _tool(upstream).run({"query": "pharos"}, ctx)
    second = await _tool(upstream).run({"query": " pharos "}, ctx)
    assert upstream.hits["serpapi"] == 1
    out1, out2 = orjson.loads(first.output), orjson.loads(second.output)
    assert out1["results"] == out2["results"] and second.extra["cache_hit"] is True
    assert second.extra["timestamp"] == first.extra["timestamp"]
    # A different count or backend is a different search.
    await _tool(upstream).run({"query": "pharos", "num_results": 6}, ctx)
    assert upstream.hits["serpapi"] == 2


async def test_replay_mode_fails_closed_naming_the_key(upstream: Upstream, tmp_path: Any,
                                                      make_ctx: Callable[..., ToolContext]) -> None:
    async with Cache(tmp_path / "replay.sqlite", modes={"*": "replay"}) as frozen:
        res = await _tool(upstream).run({"query": "never seen"}, make_ctx(cache=frozen))
    assert res.status == "error" and "cache miss in replay mode" in res.output and "'search'" in res.output
    assert upstream.hits["serpapi"] == 0


async def test_empty_query_is_rejected_without_a_request(upstream: Upstream,
                                                         make_ctx: Callable[..., ToolContext]) -> None:
    res = await _tool(upstream).run({"query": "  "}, make_ctx())
    assert res.status == "error" and orjson.loads(res.output)["status"] == "error" and not upstream.hits


async def test_upstream_429_shrinks_the_tools_limiter_window(upstream: Upstream, sleeps: Sleeps,
                                                             make_ctx: Callable[..., ToolContext]) -> None:
    """One retry policy: an upstream rate limit shrinks the named limiter as a model 429 shrinks its endpoint."""
    from fasteval.services.limiters import Limiters

    limiters = Limiters()
    upstream.fail_next("serpapi", 429, headers={"Retry-After": "1"}, times=2)
    async with limiters.slot("web_search", 10):
        res = await _tool(upstream, sleep=sleeps, attempts=3).run({"query": "x"}, make_ctx())
    assert res.status == "ok" and limiters.get("web_search", 10).limit == 6  # 10 × 0.8 × 0.8, floored
