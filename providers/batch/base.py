"""One vocabulary for three batch APIs: a batch's state, a request's outcome, a wire's methods."""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import aiohttp

from providers.base import ChatRequest, ChatResponse, ErrorKind, ProviderError
from providers.breaker import connection_error

BATCH_FIELDS = ("max_requests", "max_mb", "gather_s", "poll_s", "window", "fallback", "max_resubmissions")
FALLBACKS = ("batch", "interactive")
"""Where a request goes again after its batch expired or failed retryably: a later batch (half
price, another wait) or the model's interactive API at once (full price, no wait)."""


@dataclass(slots=True, frozen=True)
class BatchSettings:
    """A model's or role's ``batch:`` entry (``true`` takes every default)."""

    max_requests: int | None = None
    """At most the provider's documented limit (OpenAI 50,000, Anthropic 100,000, Gemini 100,000)."""
    max_mb: float | None = None
    """At most the provider's documented byte limit (OpenAI 200 MB, Anthropic 256 MB, Gemini 2 GB per file)."""
    gather_s: float = 30.0
    poll_s: float = 30.0
    window: str = "24h"
    fallback: str = "batch"
    """One of FALLBACKS."""
    max_resubmissions: int = 3
    """How many times a request goes out again in a later batch after its batch ended without its
    answer (expired, cancelled, a retryable error, missing from the results); then its job ends
    with an error. A request is paid for at most ``1 + max_resubmissions`` times, whatever the
    provider does."""

    @classmethod
    def from_config(cls, value: Any) -> BatchSettings | None:
        if value is None or value is False:
            return None
        if value is True:
            return cls()
        if not isinstance(value, dict):
            raise ValueError(f"batch: expected true or a mapping of {', '.join(BATCH_FIELDS)}, got {value!r}")
        unknown = sorted(set(value) - set(BATCH_FIELDS))
        if unknown:
            raise ValueError(f"batch: unknown keys {unknown}; known: {', '.join(BATCH_FIELDS)}")
        out = cls(**value)
        for name in ("max_requests", "max_mb", "gather_s", "poll_s"):
            v = getattr(out, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or v <= 0):
                raise ValueError(f"batch.{name} must be a positive number, got {v!r}")
        r = out.max_resubmissions
        if isinstance(r, bool) or not isinstance(r, int) or r < 0:
            raise ValueError(f"batch.max_resubmissions must be a whole number >= 0, got {r!r}")
        if not isinstance(out.fallback, str) or out.fallback not in FALLBACKS:
            raise ValueError(f"batch.fallback: expected one of {', '.join(FALLBACKS)}, got {out.fallback!r}")
        if out.window != "24h":
            raise ValueError(f"batch.window: the providers offer a 24h completion window only, got {out.window!r}")
        return out


BatchState = Literal["running", "cancelling", "ended"]
"""Every provider status word maps onto one of these (``validating``/``in_progress``/
``finalizing`` are running; ``cancelling``/``canceling`` cancelling; the rest ended)."""

_CUSTOM_ID = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


_URL_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,199}\Z")


def url_id(value: object, what: str) -> str:
    """An id from a server's answer or the journal, checked before it becomes a URL's path segment.

    An ``output_file_id`` of ``../../../evil?x=`` was fetched with the key: a segment that is not
    plainly an id (letters, digits, ``_ . -``; no ``/``, ``?``, ``%``) is refused, never quoted
    into something the server may decode again.
    """
    v = str(value)
    if not _URL_ID.match(v):
        raise ProviderError("fatal", f"{what} {v[:80]!r} is not an id we put into a URL (a hostile server or a "
                                     "tampered journal): refused, nothing sent")
    return v


def custom_id_ok(cid: str) -> bool:
    """Anthropic's rule (1-64 of ``[a-zA-Z0-9_-]``) is the strictest; OpenAI takes any string."""
    return bool(_CUSTOM_ID.match(cid))


@dataclass(slots=True)
class BatchInfo:
    """A batch as the provider reports it, in our words."""

    id: str
    state: BatchState
    status: str
    """The provider's own status word, shown as it is."""
    counts: dict[str, int] = field(default_factory=dict)
    created_at: float = 0.0
    expired: bool = False
    """The whole batch expired (OpenAI ``expired``); Anthropic says so per request."""
    failed: str | None = None
    """A batch the provider refused as a whole (OpenAI ``failed`` validation): why."""
    output_ref: str | None = None
    error_ref: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)


@dataclass(slots=True)
class ResultLine:
    """One request's outcome: the response body to parse, or a classified error."""

    custom_id: str
    body: bytes | None = None
    kind: ErrorKind | None = None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.body is not None


