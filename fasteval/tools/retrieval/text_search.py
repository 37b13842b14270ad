"""``text_search_tool`` (VistaHop): search, read the top pages, summarise each, then summarise all.

Follows the reference flow: Serper with ``{"q": query}``; every organic result is listed; the
first ``top_k`` links (default 3, the paper's value; the public code's 10 is an option) are
fetched concurrently and cut to 30,000 characters; the summarizer role writes a five-sentence
summary of each (``<think>`` blocks stripped); a final summary is made with the same prompt over
"Search Query / Search Results / Web Page Summaries", also cut to 30,000 characters. Pages that
fail are skipped and counted in ``extra``. Unlike the reference, a search failure is a tool error
for this one call, never an exception that aborts the sweep.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, ClassVar

from cache import CacheMiss, CacheValue, cache_key
from fasteval.core.tagged import Tagged
from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool
from fasteval.tools.retrieval.browse import read_page
from fasteval.tools.retrieval.page import Extractor, FetchLimits, PageSkipped
from fasteval.tools.retrieval.search import SearchSettings, normalise_query, search
from fasteval.tools.retrieval.transport import MissingKey, RetrySettings, UpstreamError, cached
from providers import ChatRequest, ModelClient, ProviderError

CONTENT_LIMIT = 30_000
DEFAULT_TOP_K = 3
SUMMARY_MAX_TOKENS = 8192

SUMMARY_SYSTEM_PROMPT = (
    "You are a helpful assistant. Your task is to summarize the main content of the given web page in no "
    "more than five sentences. Your summary should cover the overall key points of the page, not just parts "
    "related to the user's question.\n\nIf any part of the content is helpful for answering the user's "
    "question, be sure to include it clearly in the summary. Do not ignore relevant information, but also make "
    "sure the general structure and main ideas of the page are preserved. Your summary should be concise, "
    "factual, and informative."
)
SUMMARY_USER_PROMPT = "Webpage Content (first {content_limit} characters) is: {content}\nQuestion: {query}"
"""The reference's prompt (mmsearch-r1 style), used for page summaries and the final summary alike."""

_THINK = Tagged("<think>", "</think>", ignore_case=True)


def strip_think(text: str) -> str:
    return _THINK.remove(text).strip()


class SummaryFailed(Exception):
    """The summarizer gave no usable text."""


@dataclass(slots=True)
class PageTally:
    """What happened to the fetched pages, for ``extra`` (and the VistaHop fetch statistics)."""

    summarised: int = 0
    skipped: int = 0
    failed: int = 0
    failures: list[dict[str, str]] = field(default_factory=list)
    cache_hits: int = 0


def summary_messages(query: str, content: str, content_limit: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": SUMMARY_SYSTEM_PROMPT},
            {"role": "user", "content": SUMMARY_USER_PROMPT.format(
                content_limit=content_limit, content=content[:content_limit], query=query)}]


async def summarise(ctx: ToolContext, client: ModelClient, query: str, content: str, content_limit: int) -> str:
    """One summary through the ``summary`` cache (key: summarizer model, endpoint, full prompt)."""
    messages = summary_messages(query, content, content_limit)
    params = {"max_tokens": SUMMARY_MAX_TOKENS}

    async def compute() -> CacheValue:
        try:
            resp = await client.chat(ChatRequest(messages=messages, params=params))
        except ProviderError as e:
            raise SummaryFailed(f"summarizer {client.name}: {e}") from None
        text = strip_think(resp.content or "")
        if not text:
            raise SummaryFailed(f"summarizer {client.name} returned no text")
        return text

    key = cache_key("summary", endpoint=client.provider.endpoint_id(), model=client.name, messages=messages,
                    params=params)
    value, _ = await cached(ctx, "summary", key, compute)
    return str(value)


def results_block(query: str, results: list[dict[str, str]], summaries: list[str]) -> str:
    """The reference's layout of everything the final summary reads."""
    out = f"Search Query: {query}\n\n--- Search Results ---\n"
    for i, r in enumerate(results, 1):
        out += (f"[{i}] Title: {r.get('title', '')}\n    Snippet: {r.get('snippet') or 'No snippet'}\n"
                f"    Link: {r.get('url') or 'No link'}\n\n")
    out += "--- Web Page Summaries ---\n"
    for s in summaries:
        out += f"{s}\n\n"
    return out


