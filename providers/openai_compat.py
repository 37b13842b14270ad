"""OpenAI-compatible chat client on aiohttp: OpenAI, vLLM, SGLang, gateways and our sim server.

It only translates and classifies: images (content-hash refs) become data URLs (or
``file://`` URLs for servers that read local media) through the image resolver, HTTP failures
become ProviderError kinds. Retries, limits and accounting live once in providers.client
around every provider. Bodies are assembled from pre-serialised pieces with the images'
shared URL bytes and streamed as they are (providers.body), under an optional byte budget.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import aiohttp
import orjson

from fasteval.core.types import Message, Usage
from providers.base import Capabilities, ChatRequest, ChatResponse, Provider, ProviderError, ToolCallRequest
from providers.body import SLOT, ByteBudget, body_data, is_shareable, splice
from providers.breaker import connection_error
from providers.http_json import Timeouts, openai_retry_after, origin_guard, retry_after_header
from providers.retry import classify_status

ImageUrlResolver = Callable[[str, str], Awaitable[bytes]]
"""Maps (ImageRef, encoding profile) to the image's URL as ASCII bytes that need no JSON
escaping: a data URL or a ``file://`` URL (encoding happens off the event loop, cached)."""

CachedImageUrl = Callable[[str, str], "bytes | None"]
"""An ImageUrlResolver's optional ``cached`` method: the URL without a coroutine when it is ready."""

ImageResolver = Callable[[str, str], Awaitable[str]]
"""The same as text, always a data URL: what the native (Anthropic, Gemini) providers take."""

_OVERFLOW_MARKERS = ("context length", "context_length", "maximum context", "too many tokens",
                     "prompt is too long", "input is too long")



