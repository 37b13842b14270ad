"""``browser_get_page_text`` (VisualToolBench) and ``read_page``, the cached page reader it shares
with ``text_search_tool``.

The reference fetches with requests + BeautifulSoup and answers
``{url, title, text[:8000], status, content_length}``. ``reference`` keeps its extractor and its
8,000-character cut; ``fixed`` reads the main text (trafilatura) and takes ``max_chars``. Both
fetch under the same size, time, redirect and content-type bounds. The extracted, untruncated
text is cached in the ``page`` namespace under the URL and the extractor, so truncation settings
can change without refetching.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from cache import CacheMiss, CacheValue, cache_key
from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool
from fasteval.tools.retrieval.page import (
    Extractor,
    FetchLimits,
    PageSkipped,
    extract_text_async,
    fetch_page,
)
from fasteval.tools.retrieval.transport import RetrySettings, UpstreamError, cached, http_session

REFERENCE_MAX_CHARS = 8000


@dataclass(slots=True)
class Page:
    url: str
    final_url: str
    title: str
    text: str
    status: int
    truncated_bytes: bool
    cache_hit: bool


async def read_page(ctx: ToolContext, url: str, extractor: Extractor, limits: FetchLimits,
                    retry: RetrySettings) -> Page:
    """Fetch and extract through the ``page`` cache.

    Raises ValueError (bad URL), PageSkipped, UpstreamError or CacheMiss; failures are never cached.
    """
    # VistaHop's reference renders pages in a browser: used when the run starts one (run.browser).
    browser = ctx.services.get("browser") if extractor == "all_text" else None

    async def compute() -> CacheValue:
        async with http_session(ctx) as session:
            raw = await (browser.fetch(session, url, limits, retry) if browser is not None
                         else fetch_page(session, url, limits, retry))
        page = await extract_text_async(raw.html, extractor)
        return {"final_url": raw.url, "title": page.title, "text": page.text, "status": raw.status,
                "truncated_bytes": raw.truncated}

    key = cache_key("page", url=url.strip(), extractor=extractor, max_bytes=limits.max_bytes,
                    **({"rendered": True} if browser is not None else {}))
    value, hit = await cached(ctx, "page", key, compute)
    if not isinstance(value, dict):
        raise UpstreamError("bad_response", "cached page entry is not a JSON object")
    return Page(url=url, final_url=str(value.get("final_url", url)), title=str(value.get("title", "")),
                text=str(value.get("text", "")), status=int(value.get("status", 200)),
                truncated_bytes=bool(value.get("truncated_bytes")), cache_hit=hit)


@register_tool
class BrowserGetPageText(Tool):
    """Read one web page as text."""

    name: ClassVar[str] = "browser_get_page_text"
    description: ClassVar[str] = ("Fetch a web page and extract its text content. "
                                  "Useful for reading articles, documentation, or any web page content.")
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "The URL of the web page to fetch"}},
        "required": ["url"],
    }
    requires: ClassVar[tuple[str, ...]] = ("http", "cache")
    limiter: ClassVar[str | None] = "browser_get_page_text"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        url = args.get("url")
        reference = ctx.fidelity == "reference"
        extractor: Extractor = "chrome" if reference else "main"
        max_chars = REFERENCE_MAX_CHARS if reference else int(self.options.get("max_chars", REFERENCE_MAX_CHARS))
        extra: dict[str, Any] = {"url": url, "extractor": extractor}

        def fail(message: str, **more: Any) -> ToolResult:
            body = {"url": url if isinstance(url, str) else "", "title": "", "text": "", "status": "error",
                    "error": message}
            return ToolResult.fail(orjson.dumps(body).decode(), **extra, **more)

        if not isinstance(url, str) or not url.strip():
            return fail("url must be a non-empty string")
        limits = FetchLimits.from_options(self.options)
        retry = RetrySettings.from_options(self.options, default_attempts=2)
        try:
            page = await read_page(ctx, url, extractor, limits, retry)
        except PageSkipped as e:
            return fail(str(e), skipped=True)
        except (ValueError, UpstreamError, CacheMiss) as e:
            return fail(f"could not read {url.strip()[:200]}: {e}")
        extra.update(final_url=page.final_url, http_status=page.status, cache_hit=page.cache_hit,
                     truncated_bytes=page.truncated_bytes, truncated_chars=len(page.text) > max_chars)
        out = {"url": url, "title": page.title, "text": page.text[:max_chars], "status": "success",
               "content_length": len(page.text)}
        return ToolResult(status="ok", output=orjson.dumps(out).decode(), extra=extra)
