"""Gemini's batch mode: ``models/{model}:batchGenerateContent`` with inline requests.

Each inline request is ``{request: GenerateContentRequest, metadata: {key}}``; the batch is a
long-running operation (``batches/{id}``) whose ``displayName`` we set to the journal's local id,
so a batch created just before a crash is found again by listing. Inline responses come back in
request order and are matched by order, never by key. Inline batches must stay under 20 MB in
all, so they are split at that size (the uploaded-file input for larger ones is not spoken yet).
"""

from __future__ import annotations

from typing import Any

import aiohttp
import orjson

from providers.base import ChatRequest, ChatResponse, ProviderError
from providers.batch.base import BatchInfo, BatchState, OnFile, ResultLine
from providers.batch.http_wire import HttpBatchWire, iso_ts
from providers.gemini import GeminiProvider, classify_gemini_error, parse_gemini_response

_STATES: dict[str, BatchState] = {}
for _prefix in ("BATCH_STATE_", "JOB_STATE_"):  # the REST enum, and the SDK's words for the same states
    _STATES.update({f"{_prefix}PENDING": "running", f"{_prefix}RUNNING": "running",
                    f"{_prefix}SUCCEEDED": "ended", f"{_prefix}FAILED": "ended",
                    f"{_prefix}CANCELLED": "ended", f"{_prefix}EXPIRED": "ended"})
_HTTP = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
         "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504}


class GeminiBatchWire(HttpBatchWire):
    max_requests = 100_000
    max_bytes = 20 * 1000 * 1000
    name = "gemini"

    def __init__(self, provider: GeminiProvider, *, timeout_s: float = 600.0) -> None:
        super().__init__(provider._headers, aiohttp.ClientTimeout(total=timeout_s, sock_connect=10.0))
        self.provider = provider
        self.root = f"{provider.base_url}/v1beta"

    def classify(self, status: int, body: bytes) -> ProviderError:
        return classify_gemini_error(status, body, None)

    async def body(self, request: ChatRequest) -> bytes:
        return orjson.dumps(await self.provider.build_payload(request))

    def line(self, custom_id: str, body: bytes) -> bytes:
        return b'{"request":' + body + b',"metadata":{"key":' + orjson.dumps(custom_id) + b"}}"

    def entry(self, line: bytes) -> tuple[str, bytes]:
        data = orjson.loads(line)
        return str(data["metadata"]["key"]), orjson.dumps(data["request"])

    async def create(self, local_id: str, lines: list[bytes], *, file_id: str | None, on_file: OnFile) -> str:
        data = (b'{"batch":{"displayName":' + orjson.dumps(local_id) + b',"inputConfig":{"requests":{"requests":['
                + b",".join(lines) + b"]}}}}")
        url = f"{self.root}/models/{self.provider.model}:batchGenerateContent"
        return str((await self._json("POST", url, data=data))["name"])

    @staticmethod
    def info(op: dict[str, Any]) -> BatchInfo:
        meta = op.get("metadata") or {}
        status = str(meta.get("state"))
        state = _STATES.get(status)
        if state is None:
            raise ProviderError("bad_response", f"unknown batch state {status!r}")
        stats = meta.get("batchStats") or {}
        counts = {k: int(v) for k, v in stats.items() if isinstance(v, int | str) and str(v).isdigit()}
        failed = None
        if status.endswith("FAILED"):
            failed = str((op.get("error") or {}).get("message") or "failed")[:300]
        return BatchInfo(id=str(op["name"]), state=state, status=status, counts=counts,
                         created_at=iso_ts(meta.get("createTime")), expired=status.endswith("EXPIRED"), failed=failed,
                         metadata={"displayName": str(meta.get("displayName", ""))},
                         output_ref=orjson.dumps(op.get("response") or meta.get("output") or {}).decode())

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("GET", f"{self.root}/{batch_id}"))

    async def cancel(self, batch_id: str) -> BatchInfo:
        await self._json("POST", f"{self.root}/{batch_id}:cancel")
        return await self.retrieve(batch_id)

    async def results(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        if info.expired:
            return []  # nothing ran: every request counts as not succeeded
        output = orjson.loads(info.output_ref or "{}")
        inlined = (output.get("inlinedResponses") or {}).get("inlinedResponses") or []
        return [parse_inline(cid, item) for cid, item in zip(ids, inlined, strict=False)]  # by order, not by key

    async def find(self, local_id: str, since: float, n_requests: int, claimed: set[str]) -> str | None:
        token: str | None = None
        while True:
            params = {"pageSize": "100", **({"pageToken": token} if token else {})}
            page = await self._json("GET", f"{self.root}/batches", params=params)
            ops = page.get("operations") or []
            for op in ops:
                meta = op.get("metadata") or {}
                if meta.get("displayName") == local_id and op.get("name") not in claimed:
                    return str(op["name"])
            token = page.get("nextPageToken")
            oldest = min((iso_ts((op.get("metadata") or {}).get("createTime")) for op in ops), default=0.0)
            if not token or not ops or oldest < since - 60:
                return None

    async def find_file(self, local_id: str) -> str | None:
        return None  # inline requests: there is no file

    async def probe(self) -> None:
        await self._json("GET", f"{self.root}/batches", params={"pageSize": "1"})

    def parse(self, body: bytes) -> ChatResponse:
        return parse_gemini_response(body)


def parse_inline(cid: str, item: Any) -> ResultLine:
    """One inline response: a GenerateContentResponse, or a google.rpc.Status error."""
    if not isinstance(item, dict):
        return ResultLine(custom_id=cid, kind="bad_response", message="unreadable inline response")
    if isinstance(item.get("response"), dict):
        return ResultLine(custom_id=cid, body=orjson.dumps(item["response"]))
    err: dict[str, Any] = item["error"] if isinstance(item.get("error"), dict) else {}
    status = int(err.get("code") or _HTTP.get(str(err.get("status")), 500))
    e = classify_gemini_error(status, orjson.dumps({"error": err}), None)
    return ResultLine(custom_id=cid, kind=e.kind, message=str(e.args[0])[:300])