@register_tool
class TextSearchTool(Tool):
    """Web search with page summaries, as VistaHop's agents see it."""

    name: ClassVar[str] = "text_search_tool"
    description: ClassVar[str] = ("Search the web for text information related to a query. Returns a summary "
                                  "of the most relevant web pages.")
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"query": {"type": "string", "description": "The search query."}},
        "required": ["query"],
    }
    requires: ClassVar[tuple[str, ...]] = ("http", "cache")
    limiter: ClassVar[str | None] = "text_search_tool"

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        self._pages: asyncio.Semaphore | None = None

    def _page_slots(self) -> asyncio.Semaphore:
        # Created on first use, inside the sweep's loop; bounds open page fetches across all jobs.
        if self._pages is None:
            self._pages = asyncio.Semaphore(int(self.options.get("max_concurrent_pages", 30)))
        return self._pages

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        raw = args.get("query")
        query = normalise_query(raw) if isinstance(raw, str) else ""
        if not query:
            return ToolResult.fail("text_search_tool needs a non-empty string 'query'")
        opts = self.options
        top_k = max(1, int(opts.get("top_k", DEFAULT_TOP_K)))
        limit = int(opts.get("content_limit", CONTENT_LIMIT))
        no_fetch, no_summary = bool(opts.get("no_fetch", False)), bool(opts.get("no_summary", False))
        extra: dict[str, Any] = {"query": query, "top_k": top_k, "no_fetch": no_fetch, "no_summary": no_summary}
        try:
            settings = SearchSettings.from_options(opts, default_backend="serper")
        except ValueError as e:
            return ToolResult.fail(f"text_search_tool: {e}", **extra)
        extra["provider"] = settings.backend
        role = str(opts.get("summarizer_role", "summarizer"))
        client = ctx.services.get(role)
        if not isinstance(client, ModelClient) and not (no_fetch and no_summary):
            return ToolResult.fail(f"text_search_tool: no summarizer: configure the model role {role!r} "
                                   "under roles: in the config", **extra)
        try:
            found = await search(settings, query, None, ctx)
        except (MissingKey, UpstreamError, CacheMiss) as e:
            return ToolResult.fail(f"text_search_tool: search failed: {e}", **extra)
        extra.update(timestamp=found.fetched_at, cache_hit=found.cache_hit, results=len(found.results),
                     ranks=[{"rank": i + 1, "url": r.get("url", "")} for i, r in enumerate(found.results)])
        if not found.results:
            return ToolResult(status="ok", output=f"No search results found for query: {query}", extra=extra)

        tally = PageTally()
        summaries: list[str] = []
        if not no_fetch:
            top = [r.get("url", "") for r in found.results[:top_k]]
            done = await asyncio.gather(*(self._page_summary(ctx, client, query, u, limit, tally) for u in top))
            summaries = [s for s in done if s]
        extra.update(pages_fetched=tally.summarised, pages_skipped=tally.skipped, pages_failed=tally.failed,
                     page_failures=tally.failures, page_cache_hits=tally.cache_hits)
        block = results_block(query, found.results, summaries)
        if no_summary:
            return ToolResult(status="ok", output=f"Final summary generated for query: {query}\n{block}", extra=extra)
        assert isinstance(client, ModelClient)
        try:
            final = await summarise(ctx, client, query, block, limit)
        except (SummaryFailed, CacheMiss) as e:
            return ToolResult.fail(f"Error: Failed to generate final summary for query: {query}", **extra,
                                   summary_error=str(e))
        return ToolResult(status="ok", output=f"Final summary generated for query: {query}\n{final}", extra=extra)

    async def _page_summary(self, ctx: ToolContext, client: Any, query: str, url: str, limit: int,
                            tally: PageTally) -> str | None:
        """One page's summary, or None (counted as skipped or failed); never raises."""
        extractor: Extractor = "all_text" if ctx.fidelity == "reference" else "main"
        limits = FetchLimits.from_options({"timeout_s": 20.0, **self.options.get("fetch", {})})
        retry = RetrySettings.from_options({"attempts": 3, **self.options.get("fetch", {})})
        try:
            async with self._page_slots():
                page = await read_page(ctx, url, extractor, limits, retry)
            tally.cache_hits += page.cache_hit
            if not page.text.strip():
                tally.skipped += 1
                return None
            if not isinstance(client, ModelClient):
                # no_summary without a summarizer: the block lists raw page text instead.
                tally.summarised += 1
                return page.text[:limit]
            summary = await summarise(ctx, client, query, page.text[:limit], limit)
        except PageSkipped as e:
            tally.skipped += 1
            tally.failures.append({"url": url, "error": str(e)})
            return None
        except (ValueError, UpstreamError, SummaryFailed, CacheMiss) as e:
            tally.failed += 1
            tally.failures.append({"url": url, "error": str(e)})
            return None
        tally.summarised += 1
        return summary
