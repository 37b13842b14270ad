"""OpenAI's Batch API: an uploaded JSONL file (``purpose: batch``) and ``/v1/batches``.

Limits as documented: 50,000 requests and 200 MB per input file, one model per file, a 24 h
completion window. We set ``metadata.fasteval_batch`` to the journal's local id so a batch
created just before a crash is found again by listing (the list has no filter: we page back
to the journal's timestamp); the input file is named after the same id.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from providers.base import ChatRequest, ChatResponse, ErrorKind, ProviderError
from providers.batch.base import BatchInfo, BatchState, ListGuard, OnFile, ResultLine, url_id
from providers.batch.http_wire import HttpBatchWire
from providers.openai_compat import OpenAICompatProvider, classify_http_error, parse_response

_STATES: dict[str, BatchState] = {"validating": "running", "in_progress": "running", "finalizing": "running",
                                  "cancelling": "cancelling", "completed": "ended", "expired": "ended",
                                  "cancelled": "ended", "failed": "ended"}
_ENDPOINT = "/v1/chat/completions"
META_KEY = "fasteval_batch"


class OpenAIBatchWire(HttpBatchWire):
    max_requests = 50_000
    max_bytes = 200 * 1024 * 1024
    name = "openai"
    endpoint = _ENDPOINT
    """Every line's ``url`` and the batch's ``endpoint`` (the two must agree)."""

    def __init__(self, provider: OpenAICompatProvider, *, timeout_s: float = 600.0) -> None:
        self._init(provider, provider.timeouts.connect_s, timeout_s)
        self.provider = provider

    def _init(self, provider: Any, connect_s: float, timeout_s: float) -> None:
        super().__init__(self._headers_of(provider), aiohttp.ClientTimeout(total=timeout_s, sock_connect=connect_s),
                         provider.base_url, prefix=provider.base_url)
        self.base = provider.base_url

    @staticmethod
    def _headers_of(provider: Any) -> Any:
        """The provider's headers less its Content-Type: uploads set their own (multipart)."""
        return lambda: {k: v for k, v in provider._headers().items() if k.lower() != "content-type"}

    def classify(self, status: int, body: bytes) -> ProviderError:
        return classify_http_error(status, body, None)

    async def body(self, request: ChatRequest) -> bytes:
        return b"".join(await self.provider.build_body(request))

    def line(self, custom_id: str, body: bytes) -> bytes:
        return b'{"custom_id":' + orjson.dumps(custom_id) + b',"method":"POST","url":"' + self.endpoint.encode() \
            + b'","body":' + body + b"}"

    def entry(self, line: bytes) -> tuple[str, bytes]:
        data = orjson.loads(line)
        return str(data["custom_id"]), orjson.dumps(data["body"])

    async def create(self, local_id: str, lines: list[bytes], *, file_id: str | None, on_file: OnFile) -> str:
        if file_id is None:
            form = aiohttp.FormData()
            form.add_field("purpose", "batch")
            form.add_field("file", b"\n".join(lines) + b"\n", filename=f"{local_id}.jsonl",
                           content_type="application/jsonl")
            file_id = str((await self._json("POST", "/files", data=form))["id"])
            await on_file(file_id)
        body = {"input_file_id": file_id, "endpoint": self.endpoint, "completion_window": "24h",
                "metadata": {META_KEY: local_id}}
        return str((await self._json("POST", "/batches", json=body))["id"])

    @staticmethod
    def info(data: dict[str, Any]) -> BatchInfo:
        status = str(data.get("status"))
        state = _STATES.get(status)
        if state is None:
            raise ProviderError("bad_response", f"unknown batch status {status!r}")
        failed = None
        if status == "failed":
            errs = ((data.get("errors") or {}).get("data")) or []
            failed = "; ".join(str(e.get("message", "")) for e in errs if isinstance(e, dict))[:300] or "failed"
        counts = {k: int(v) for k, v in (data.get("request_counts") or {}).items() if isinstance(v, int)}
        return BatchInfo(id=str(data["id"]), state=state, status=status, counts=counts,
                         created_at=float(data.get("created_at") or 0), expired=status == "expired", failed=failed,
                         output_ref=data.get("output_file_id"), error_ref=data.get("error_file_id"),
                         metadata={str(k): str(v) for k, v in (data.get("metadata") or {}).items()})

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("GET", f"/batches/{url_id(batch_id, 'batch id')}"))

    async def cancel(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("POST", f"/batches/{url_id(batch_id, 'batch id')}/cancel"))

    async def results(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        out: list[ResultLine] = []
        for ref in (info.output_ref, info.error_ref):
            if not ref:
                continue
            try:
                lines = await self._lines(f"/files/{url_id(ref, 'file id')}/content")
            except ProviderError as e:
                if e.status == 404:  # an output file that expired: its requests count as not succeeded
                    continue
                raise
            out += [parse_line(x) if isinstance(x, bytes) else x.result() for x in lines]
        return out

    async def find(self, local_id: str, since: float, n_requests: int, claimed: set[str]) -> str | None:
        after: str | None = None
        guard = ListGuard("GET /batches")
        while True:
            params = {"limit": "100", **({"after": after} if after else {})}
            page = await self._json("GET", "/batches", params=params)
            for b in page.get("data") or []:
                if (b.get("metadata") or {}).get(META_KEY) == local_id and b.get("id") not in claimed:
                    return str(b["id"])
            data = page.get("data") or []
            oldest = min((float(b.get("created_at") or 0) for b in data), default=0.0)
            if not page.get("has_more") or not data or oldest < since - 60:
                return None
            after = guard.next(str(page.get("last_id") or data[-1]["id"]))

    async def find_file(self, local_id: str) -> str | None:
        page = await self._json("GET", "/files", params={"purpose": "batch"})
        for f in page.get("data") or []:
            if f.get("filename") == f"{local_id}.jsonl":
                return str(f["id"])
        return None

    async def probe(self) -> None:
        await self._json("GET", "/batches", params={"limit": "1"})

    def parse(self, body: bytes) -> ChatResponse:
        return parse_response(body)


def parse_line(line: bytes) -> ResultLine:
    """An output- or error-file line: a 200 body, an HTTP error body, or a batch-level error."""
    try:
        data = orjson.loads(line)
        cid = str(data["custom_id"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return ResultLine(custom_id="", kind="bad_response", message=f"unreadable result line {line[:100]!r}")
    err = data.get("error")
    resp = data.get("response") or {}
    if isinstance(err, dict) and err:
        code = str(err.get("code") or "")
        # batch_expired / batch_cancelled: the request never ran, so it may run again
        kind: ErrorKind = "transient" if code in ("batch_expired", "batch_cancelled") else "fatal"
        return ResultLine(custom_id=cid, kind=kind, message=f"{code}: {err.get('message', '')}"[:300])
    status = int(resp.get("status_code") or 0)
    body = orjson.dumps(resp.get("body"))
    if status == 200:
        return ResultLine(custom_id=cid, body=body)
    e = classify_http_error(status, body, None)
    return ResultLine(custom_id=cid, kind=e.kind, message=str(e.args[0]))
