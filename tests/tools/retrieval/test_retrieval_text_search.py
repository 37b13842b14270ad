"""text_search_tool: Serper -> top-k pages -> per-page summaries -> final summary, with a sim summarizer."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from cache import Cache
from fasteval.tools.base import ToolContext, make_tool
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import OpenAICompatProvider
from providers.sim import SimModel, SimServer
from tests.tools.retrieval.retrieval_upstream import Upstream

SCRIPT = [{"match": r"--- Search Results ---", "reply": "<think>weighing</think>FINAL: built in the 3rd century BC."},
          {"match": r"Pharos p\d", "reply": "<think>reading</think>PAGE SUMMARY about Pharos."}]


@pytest.fixture
async def summ() -> AsyncIterator[tuple[SimServer, ModelClient]]:
    srv = SimServer([SimModel("summ", policy="scripted", script=SCRIPT, default_reply="OTHER")])
    await srv.start()
    client = ModelClient("summ", OpenAICompatProvider(srv.base_url, "summ"),
                         retry=RetryPolicy(max_attempts=1))
    yield srv, client
    await client.close()
    await srv.stop()


def _tool(upstream: Upstream, **opts: Any) -> Any:
    return make_tool("text_search_tool", base_url=f"{upstream.url}/serper", **opts)


async def test_search_fetch_summarise_then_final_summary(upstream: Upstream, summ: tuple[SimServer, ModelClient],
                                                         make_ctx: Callable[..., ToolContext]) -> None:
    srv, client = summ
    res = await _tool(upstream).run({"query": "pharos lighthouse"}, make_ctx(summarizer=client))
    assert res.status == "ok"
    assert res.output == "Final summary generated for query: pharos lighthouse\nFINAL: built in the 3rd century BC."
    assert upstream.seen[0]["body"] == {"q": "pharos lighthouse"}  # the reference sends no count
    assert [upstream.hits[f"page:p{i}"] for i in range(1, 6)] == [1, 1, 1, 0, 0]  # top_k = 3 by default
    assert srv.requests == 4  # three pages, one final summary
    assert res.extra["pages_fetched"] == 3 and res.extra["pages_failed"] == 0 and res.extra["results"] == 5


async def test_failed_and_skipped_pages_are_counted_not_fatal(upstream: Upstream, sleeps: Any,
                                                              summ: tuple[SimServer, ModelClient],
                                                              make_ctx: Callable[..., ToolContext]) -> None:
    _, client = summ
    upstream.organic[1]["link"] = "PAGES/pages/missing"
    upstream.organic[2]["link"] = "PAGES/pages/pdf"
    res = await _tool(upstream, top_k=4, fetch={"sleep": sleeps}).run({"query": "pharos"}, make_ctx(summarizer=client))
    assert res.status == "ok" and res.output.startswith("Final summary generated for query: pharos\nFINAL")
    assert (res.extra["pages_fetched"], res.extra["pages_failed"], res.extra["pages_skipped"]) == (2, 1, 1)
    assert {f["url"].rsplit("/", 1)[-1] for f in res.extra["page_failures"]} == {"missing", "pdf"}


async def test_no_fetch_and_no_summary_switches(upstream: Upstream, summ: tuple[SimServer, ModelClient],
                                                make_ctx: Callable[..., ToolContext]) -> None:
    srv, client = summ
    res = await _tool(upstream, no_fetch=True).run({"query": "pharos"}, make_ctx(summarizer=client))
    assert res.status == "ok" and not any(k.startswith("page:") for k in upstream.hits) and srv.requests == 1
    res = await _tool(upstream, no_summary=True, top_k=1).run({"query": "pharos"}, make_ctx(summarizer=client))
    assert res.output.startswith("Final summary generated for query: pharos\nSearch Query: pharos\n\n--- Search Results")
    assert "[5] Title: Result 5" in res.output and "PAGE SUMMARY about Pharos." in res.output
    assert "<think>" not in res.output and srv.requests == 2  # one page summary, no final summary


async def test_second_identical_call_makes_zero_upstream_requests(upstream: Upstream, cache: Cache,
                                                                  summ: tuple[SimServer, ModelClient],
                                                                  make_ctx: Callable[..., ToolContext]) -> None:
    srv, client = summ
    ctx = make_ctx(summarizer=client, cache=cache)
    first = await _tool(upstream).run({"query": "pharos"}, ctx)
    hits, sim_requests = sum(upstream.hits.values()), srv.requests
    second = await _tool(upstream).run({"query": "pharos"}, ctx)
    assert first.output == second.output
    assert sum(upstream.hits.values()) == hits and srv.requests == sim_requests
    assert second.extra["cache_hit"] is True and second.extra["page_cache_hits"] == 3


async def test_replay_miss_and_missing_summarizer_are_tool_errors(upstream: Upstream, tmp_path: Any,
                                                                  summ: tuple[SimServer, ModelClient],
                                                                  make_ctx: Callable[..., ToolContext]) -> None:
    _, client = summ
    async with Cache(tmp_path / "frozen.sqlite", modes={"*": "replay"}) as frozen:
        res = await _tool(upstream).run({"query": "pharos"}, make_ctx(summarizer=client, cache=frozen))
    assert res.status == "error" and "cache miss in replay mode: namespace 'search', key" in res.output
    res = await _tool(upstream).run({"query": "pharos"}, make_ctx())
    assert res.status == "error" and "summarizer" in res.output and not upstream.hits


async def test_final_summary_failure_is_the_reference_error_text(upstream: Upstream,
                                                                 make_ctx: Callable[..., ToolContext]) -> None:
    srv = SimServer([SimModel("summ", policy="scripted", script=[{"match": "Question", "reply": "<think>x</think>"}])])
    await srv.start()
    client = ModelClient("summ", OpenAICompatProvider(srv.base_url, "summ"), retry=RetryPolicy(max_attempts=1))
    try:
        res = await _tool(upstream, no_fetch=True).run({"query": "pharos"}, make_ctx(summarizer=client))
    finally:
        await client.close()
        await srv.stop()
    assert res.status == "error" and res.output == "Error: Failed to generate final summary for query: pharos"
    assert "no text" in res.extra["summary_error"]


async def test_no_results(upstream: Upstream, summ: tuple[SimServer, ModelClient],
                          make_ctx: Callable[..., ToolContext]) -> None:
    upstream.organic = []
    res = await _tool(upstream).run({"query": "zzz"}, make_ctx(summarizer=summ[1]))
    assert res.status == "ok" and res.output == "No search results found for query: zzz"
