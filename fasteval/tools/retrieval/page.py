"""Fetching one web page safely and turning it into text.

A page is untrusted: it may be huge, binary, slow, mislabelled or a redirect loop. ``fetch_page``
bounds each of these (bytes read, total time, redirects, content types) and decodes with the
declared charset, then the ``<meta>`` one, then UTF-8 with replacement, so a bad label never
fails a call. Extraction runs off the event loop. Three extractors reproduce what each consumer
expects:

- ``chrome``: VisualToolBench's reference (drop script/style/nav/header/footer/aside, collapse
  whitespace into one line);
- ``all_text``: VistaHop's reference (drop script/style, one text block per line);
- ``main``: our corrected main-text extraction (trafilatura; falls back to ``chrome`` when it
  finds no main content, e.g. on very short pages).
"""

from __future__ import annotations

import asyncio
import codecs
import importlib.util
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import urlsplit

from fasteval.core.errors import ConfigError
from fasteval.services.registry import Closer, register_service
from fasteval.tools.retrieval.transport import RetrySettings, UpstreamError, classify_status, with_retries

if TYPE_CHECKING:  # imported where used: the suites import this module, and a report needs no HTTP
    import aiohttp

Extractor = Literal["chrome", "all_text", "main"]
EXTRACTORS: tuple[Extractor, ...] = ("chrome", "all_text", "main")

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml", "text/plain", "application/xml", "text/xml"})
SKIP_EXTENSIONS = (".pdf", ".doc", ".docx", ".ppt", ".pptx", ".xls", ".xlsx", ".jpg", ".jpeg", ".png", ".gif",
                   ".zip", ".mp4", ".mp3")
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_\-:.]+)""", re.I)
_CHROME_TAGS = ("script", "style", "nav", "header", "footer", "aside", "noscript")
_CODE_TAGS = ("script", "style", "noscript")


class PageSkipped(Exception):
    """Not a web page we read (PDF, image, other binary): not an upstream failure, never retried."""


@dataclass(slots=True)
class FetchLimits:
    """Per-fetch bounds; defaults suit pages read by a model (~2 MiB of HTML is already a book)."""

    max_bytes: int = 2 * 1024 * 1024
    timeout_s: float = 15.0
    max_redirects: int = 5
    user_agent: str = ("Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) "
                       "Chrome/122.0.0.0 Safari/537.36")

    @classmethod
    def from_options(cls, options: dict[str, Any]) -> FetchLimits:
        base = cls()
        return cls(max_bytes=int(options.get("max_bytes", base.max_bytes)),
                   timeout_s=float(options.get("timeout_s", base.timeout_s)),
                   max_redirects=int(options.get("max_redirects", base.max_redirects)),
                   user_agent=str(options.get("user_agent", base.user_agent)))


@dataclass(slots=True)
class RawPage:
    url: str
    """The final URL, after redirects."""
    status: int
    content_type: str
    html: str
    truncated: bool
    """The body was longer than ``max_bytes`` and was cut there."""


def check_url(url: str) -> str:
    """Only absolute http(s) URLs; anything else is the model's mistake, said plainly."""
    url = url.strip()
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"not an absolute http(s) URL: {url[:200]!r}")
    return url


def _codec(label: str | None) -> str | None:
    if not label:
        return None
    try:
        return codecs.lookup(label.strip().strip("\"'")).name
    except LookupError:
        return None


def decode_body(body: bytes, declared: str | None) -> str:
    """Declared charset, then ``<meta charset>``, then UTF-8; undecodable bytes become U+FFFD."""
    meta = _META_CHARSET.search(body[:4096])
    candidates = [_codec(declared), _codec(meta.group(1).decode("ascii", "ignore") if meta else None), "utf-8"]
    for name in dict.fromkeys(c for c in candidates if c):
        try:
            return body.decode(name)
        except (UnicodeDecodeError, LookupError):
            continue
    return body.decode(_codec(declared) or "utf-8", errors="replace")


async def _read_capped(resp: aiohttp.ClientResponse, max_bytes: int) -> tuple[bytes, bool]:
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_chunked(64 * 1024):
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            # Stop reading: the rest of a huge page is never downloaded.
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


