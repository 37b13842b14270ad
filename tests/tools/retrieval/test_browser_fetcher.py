"""Browser-rendered pages (VistaHop's reference): scripts run before the text is read, and the plain
HTTP fetch takes over when the browser cannot serve the page. Real local HTTP server; the rendering
test needs the ``browser`` extra and a system Chromium."""

from __future__ import annotations

import importlib.util
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web

from fasteval.tools.retrieval.page import (
    BrowserFetcher,
    FetchLimits,
    PageSkipped,
    extract_text,
    fetch_page,
)
from fasteval.tools.retrieval.transport import RetrySettings, UpstreamError

JS_PAGE = ("<html><head><title>t</title></head><body><p>static words</p><div id='x'></div>"
           "<script>document.getElementById('x').textContent = 'written by script'</script></body></html>")


@pytest.fixture
async def site() -> AsyncIterator[str]:
    async def js(_: web.Request) -> web.Response:
        return web.Response(text=JS_PAGE, content_type="text/html")

    async def pdf(_: web.Request) -> web.Response:
        return web.Response(body=b"%PDF-1.4", content_type="application/pdf")

    async def missing(_: web.Request) -> web.Response:
        return web.Response(status=404, text="nope")

    app = web.Application()
    app.router.add_get("/js", js)
    app.router.add_get("/doc", pdf)
    app.router.add_get("/missing", missing)
    runner = web.AppRunner(app)
    await runner.setup()
    tcp = web.TCPSite(runner, "127.0.0.1", 0)
    await tcp.start()
    yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    await runner.cleanup()


async def test_without_a_browser_the_plain_fetch_serves_the_page(site: str) -> None:
    fetcher = BrowserFetcher(executable_path="/nonexistent/chromium")
    async with aiohttp.ClientSession() as session:
        raw = await fetcher.fetch(session, f"{site}/js", FetchLimits(), RetrySettings())
    text = extract_text(raw.html, "all_text").text
    assert "static words" in text and "written by script" not in text
    assert fetcher.stats() == {"rendered": 0, "fallbacks": 1}
    await fetcher.close()


def _browser_available() -> bool:
    try:
        BrowserFetcher()._executable()
    except Exception:
        return False
    return importlib.util.find_spec("playwright") is not None


@pytest.mark.skipif(not _browser_available(), reason="needs the 'browser' extra (playwright) and a system Chromium")
async def test_rendered_page_holds_what_its_scripts_wrote(site: str) -> None:
    fetcher = BrowserFetcher()
    limits, retry = FetchLimits(timeout_s=20), RetrySettings()
    try:
        async with aiohttp.ClientSession() as session:
            raw = await fetcher.fetch(session, f"{site}/js", limits, retry)
            plain = await fetch_page(session, f"{site}/js", limits, retry)
            assert "written by script" in extract_text(raw.html, "all_text").text
            assert "written by script" not in extract_text(plain.html, "all_text").text
            with pytest.raises(PageSkipped):
                await fetcher.render(f"{site}/doc", limits)
            assert fetcher.stats() == {"rendered": 1, "fallbacks": 0}
            with pytest.raises(UpstreamError):  # the browser's 404, then the plain fetch's 404
                await fetcher.fetch(session, f"{site}/missing", limits, RetrySettings(attempts=1))
            assert fetcher.stats() == {"rendered": 1, "fallbacks": 1}
    finally:
        await fetcher.close()


async def test_a_browser_asked_for_but_missing_stops_the_start() -> None:
    from fasteval.core.errors import ConfigError
    from fasteval.tools.retrieval.page import start_browser

    with pytest.raises(ConfigError, match="Chromium|playwright"):
        await start_browser({"browser": {"executable_path": "/nonexistent/chromium"}})