class OpenAICompatProvider(Provider):
    """POST {base_url}/chat/completions with tools, tool calls and image parts."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key_env: str | None = None,
        extra_body: dict[str, Any] | None = None,
        timeouts: Timeouts | None = None,
        tool_message_images: bool = False,
        image_resolver: ImageUrlResolver | None = None,
        session: aiohttp.ClientSession | None = None,
        max_connections: int = 1024,
        endpoint_name: str | None = None,
        body_budget: ByteBudget | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.extra_body = dict(extra_body or {})
        self.timeouts = timeouts or Timeouts()
        self._tool_message_images = tool_message_images
        self.image_resolver = image_resolver
        self._session = session
        self._own_session = session is None
        self._max_connections = max_connections
        self._endpoint_name = endpoint_name
        self._url = f"{self.base_url}/chat/completions"
        self.body_budget = body_budget
        self._timeout = aiohttp.ClientTimeout(total=self.timeouts.attempt_s, sock_connect=self.timeouts.connect_s,
                                              sock_read=self.timeouts.read_s)

    def endpoint_id(self) -> str:
        """Cache and limiter identity: a stable name when given (a sim or a local server whose
        port changes between runs), else the URL and model."""
        return self._endpoint_name or f"{self.base_url}#{self.model}"

    def default_capabilities(self) -> Capabilities:
        return Capabilities(tool_result_images=self._tool_message_images, seed=True)

    def _headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env)
            if not key:
                raise ProviderError("auth", f"environment variable {self.api_key_env} is not set")
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def _get_session(self) -> aiohttp.ClientSession:
        # Headers and timeouts live on the session: building them per request costs measurable CPU
        # at thousands of requests per second (benchmarks/throughput.py).
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self._max_connections, ttl_dns_cache=300)
            self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout, headers=self._headers(),
                                                  middlewares=(origin_guard(self.base_url),))
            self._own_session = True
        return self._session

    async def _image_url(self, ref: str, profile: str) -> bytes:
        if self.image_resolver is None:
            raise ProviderError("fatal", "request holds images but no image resolver is set")
        url: bytes | str = await self.image_resolver(ref, profile)
        return url.encode() if isinstance(url, str) else url  # a hand-written resolver may give text

    async def _wire_messages(self, messages: list[Message], profile: str, shared: list[bytes]) -> list[Message]:
        """Messages in wire format; large image URLs become placeholders, their bytes go to ``shared``."""
        out: list[Message] = []
        cached: CachedImageUrl | None = getattr(self.image_resolver, "cached", None)
        for m in messages:
            content = m.get("content")
            if isinstance(content, list):
                parts: list[dict[str, Any]] | None = None  # made at the first image part, if any
                for i, p in enumerate(content):
                    if p.get("type") != "image":
                        if parts is not None:
                            parts.append(p)
                        continue
                    if parts is None:
                        parts = content[:i]
                    url = cached(p["image"], profile) if cached is not None else None
                    if url is None:
                        url = await self._image_url(p["image"], profile)
                    if is_shareable(url):
                        shared.append(url)
                        value = SLOT
                    else:
                        value = url.decode("utf-8", "replace")
                    parts.append({"type": "image_url", "image_url": {"url": value}})
                if parts is not None:
                    m = {**m, "content": parts}
            out.append(m)
        return out

    async def build_body(self, request: ChatRequest) -> list[bytes]:
        """The request body as pieces whose concatenation is ``orjson.dumps`` of the payload.

        One ``orjson.dumps`` of the payload with placeholders for the large image URLs, then
        the encoder's cached URL bytes spliced in: a 5 MB history costs pointers, not a copy.
        """
        shared: list[bytes] = []
        payload: dict[str, Any] = {"model": self.model,
                                   "messages": await self._wire_messages(request.messages, request.image_profile,
                                                                         shared)}
        if request.tools:
            payload["tools"] = request.tools
        payload.update(self.extra_body)
        payload.update(request.params)
        if request.seed is not None and self.accepts_seed():
            payload["seed"] = request.seed
        body = orjson.dumps(payload)
        if not shared:
            return [body]
        pieces = splice(body, shared)
        if pieces is None:  # params replaced "messages": send exactly what the payload says
            return [body]
        return pieces

    async def chat(self, request: ChatRequest) -> ChatResponse:
        data, size = body_data(await self.build_body(request))
        session = self._get_session() if self._own_session or self._session is None else self._session
        extra: dict[str, Any] = {} if self._own_session else {"headers": self._headers(), "timeout": self._timeout}
        budget = self.body_budget
        if budget is not None:
            await budget.acquire(size)
        try:
            async with session.post(self._url, data=data, **extra) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise classify_http_error(resp.status, raw, resp.headers.get("Retry-After"), resp.headers)
        except ProviderError:
            raise
        except TimeoutError:
            raise ProviderError("timeout", f"no complete answer within the timeouts ({self.timeouts.attempt_s:g} s "
                                f"per attempt, {self.timeouts.read_s:g} s between bytes)") from None
        except aiohttp.ClientConnectionError as e:
            raise connection_error(e, self.base_url) from None
        except aiohttp.ClientPayloadError as e:
            raise ProviderError("transient", f"truncated response body ({type(e).__name__})") from None
        finally:
            if budget is not None:
                budget.release(size)
        return parse_response(raw)

    async def list_models(self, timeout_s: float = 10.0) -> list[str]:
        """The model ids ``GET {base_url}/models`` lists (preflight, and the breaker's probe)."""
        url = f"{self.base_url}/models"
        timeout = aiohttp.ClientTimeout(total=timeout_s)
        try:
            async with aiohttp.ClientSession(timeout=timeout, middlewares=(origin_guard(self.base_url),)) as session, \
                    session.get(url, headers=self._headers()) as resp:
                raw = await resp.read()
                if resp.status != 200:
                    raise classify_http_error(resp.status, raw, None)
        except aiohttp.ClientConnectionError as e:
            raise connection_error(e, self.base_url) from None
        except TimeoutError:
            raise ProviderError("timeout", f"{url} did not answer within {timeout_s:g} s") from None
        try:
            return [str(m.get("id")) for m in orjson.loads(raw).get("data") or [] if isinstance(m, dict)]
        except (orjson.JSONDecodeError, AttributeError) as e:
            raise ProviderError("bad_response", f"{url} did not return a model list ({e})") from None

    async def close(self) -> None:
        if self._own_session and self._session is not None and not self._session.closed:
            await self._session.close()


def classify_http_error(status: int, body: bytes, retry_after: str | None,
                        headers: Mapping[str, str] | None = None) -> ProviderError:
    """Map an HTTP failure onto the shared taxonomy (providers.retry), plus context overflow. With the
    response ``headers``, OpenAI's ``retry-after-ms`` and ``x-ratelimit-reset-*`` count too."""
    text = _error_text(body)
    if status in (400, 413, 422) and any(m in text.lower() for m in _OVERFLOW_MARKERS):
        return ProviderError("context_overflow", text, status=status)
    kind = classify_status(status)
    default = {"rate_limit": "rate limited", "auth": "not authorised", "transient": f"server error {status}"}
    return ProviderError(kind, text or default.get(kind, f"request rejected ({status})"),  # type: ignore[arg-type]
                         status=status, retry_after=_wait(retry_after, headers) if kind in ("rate_limit", "transient") else None)


def _wait(retry_after: str | None, headers: Mapping[str, str] | None) -> float | None:
    return openai_retry_after(headers) if headers is not None else retry_after_header(retry_after)


def _error_text(body: bytes) -> str:
    """The server's own message (OpenAI-style ``{"error": {"message": ...}}``), on one bounded line."""
    text = body[:2000].decode("utf-8", "replace")
    try:
        data = orjson.loads(body)
        err = data.get("error") if isinstance(data, dict) else None
        msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
        if isinstance(msg, str) and msg:
            text = msg
    except orjson.JSONDecodeError:
        pass
    return " ".join(text.split())[:300]


def parse_response(raw: bytes) -> ChatResponse:
    """Parse a chat completion body; a malformed one (of any shape) is a retryable bad_response."""
    try:
        return _parse_body(orjson.loads(raw))
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as e:
        raise ProviderError("bad_response", f"malformed completion body ({e!r:.200}): {raw[:200]!r}") from None


def _parse_body(data: Any) -> ChatResponse:
    choice = data["choices"][0]
    msg = choice["message"]
    calls = []
    for i, tc in enumerate(msg.get("tool_calls") or []):
        fn = tc.get("function") or {}
        args = fn.get("arguments", "")
        if not isinstance(args, str):
            args = orjson.dumps(args).decode()
        calls.append(ToolCallRequest(id=str(tc.get("id") or f"call_{i}"), name=str(fn.get("name", "")), arguments=args))
    usage = data.get("usage") or {}
    details = usage.get("prompt_tokens_details") or {}  # OpenAI and vLLM report automatic prefix caching here
    content = msg.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    if content is not None and not isinstance(content, str):
        raise TypeError(f"message content is a {type(content).__name__}, not text")
    finish = str(choice.get("finish_reason") or "stop")
    refusal = msg.get("refusal")
    if not calls and (finish == "content_filter" or (refusal and isinstance(refusal, str) and not content)):
        finish = "refusal"  # a filter stopped it or the model declined: the refusal termination, as on every wire
        content = content or (refusal if isinstance(refusal, str) else None)
    return ChatResponse(
        content=content,
        tool_calls=calls,
        finish_reason=finish,
        usage=Usage(int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0),
                    cache_read_tokens=int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0,
                    image_tokens=_image_tokens(details)),
    )


def _image_tokens(details: Any) -> int:
    """vLLM's ``prompt_tokens_details.multimodal_tokens.image`` (0 where a server does not say)."""
    per_modality = details.get("multimodal_tokens") if isinstance(details, dict) else None
    value = per_modality.get("image") if isinstance(per_modality, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0