async def fetch_page(session: aiohttp.ClientSession, url: str, limits: FetchLimits,
                     retry: RetrySettings) -> RawPage:
    """GET one page within ``limits``; raises PageSkipped, UpstreamError or ValueError (bad URL)."""
    url = check_url(url)
    if urlsplit(url).path.lower().endswith(SKIP_EXTENSIONS):
        raise PageSkipped(f"skipped {url}: the URL names a document or image file, not a web page")
    import aiohttp

    async def attempt() -> RawPage:
        try:
            async with session.get(url, allow_redirects=True, max_redirects=limits.max_redirects,
                                   headers={"User-Agent": limits.user_agent},
                                   timeout=aiohttp.ClientTimeout(total=limits.timeout_s)) as resp:
                if resp.status >= 400:
                    raise classify_status(resp.status, b"", resp.headers.get("Retry-After"))
                ctype = (resp.content_type or "").lower()
                if resp.headers.get("Content-Type") and ctype not in HTML_TYPES:
                    raise PageSkipped(f"skipped {url}: content type {ctype} is not a web page "
                                      "(PDFs, images and other binary files are not read)")
                body, truncated = await _read_capped(resp, limits.max_bytes)
                if not resp.headers.get("Content-Type") and b"\x00" in body[:1024]:
                    raise PageSkipped(f"skipped {url}: binary content without a content type")
                return RawPage(url=str(resp.url), status=resp.status, content_type=ctype or "text/html",
                               html=decode_body(body, resp.charset), truncated=truncated)
        except aiohttp.TooManyRedirects:
            raise UpstreamError("rejected", f"more than {limits.max_redirects} redirects") from None
        except TimeoutError:
            raise UpstreamError("timeout", f"no complete answer within {limits.timeout_s:g} s") from None
        except aiohttp.ClientError as e:
            raise UpstreamError("transient", f"connection failed: {type(e).__name__}") from None

    return await with_retries(retry, attempt)


@dataclass(slots=True)
class PageText:
    title: str
    text: str


def _title(tree: Any) -> str:
    for path in ("//title", "//h1"):
        found = tree.xpath(path)
        if found:
            text = " ".join(found[0].text_content().split())
            if text:
                return text
    return ""


def _drop(tree: Any, tags: tuple[str, ...]) -> None:
    for el in tree.xpath(" | ".join(f"//{t}" for t in tags)):
        el.drop_tree()


def _chrome_text(tree: Any) -> str:
    """The reference's BeautifulSoup recipe: strip lines, split on double spaces, join by one space."""
    _drop(tree, _CHROME_TAGS)
    lines = (line.strip() for line in tree.text_content().splitlines())
    return " ".join(chunk.strip() for line in lines for chunk in line.split("  ") if chunk.strip())


def _all_text(tree: Any) -> str:
    """VistaHop's recipe: every text node stripped, one per line."""
    _drop(tree, _CODE_TAGS)
    pieces = (s.strip() for s in tree.xpath("//body//text()") or tree.xpath("//text()"))
    return "\n".join(p for p in pieces if p)


def extract_text(html: str, extractor: Extractor) -> PageText:
    """Title and text of a page (CPU-bound: call through ``extract_text_async`` on the loop)."""
    import trafilatura  # imported on the first page read: it costs every sweep 0.4 s to start otherwise
    from trafilatura import load_html

    tree = load_html(html) if html.strip() else None
    if tree is None:
        return PageText(title="", text="")
    title = _title(tree)
    if extractor == "all_text":
        return PageText(title, _all_text(tree))
    if extractor == "main":
        main = trafilatura.extract(tree, include_comments=False, include_tables=True, favor_recall=True,
                                   deduplicate=False)
        if main and main.strip():
            return PageText(title, main.strip())
        tree = load_html(html)  # trafilatura prunes the tree it is given
    return PageText(title, _chrome_text(tree))


async def extract_text_async(html: str, extractor: Extractor) -> PageText:
    return await asyncio.to_thread(extract_text, html, extractor)


# ---------------------------------------------------------------------------------------------
# Browser-rendered pages (VistaHop's runner): optional extra ``browser`` (playwright), driving a
# Chromium installed from the system's packages (no browser download).
# ---------------------------------------------------------------------------------------------

CHROMIUM_PATHS = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")
RENDER_GOTO_TIMEOUT_S = 25.0
RENDER_CONTENT_TIMEOUT_S = 15.0
"""The runner's bounds: 25 s for navigation (DOM content loaded), 15 s to read the rendered page."""


class BrowserUnavailable(ConfigError):
    """Playwright or a Chromium binary is missing; the message says what to install (exit 2 at start)."""