OnFile = Callable[[str], Awaitable[None]]
"""Called with an uploaded input file's id before the batch is created (it is journaled)."""


MAX_LIST_PAGES = 200
"""Pages a lookup reads from a batch or file list before it stops: 20,000 entries, far past the
journal's time on any real list; a list that never advances ends sooner (a cursor seen twice)."""


class ListGuard:
    """Keeps a paged lookup finite: a cursor seen twice, or more than MAX_LIST_PAGES pages, is a
    ProviderError (the list could not be read to its end), never an endless walk or a "not found"."""

    def __init__(self, what: str) -> None:
        self.what = what
        self.seen: set[str] = set()

    def next(self, cursor: str) -> str:
        if cursor in self.seen or len(self.seen) >= MAX_LIST_PAGES:
            raise ProviderError("bad_response", f"{self.what}: the list does not end (cursor {cursor[:40]!r} seen "
                                f"again, or more than {MAX_LIST_PAGES} pages)")
        self.seen.add(cursor)
        return cursor


class BatchWire(ABC):
    """A provider's batch API. ``max_requests`` and ``max_bytes`` are its documented limits."""

    max_requests: int
    max_bytes: int
    name: str
    find_proves: bool = True
    """``find`` matches a mark we set on the batch (OpenAI's metadata, Gemini's display name): a
    found batch is ours. False where it can only guess (Anthropic: request count and time): the
    lane confirms the guess by the batch's custom_ids before it adopts it, and never cancels one."""

    @abstractmethod
    async def body(self, request: ChatRequest) -> bytes:
        """The request's body as the interactive provider would send it (hashed into its custom_id)."""

    @abstractmethod
    def line(self, custom_id: str, body: bytes) -> bytes:
        """One entry of the batch input (a JSONL line, no newline)."""

    @abstractmethod
    def entry(self, line: bytes) -> tuple[str, bytes]:
        """``(custom_id, body)`` of a line ``line`` made (a resubmission reads them back)."""

    @abstractmethod
    async def create(self, local_id: str, lines: list[bytes], *, file_id: str | None, on_file: OnFile) -> str:
        """Create the batch (uploading its input first where the API needs a file); its id."""

    @abstractmethod
    async def retrieve(self, batch_id: str) -> BatchInfo: ...

    @abstractmethod
    async def results(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        """Every outcome the provider still holds for an ended batch (missing ones are absent);
        ``ids`` are the batch's custom_ids in input order, for an API that answers by order."""

    @abstractmethod
    async def cancel(self, batch_id: str) -> BatchInfo: ...

    @abstractmethod
    async def find(self, local_id: str, since: float, n_requests: int, claimed: set[str]) -> str | None:
        """The id of a batch created for ``local_id`` whose id we never recorded (a crash), or None;
        a ProviderError when the list cannot be read to its end (then nobody knows: never create)."""

    @abstractmethod
    async def find_file(self, local_id: str) -> str | None:
        """An input file uploaded for ``local_id`` whose batch was never created, or None."""

    @abstractmethod
    async def probe(self) -> None:
        """List one batch: a ProviderError (404 for an endpoint without the API) when it cannot."""

    @abstractmethod
    def parse(self, body: bytes) -> ChatResponse:
        """A succeeded request's response body as a ChatResponse."""

    @abstractmethod
    async def close(self) -> None: ...


async def http(session: aiohttp.ClientSession, method: str, url: str, classify: Callable[[int, bytes], ProviderError],
               **kwargs: object) -> bytes:
    """One batch-API call; transport faults and HTTP errors become classified ProviderErrors."""
    return (await http_with_headers(session, method, url, classify, **kwargs))[0]


async def http_with_headers(session: aiohttp.ClientSession, method: str, url: str,
                            classify: Callable[[int, bytes], ProviderError],
                            **kwargs: object) -> tuple[bytes, Mapping[str, str]]:
    """``http`` with the answer's headers (a resumable upload's session URL and status come in them;
    lookups in them ignore case)."""
    try:
        async with session.request(method, url, **kwargs) as resp:  # type: ignore[arg-type]
            raw = await resp.read()
            if resp.status != 200:
                raise classify(resp.status, raw)
            return raw, resp.headers
    except TimeoutError:
        raise ProviderError("timeout", f"{method} {url}: no answer within the timeout") from None
    except aiohttp.ClientConnectionError as e:
        raise connection_error(e, url) from None
    except aiohttp.ClientPayloadError as e:
        raise ProviderError("transient", f"{method} {url}: truncated body ({type(e).__name__})") from None
