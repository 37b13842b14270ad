"""Anthropic's Message Batches: ``POST /v1/messages/batches`` with ``{custom_id, params}`` entries.

Limits as documented: 100,000 requests or 256 MB per batch; results (JSONL at ``results_url``)
are kept 29 days. A batch has no metadata or name, so one created just before a crash is found
by its creation time and request count: a guess (``find_proves``), which the lane confirms by the
batch's results' custom_ids once it ends before adopting it, and never cancels.
Parameters are validated only while processing: a malformed request comes back hours later as
a per-request ``errored`` result, classified by the interactive API's taxonomy.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from providers.anthropic import AnthropicProvider, classify_anthropic_error, parse_anthropic_response
from providers.base import ChatRequest, ChatResponse, ProviderError
from providers.batch.base import BatchInfo, BatchState, ListGuard, OnFile, ResultLine, url_id
from providers.batch.http_wire import HttpBatchWire, iso_ts

_STATES: dict[str, BatchState] = {"in_progress": "running", "canceling": "cancelling", "ended": "ended"}


class AnthropicBatchWire(HttpBatchWire):
    max_requests = 100_000
    max_bytes = 256 * 1024 * 1024
    name = "anthropic"
    find_proves = False

    def __init__(self, provider: AnthropicProvider, *, timeout_s: float = 600.0) -> None:
        super().__init__(provider._headers, aiohttp.ClientTimeout(total=timeout_s, sock_connect=10.0),
                         provider.base_url)
        self.provider = provider
        self.base = f"{provider.base_url}/v1/messages/batches"

    def classify(self, status: int, body: bytes) -> ProviderError:
        return classify_anthropic_error(status, body, None)

    async def body(self, request: ChatRequest) -> bytes:
        return orjson.dumps(await self.provider.build_payload(request))

    def line(self, custom_id: str, body: bytes) -> bytes:
        return b'{"custom_id":' + orjson.dumps(custom_id) + b',"params":' + body + b"}"

    def entry(self, line: bytes) -> tuple[str, bytes]:
        data = orjson.loads(line)
        return str(data["custom_id"]), orjson.dumps(data["params"])

    async def create(self, local_id: str, lines: list[bytes], *, file_id: str | None, on_file: OnFile) -> str:
        data = b'{"requests":[' + b",".join(lines) + b"]}"
        return str((await self._json("POST", self.base, data=data,
                                     headers={"content-type": "application/json"}))["id"])

    @staticmethod
    def info(data: dict[str, Any]) -> BatchInfo:
        status = str(data.get("processing_status"))
        state = _STATES.get(status)
        if state is None:
            raise ProviderError("bad_response", f"unknown processing_status {status!r}")
        counts = {k: int(v) for k, v in (data.get("request_counts") or {}).items() if isinstance(v, int)}
        return BatchInfo(id=str(data["id"]), state=state, status=status, counts=counts,
                         created_at=iso_ts(data.get("created_at")), output_ref=data.get("results_url"))

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("GET", f"{self.base}/{url_id(batch_id, 'batch id')}"))

    async def cancel(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("POST", f"{self.base}/{url_id(batch_id, 'batch id')}/cancel"))

    async def results(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        url = info.output_ref or f"{self.base}/{url_id(info.id, 'batch id')}/results"
        try:
            lines = await self._lines(url)
        except ProviderError as e:
            if e.status == 404:  # past the 29 days: its requests count as not succeeded
                return []
            raise
        return [parse_line(x) if isinstance(x, bytes) else x.result() for x in lines]

    async def find(self, local_id: str, since: float, n_requests: int, claimed: set[str]) -> str | None:
        after: str | None = None
        guard = ListGuard("GET /v1/messages/batches")
        while True:
            params = {"limit": "100", **({"after_id": after} if after else {})}
            page = await self._json("GET", self.base, params=params)
            data = page.get("data") or []
            for b in data:
                total = sum(int(v) for v in (b.get("request_counts") or {}).values() if isinstance(v, int))
                if b.get("id") not in claimed and total == n_requests and iso_ts(b.get("created_at")) >= since - 60:
                    return str(b["id"])
            oldest = min((iso_ts(b.get("created_at")) for b in data), default=0.0)
            if not page.get("has_more") or not data or oldest < since - 60:
                return None
            after = guard.next(str(page.get("last_id") or data[-1]["id"]))

    async def find_file(self, local_id: str) -> str | None:
        return None  # the requests travel inline: there is no file to find

    async def probe(self) -> None:
        await self._json("GET", self.base, params={"limit": "1"})

    def parse(self, body: bytes) -> ChatResponse:
        return parse_anthropic_response(body)


def parse_line(line: bytes) -> ResultLine:
    """``succeeded`` (a Message), ``errored`` (an API error, classified), ``canceled``, ``expired``."""
    try:
        data = orjson.loads(line)
        cid = str(data["custom_id"])
        result = data["result"]
        kind = str(result["type"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return ResultLine(custom_id="", kind="bad_response", message=f"unreadable result line {line[:100]!r}")
    if kind == "succeeded":
        return ResultLine(custom_id=cid, body=orjson.dumps(result.get("message")))
    if kind in ("canceled", "expired"):  # never processed: it may run again
        return ResultLine(custom_id=cid, kind="transient", message=f"request {kind} in its batch")
    err = result.get("error") or {}
    inner = err.get("error") if isinstance(err.get("error"), dict) else err
    etype = str(inner.get("type", "")) if isinstance(inner, dict) else ""
    status = {"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
              "not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
              "overloaded_error": 529}.get(etype, 500)
    e = classify_anthropic_error(status, orjson.dumps({"error": inner}), None)
    return ResultLine(custom_id=cid, kind=e.kind, message=str(e.args[0])[:300])