class BrowserFetcher:
    """Pages rendered in one shared headless Chromium (JavaScript executed), a fresh page per fetch.

    Chromium starts on first use. A fetch that the browser cannot complete (timeout, HTTP error,
    crash, empty page) falls back to the plain HTTP fetch, as the runner falls back to requests.
    """

    def __init__(self, executable_path: str | None = None, max_pages: int = 8) -> None:
        self.executable_path = executable_path
        self._pages = asyncio.Semaphore(max_pages)
        self._lock = asyncio.Lock()
        self._playwright: Any = None
        self._browser: Any = None
        self.rendered = 0
        self.fallbacks = 0

    def _executable(self) -> str:
        import os
        import shutil

        candidates = [self.executable_path] if self.executable_path else [
            *CHROMIUM_PATHS, shutil.which("chromium") or "", shutil.which("chromium-browser") or ""]
        for path in candidates:
            if path and os.access(path, os.X_OK):
                return path
        raise BrowserUnavailable(f"no Chromium executable found (looked at {[c for c in candidates if c]}); "
                                 "install it from the system packages (apt-get install chromium) or set "
                                 "run.browser.executable_path")

    async def _ensure(self) -> Any:
        async with self._lock:
            if self._browser is None:
                try:
                    from playwright.async_api import async_playwright
                except ImportError:
                    raise BrowserUnavailable("playwright is not installed: pip install 'fasteval[browser]'") from None
                executable = self._executable()
                self._playwright = await async_playwright().start()
                self._browser = await self._playwright.chromium.launch(
                    executable_path=executable, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"])
            return self._browser

    async def render(self, url: str, limits: FetchLimits) -> RawPage:
        """The page after its scripts ran; raises UpstreamError or PageSkipped (non-HTML)."""
        url = check_url(url)
        browser = await self._ensure()
        async with self._pages:
            context = await browser.new_context(user_agent=limits.user_agent)
            try:
                page = await context.new_page()
                try:
                    response = await asyncio.wait_for(
                        page.goto(url, timeout=limits.timeout_s * 1000, wait_until="domcontentloaded"),
                        min(RENDER_GOTO_TIMEOUT_S, limits.timeout_s + 5))
                except TimeoutError:
                    raise UpstreamError("timeout", f"the browser did not load {url} in time") from None
                except Exception as e:  # playwright's own errors (DNS, TLS, navigation)
                    raise UpstreamError("transient", f"browser navigation failed: {type(e).__name__}") from None
                if response is None:
                    raise UpstreamError("transient", f"no response from {url}")
                if response.status >= 400:
                    raise classify_status(response.status, b"", response.headers.get("retry-after"))
                ctype = (response.headers.get("content-type") or "").split(";")[0].strip().lower()
                if ctype and ctype not in ("text/html", "application/xhtml+xml"):
                    raise PageSkipped(f"skipped {url}: content type {ctype} is not a web page")
                try:
                    html = await asyncio.wait_for(page.content(), RENDER_CONTENT_TIMEOUT_S)
                except TimeoutError:
                    raise UpstreamError("timeout", f"the rendered page of {url} could not be read in time") from None
                data = html.encode("utf-8")
                truncated = len(data) > limits.max_bytes
                if truncated:
                    html = data[: limits.max_bytes].decode("utf-8", errors="ignore")
                if not html.strip():
                    raise UpstreamError("bad_response", f"empty page from {url}")
                self.rendered += 1
                return RawPage(url=page.url, status=response.status, content_type=ctype or "text/html",
                               html=html, truncated=truncated)
            finally:
                await context.close()

    async def fetch(self, session: aiohttp.ClientSession, url: str, limits: FetchLimits,
                    retry: RetrySettings) -> RawPage:
        """Rendered page, or the plain HTTP fetch when the browser fails (the runner's fallback)."""
        try:
            return await self.render(url, limits)
        except (UpstreamError, BrowserUnavailable):
            self.fallbacks += 1
            return await fetch_page(session, url, limits, retry)

    def stats(self) -> dict[str, int]:
        return {"rendered": self.rendered, "fallbacks": self.fallbacks}

    async def close(self) -> None:
        if self._browser is not None:
            await self._browser.close()
        if self._playwright is not None:
            await self._playwright.stop()
        self._browser = self._playwright = None


@register_service("browser")
async def start_browser(run_cfg: dict[str, Any]) -> tuple[BrowserFetcher, Closer]:
    """``run.browser: {executable_path, max_pages}``; Chromium is launched on the first fetch."""
    opts = run_cfg.get("browser")
    opts = opts if isinstance(opts, dict) else {}
    fetcher = BrowserFetcher(opts.get("executable_path"), int(opts.get("max_pages", 8)))
    # Asked for and not there is a setup error, said before the sweep starts, not a silent fallback.
    if importlib.util.find_spec("playwright") is None:
        raise BrowserUnavailable("run.browser needs playwright: pip install 'fasteval[browser]'")
    fetcher._executable()
    return fetcher, fetcher.close
