"""browser_get_page_text against loopback pages: caps, content types, charsets, redirects, cache."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from cache import Cache
from fasteval.tools.base import ToolContext, make_tool
from fasteval.tools.retrieval import extract_text
from tests.tools.retrieval.conftest import Sleeps
from tests.tools.retrieval.retrieval_upstream import PAGE, Upstream


async def _read(ctx: ToolContext, url: str, **opts: Any) -> tuple[Any, dict[str, Any]]:
    res = await make_tool("browser_get_page_text", **opts).run({"url": url}, ctx)
    return res, orjson.loads(res.output)


async def test_reference_strips_page_chrome_like_the_harness(upstream: Upstream,
                                                             make_ctx: Callable[..., ToolContext]) -> None:
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/article")
    assert res.status == "ok" and set(out) == {"url", "title", "text", "status", "content_length"}
    assert out["title"] == "Pharos lighthouse" and out["status"] == "success"
    assert "Lighthouse of Alexandria" in out["text"] and "\n" not in out["text"]
    for junk in ("SCRIPTJUNK", "NAVJUNK", "ASIDEJUNK", "FOOTJUNK"):
        assert junk not in out["text"]
    assert out["content_length"] == len(out["text"]) and res.extra["extractor"] == "chrome"


async def test_fixed_reads_the_main_text(upstream: Upstream, make_ctx: Callable[..., ToolContext]) -> None:
    res, out = await _read(make_ctx("fixed"), f"{upstream.url}/pages/article")
    assert res.status == "ok" and res.extra["extractor"] == "main"
    assert "Lighthouse of Alexandria" in out["text"] and "Earthquakes" in out["text"]
    assert "NAVJUNK" not in out["text"] and "FOOTJUNK" not in out["text"]


def test_extractors_on_one_page() -> None:
    assert "NAVJUNK" in extract_text(PAGE, "all_text").text  # VistaHop keeps everything but code
    assert "SCRIPTJUNK" not in extract_text(PAGE, "all_text").text
    assert extract_text("", "main").text == ""
    tiny = extract_text("<html><body><p>Just one line.</p></body></html>", "main")
    assert tiny.text == "Just one line."  # trafilatura finds nothing; falls back to the chrome stripper


async def test_text_is_cut_at_8000_in_reference_and_max_chars_in_fixed(upstream: Upstream,
                                                                       make_ctx: Callable[..., ToolContext]) -> None:
    _, ref = await _read(make_ctx("reference"), f"{upstream.url}/pages/huge", max_chars=100)
    assert len(ref["text"]) == 8000 and ref["content_length"] > 8000
    res, fixed = await _read(make_ctx("fixed"), f"{upstream.url}/pages/huge", max_chars=100)
    assert len(fixed["text"]) == 100 and res.extra["truncated_chars"] is True


async def test_huge_page_stops_downloading_at_the_byte_cap(upstream: Upstream,
                                                           make_ctx: Callable[..., ToolContext]) -> None:
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/huge", max_bytes=64 * 1024)
    assert res.status == "ok" and res.extra["truncated_bytes"] is True
    assert out["content_length"] <= 64 * 1024
    assert upstream.hits["huge-chunks"] < 400  # the server was cut off well before 4 MiB


async def test_pdf_and_images_are_skipped_with_a_clear_message(upstream: Upstream,
                                                               make_ctx: Callable[..., ToolContext]) -> None:
    for name, ctype in (("pdf", "application/pdf"), ("image", "image/png")):
        res, out = await _read(make_ctx("fixed"), f"{upstream.url}/pages/{name}")
        assert res.status == "error" and res.extra["skipped"] is True
        assert f"content type {ctype} is not a web page" in out["error"]
    res, out = await _read(make_ctx("fixed"), "https://example.org/report.PDF")
    assert res.status == "error" and "document or image file" in out["error"]


async def test_declared_and_bad_charsets_decode(upstream: Upstream, make_ctx: Callable[..., ToolContext]) -> None:
    _, latin = await _read(make_ctx("reference"), f"{upstream.url}/pages/latin1")
    assert latin["title"] == "Café" and "Crème brûlée à Paris." in latin["text"]
    res, bad = await _read(make_ctx("reference"), f"{upstream.url}/pages/badcharset")
    assert res.status == "ok" and bad["title"] == "Grüße" and "Köln" in bad["text"]


async def test_redirects_are_followed_but_bounded(upstream: Upstream, sleeps: Sleeps,
                                                  make_ctx: Callable[..., ToolContext]) -> None:
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/hop")
    assert res.status == "ok" and res.extra["final_url"].endswith("/pages/article")
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/loop", max_redirects=3, sleep=sleeps)
    assert res.status == "error" and "more than 3 redirects" in out["error"]
    assert upstream.hits["page:loop"] <= 4 and sleeps == []  # bounded, and never retried


async def test_timeouts_http_errors_and_bad_urls(upstream: Upstream, sleeps: Sleeps,
                                                 make_ctx: Callable[..., ToolContext]) -> None:
    upstream.hang.add("page:article")
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/article", timeout_s=0.2, sleep=sleeps)
    assert res.status == "error" and "no complete answer within 0.2 s" in out["error"]
    assert upstream.hits["page:article"] == 2 and len(sleeps) == 1
    res, out = await _read(make_ctx("reference"), f"{upstream.url}/pages/missing", sleep=sleeps)
    assert res.status == "error" and "HTTP 404" in out["error"] and upstream.hits["page:missing"] == 1
    res, out = await _read(make_ctx("reference"), "file:///etc/passwd")
    assert res.status == "error" and "not an absolute http(s) URL" in out["error"]


async def test_429_on_a_page_honours_retry_after(upstream: Upstream, sleeps: Sleeps,
                                                 make_ctx: Callable[..., ToolContext]) -> None:
    upstream.fail_next("page:article", 429, headers={"Retry-After": "2"})
    res, _ = await _read(make_ctx("reference"), f"{upstream.url}/pages/article", sleep=sleeps)
    assert res.status == "ok" and sleeps == [2.0] and upstream.hits["page:article"] == 2


async def test_page_cache_hit_and_replay_miss(upstream: Upstream, cache: Cache, tmp_path: Path,
                                              make_ctx: Callable[..., ToolContext]) -> None:
    url = f"{upstream.url}/pages/article"
    first, _ = await _read(make_ctx("reference", cache=cache), url)
    second, _ = await _read(make_ctx("reference", cache=cache), url)
    assert upstream.hits["page:article"] == 1 and second.extra["cache_hit"] is True
    assert first.output == second.output
    async with Cache(tmp_path / "frozen.sqlite", modes={"page": "replay"}) as frozen:
        res, out = await _read(make_ctx("reference", cache=frozen), url)
    assert res.status == "error" and "cache miss in replay mode: namespace 'page', key " in out["error"]
    assert upstream.hits["page:article"] == 1
