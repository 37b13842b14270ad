"""Gemini's batch mode: ``models/{model}:batchGenerateContent``, inline requests or an uploaded JSONL file.

The two inputs the docs describe, and how results come back from each:

- inline: ``inputConfig.requests.requests[]`` of ``{request, metadata: {key}}`` in the create
  call itself, for a create body under 20 MB. Responses come back in the operation
  (``response.inlinedResponses``), each with its request's ``metadata``: matched by key
  (``inline_results``; by order only when no response has a key, and never when counts differ).
- file: a JSONL file of ``{"key", "request"}`` lines, uploaded through the Files API's resumable
  protocol (``upload/v1beta/files``: a ``start`` command, then the bytes in chunks, the last one
  with ``finalize``), and ``inputConfig.fileName``. Results are a responses file
  (``response.responsesFile``, downloaded with ``download/v1beta/files/...:download?alt=media``)
  of ``{"key", "response"}`` or ``{"key", "error"}`` lines: matched by key.

Which one: inline whenever the whole create body fits under 20 MB, the file above. Inline is one
call instead of three and leaves nothing in the project's Files storage (20 GB, files kept 48 h);
the file is the only way past 20 MB, which image rounds reach quickly since every round re-sends
its images. The choice depends on the batch's lines alone, so a rerun makes the same one. The
journal holds the file-format line (``line``); an inline entry is cut from it without parsing.
A batch may then be as large as one file: 2 GB (the Files API's per-file limit).

Restarts: the batch's ``displayName`` and the input file's ``displayName`` are both the
journal's local id, so ``find`` lists batches and ``find_file`` lists files by it; the uploaded
file's name is journaled (``on_file``) before the batch is created, a journaled file that is
gone (expired after 48 h) is uploaded again, and a retry after an upload that broke off (a lost
finalize answer) looks for the file it may have made before uploading another. Once a file batch
has ended (and its responses are downloaded), its input file is deleted, best effort, to give the
project's storage back.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
import orjson

from providers.base import ChatRequest, ChatResponse, ProviderError
from providers.batch.base import (
    BatchInfo,
    BatchState,
    ListGuard,
    OnFile,
    ResultLine,
    custom_id_ok,
    http_with_headers,
)
from providers.batch.http_wire import HttpBatchWire, iso_ts
from providers.batch.result_lines import LongLine
from providers.gemini import GeminiProvider, classify_gemini_error, parse_gemini_response

log = logging.getLogger(__name__)

_STATES: dict[str, BatchState] = {}
for _prefix in ("BATCH_STATE_", "JOB_STATE_"):  # the REST enum, and the SDK's words for the same states
    _STATES.update({f"{_prefix}PENDING": "running", f"{_prefix}RUNNING": "running",
                    f"{_prefix}SUCCEEDED": "ended", f"{_prefix}FAILED": "ended",
                    f"{_prefix}CANCELLED": "ended", f"{_prefix}EXPIRED": "ended"})
_HTTP = {"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "PERMISSION_DENIED": 403, "NOT_FOUND": 404,
         "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500, "UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504}

INLINE_MAX_BYTES = 20 * 1000 * 1000
"""The documented ceiling of an inline batch: the whole create request under 20 MB."""
FILE_MAX_BYTES = 2 * 1000 * 1000 * 1000
"""The Files API's per-file limit (2 GB): one batch's input file."""
_GRANULARITY = 256 * 1024
"""Resumable upload chunks other than the last are multiples of this (unless the server says another)."""

_FILE_NAME = re.compile(r"^files/[A-Za-z0-9_-]{1,128}$")
_BATCH_NAME = re.compile(r"batches/[A-Za-z0-9_-]{1,128}\Z")
_HEAD = b'{"key":"'
_MID = b'","request":'


def split_line(line: bytes) -> tuple[str, bytes]:
    """``(key, request body)`` of a journaled line; our own lines are sliced, the body never re-encoded.

    A line of the earlier inline-only journal (``{"request", "metadata": {"key"}}``) is parsed.
    """
    mid = line.find(_MID)
    if line.startswith(_HEAD) and mid > 0 and line.endswith(b"}"):
        key = line[len(_HEAD):mid].decode("ascii", "replace")
        if custom_id_ok(key):
            return key, line[mid + len(_MID):-1]
    data = orjson.loads(line)
    key = data["key"] if "key" in data else data["metadata"]["key"]
    return str(key), orjson.dumps(data["request"])


def _inline_entry(line: bytes) -> bytes:
    key, body = split_line(line)
    return b'{"request":' + body + b',"metadata":{"key":' + orjson.dumps(key) + b"}}"


def _inline_size(line: bytes) -> int:
    """The bytes ``line`` takes as an inline entry (ours: 13 more than as a file line), comma included."""
    return len(line) + 13 + 1 if line.startswith(_HEAD) else len(_inline_entry(line)) + 1


class GeminiBatchWire(HttpBatchWire):
    max_requests = 100_000
    max_bytes = FILE_MAX_BYTES
    name = "gemini"
    inline_max_bytes = INLINE_MAX_BYTES
    upload_chunk_bytes = 8 * 1024 * 1024
    """Bytes per upload call: the input is streamed from its lines, never joined whole in memory."""

    def __init__(self, provider: GeminiProvider, *, timeout_s: float = 600.0) -> None:
        super().__init__(provider._headers, aiohttp.ClientTimeout(total=timeout_s, sock_connect=10.0),
                         provider.base_url)
        self.provider = provider
        self.base = provider.base_url
        self.root = f"{provider.base_url}/v1beta"
        self._interrupted: set[str] = set()
        """Local ids whose upload broke off after its start: a file may exist (a lost finalize answer)."""

    def classify(self, status: int, body: bytes) -> ProviderError:
        return classify_gemini_error(status, body, None)

    async def body(self, request: ChatRequest) -> bytes:
        return orjson.dumps(await self.provider.build_payload(request))

    def line(self, custom_id: str, body: bytes) -> bytes:
        """The input file's line; an inline entry is cut from it when the batch goes inline."""
        return _HEAD + custom_id.encode() + _MID + body + b"}" if custom_id_ok(custom_id) else \
            b'{"key":' + orjson.dumps(custom_id) + b',"request":' + body + b"}"

    def entry(self, line: bytes) -> tuple[str, bytes]:
        return split_line(line)

    # -- create --------------------------------------------------------------------------------------
    def _inline_body(self, local_id: str, lines: list[bytes]) -> bytes | None:
        """The inline create body, or None when it would not stay under the inline limit."""
        head = b'{"batch":{"displayName":' + orjson.dumps(local_id) + b',"inputConfig":{"requests":{"requests":['
        tail = b"]}}}}"
        size = len(head) + len(tail)
        for x in lines:
            size += _inline_size(x)
            if size >= self.inline_max_bytes:
                return None
        return head + b",".join(_inline_entry(x) for x in lines) + tail

    async def create(self, local_id: str, lines: list[bytes], *, file_id: str | None, on_file: OnFile) -> str:
        data = None if file_id else self._inline_body(local_id, lines)
        if data is None:
            if file_id is None and local_id in self._interrupted:  # retried: the broken upload may have landed
                file_id = await self.find_file(local_id)
                if file_id is not None:
                    await on_file(file_id)
            if file_id is None or not await self._file_usable(file_id):
                file_id = await self.upload(local_id, lines)
                await on_file(file_id)
            data = orjson.dumps({"batch": {"displayName": local_id, "inputConfig": {"fileName": file_id}}})
        url = f"{self.root}/models/{self.provider.model}:batchGenerateContent"
        return str((await self._json("POST", url, data=data))["name"])

    async def upload(self, local_id: str, lines: list[bytes]) -> str:
        """Upload the batch's input file (resumable: start, chunks, finalize); its name (``files/...``)."""
        lines = [x if x.startswith(_HEAD) else self.line(*split_line(x)) for x in lines]  # an earlier journal's
        size = sum(len(x) + 1 for x in lines)
        start = {"X-Goog-Upload-Protocol": "resumable", "X-Goog-Upload-Command": "start",
                 "X-Goog-Upload-Header-Content-Length": str(size),
                 "X-Goog-Upload-Header-Content-Type": "application/jsonl", "Content-Type": "application/json"}
        url = f"{self.base}/upload/v1beta/files"
        _, headers = await http_with_headers(self._s(), "POST", url, self.classify, headers=start,
                                             data=orjson.dumps({"file": {"displayName": local_id}}))
        session_url = self._session_url(headers)
        granularity = _int(headers.get("X-Goog-Upload-Chunk-Granularity")) or _GRANULARITY
        chunk = max(granularity, self.upload_chunk_bytes // granularity * granularity)
        self._interrupted.add(local_id)
        buf = bytearray()
        offset = 0
        for x in lines:
            buf += x
            buf += b"\n"
            while len(buf) > chunk:  # a full chunk with more to follow; the last bytes go with finalize
                await self._send(session_url, bytes(buf[:chunk]), offset, "upload")
                offset += chunk
                del buf[:chunk]
        raw, headers = await self._send(session_url, bytes(buf), offset, "upload, finalize")
        self._interrupted.discard(local_id)
        if str(headers.get("X-Goog-Upload-Status", "final")).lower() != "final":
            raise ProviderError("bad_response", f"upload of {local_id}: not final after finalize")
        try:
            name = orjson.loads(raw)["file"]["name"]
        except (orjson.JSONDecodeError, KeyError, TypeError):
            raise ProviderError("bad_response", f"upload of {local_id}: no file in {raw[:120]!r}") from None
        return file_name(name)

    def _session_url(self, headers: Mapping[str, str]) -> str:
        """The upload session's URL, moved onto our base URL's origin: the chunks carry our key, so they
        go nowhere else, and behind a gateway the API's own host in it is not one we can reach
        (Google's client does the same)."""
        url = str(headers.get("X-Goog-Upload-URL") or "")
        theirs = urlsplit(url)
        if not theirs.path.startswith("/") or theirs.scheme not in ("http", "https"):
            raise ProviderError("bad_response", f"resumable upload: unusable session URL {url[:120]!r}")
        ours = urlsplit(self.base)
        return urlunsplit((ours.scheme, ours.netloc, theirs.path, theirs.query, ""))

    async def _send(self, url: str, data: bytes, offset: int, command: str) -> tuple[bytes, Mapping[str, str]]:
        headers = {"X-Goog-Upload-Command": command, "X-Goog-Upload-Offset": str(offset),
                   "Content-Type": "application/octet-stream"}
        return await http_with_headers(self._s(), "POST", url, self.classify, headers=headers, data=data)

    async def _file_usable(self, file_id: str) -> bool:
        """A journaled input file still there (the Files API keeps them 48 h) and complete."""
        try:
            meta = await self._json("GET", f"{self.root}/{file_name(file_id)}")
        except ProviderError as e:
            if e.status in (403, 404):  # gone, or no longer ours to read
                return False
            raise
        return str(meta.get("state", "ACTIVE")) == "ACTIVE"

    # -- the batch -----------------------------------------------------------------------------------
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
        source = meta.get("inputConfig") or {}
        extra = {"inputFile": str(source["fileName"])} if isinstance(source, dict) and source.get("fileName") else {}
        return BatchInfo(id=str(op["name"]), state=state, status=status, counts=counts,
                         created_at=iso_ts(meta.get("createTime")), expired=status.endswith("EXPIRED"), failed=failed,
                         metadata={"displayName": str(meta.get("displayName", "")), **extra},
                         output_ref=orjson.dumps(op.get("response") or meta.get("output") or {}).decode())

    async def retrieve(self, batch_id: str) -> BatchInfo:
        return self.info(await self._json("GET", f"{self.root}/{batch_name(batch_id)}"))

    async def cancel(self, batch_id: str) -> BatchInfo:
        await self._json("POST", f"{self.root}/{batch_name(batch_id)}:cancel")
        return await self.retrieve(batch_id)

    async def results(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        out = await self._outcomes(info, ids)
        await self._drop_input(info)  # ended: a resubmission uploads its own file
        return out

    async def _outcomes(self, info: BatchInfo, ids: list[str]) -> list[ResultLine]:
        if info.expired:
            return []  # nothing ran: every request counts as not succeeded
        output = orjson.loads(info.output_ref or "{}")
        responses = output.get("responsesFile")
        if responses:
            try:
                lines = await self._lines(f"{self.base}/download/v1beta/{file_name(responses)}:download",
                                          params={"alt": "media"})
            except ProviderError as e:
                if e.status == 404:  # a responses file past its 48 h: its requests count as not succeeded
                    return []
                raise
            return file_results(lines, ids)
        inlined = (output.get("inlinedResponses") or {}).get("inlinedResponses") or []
        return inline_results(inlined if isinstance(inlined, list) else [], ids, info.id,
                              complete=info.status.endswith("_SUCCEEDED"))

    async def _drop_input(self, info: BatchInfo) -> None:
        """Delete an ended batch's input file (ours: same display name): it only fills the project's storage."""
        name = info.metadata.get("inputFile")
        if not name:
            return
        try:
            meta = await self._json("GET", f"{self.root}/{file_name(name)}")
            if meta.get("displayName") == info.metadata.get("displayName"):
                await self._call("DELETE", f"{self.root}/{name}")
        except ProviderError as e:  # it expires by itself within 48 h
            log.debug("batch %s: input file %s not deleted: %s", info.id, name, e)

    async def find(self, local_id: str, since: float, n_requests: int, claimed: set[str]) -> str | None:
        token: str | None = None
        guard = ListGuard("GET batches")
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
            token = guard.next(str(token))

    async def find_file(self, local_id: str) -> str | None:
        """An input file uploaded (and finalized) for ``local_id``: the list has no filter, so it is paged
        through (files live 48 h, so it is bounded); an upload cut before finalize left no file."""
        token: str | None = None
        seen: set[str] = set()
        while True:
            params = {"pageSize": "100", **({"pageToken": token} if token else {})}
            page = await self._json("GET", f"{self.root}/files", params=params)
            for f in page.get("files") or []:
                if f.get("displayName") == local_id and str(f.get("state", "ACTIVE")) == "ACTIVE":
                    return file_name(f.get("name"))
            token = page.get("nextPageToken")
            if not token or token in seen:
                return None
            seen.add(token)

    async def probe(self) -> None:
        await self._json("GET", f"{self.root}/batches", params={"pageSize": "1"})

    def parse(self, body: bytes) -> ChatResponse:
        return parse_gemini_response(body)


def batch_name(value: Any) -> str:
    """A batch's name (``batches/<id>``) from the journal or an answer, refused unless exactly that."""
    name = str(value)
    if not _BATCH_NAME.match(name):
        raise ProviderError("fatal", f"not a batch name: {name[:120]!r} (a hostile server or a tampered journal)")
    return name


def file_name(value: Any) -> str:
    """A Files API name as the provider gave it (``files/<id>``), refused if it is anything else: it
    goes into URLs that carry our key."""
    name = str(value)
    if not _FILE_NAME.match(name):
        raise ProviderError("bad_response", f"not a Files API name: {name[:120]!r}")
    return name


def _int(value: Any) -> int:
    try:
        return max(0, int(str(value)))
    except ValueError:
        return 0


def file_results(lines: list[bytes | LongLine], ids: list[str]) -> list[ResultLine]:
    """A responses file's lines, matched by ``key`` (a line without one takes its place in the input)."""
    out: list[ResultLine] = []
    for i, line in enumerate(lines):
        if isinstance(line, LongLine):
            out.append(line.result())
            continue
        try:
            data = orjson.loads(line)
        except orjson.JSONDecodeError:
            out.append(ResultLine(custom_id="", kind="bad_response", message=f"unreadable result line {line[:100]!r}"))
            continue
        if not isinstance(data, dict):
            out.append(ResultLine(custom_id="", kind="bad_response", message=f"unreadable result line {line[:100]!r}"))
            continue
        key = data.get("key")
        cid = str(key) if key is not None else ids[i] if i < len(ids) else ""
        if "response" not in data and "error" not in data and isinstance(data.get("status"), dict):
            data = {"error": data["status"]}  # a bare google.rpc.Status line
        elif "response" not in data and "error" not in data and "candidates" in data:
            data = {"response": data}  # a bare GenerateContentResponse line
        out.append(parse_inline(cid, data))
    return out


def inline_results(inlined: list[Any], ids: list[str], batch_id: str, *, complete: bool = True) -> list[ResultLine]:
    """Inline responses matched to our requests by the ``metadata.key`` we sent with each.

    Matched by position, a dropped or reordered entry gave jobs other requests' answers, recorded
    ``ok``. So a batch that succeeded (``complete``) with a count that differs, or any batch whose
    keys are not the batch's own (a stranger, a duplicate, one missing among keyed ones), fails
    every request of the batch (``fatal``: nothing guessed, nothing paid for again). Only when no
    response carries a key (the API has been seen to omit ``metadata``) do we fall back on the
    documented request order, and then only with the counts equal. A cancelled or expired batch
    may hold a part: keyed, it is matched; unkeyed, it cannot be placed and counts as not done.
    """
    def refused(why: str) -> list[ResultLine]:
        msg = f"batch {batch_id}: {why}: answers are never matched to requests by guess"
        return [ResultLine(custom_id=c, kind="fatal", message=msg) for c in ids]

    if complete and len(inlined) != len(ids):
        return refused(f"{len(inlined)} inline responses for {len(ids)} requests")
    keys = [_inline_key(x) for x in inlined]
    if all(k is None for k in keys):
        if len(inlined) != len(ids):
            return []
        return [parse_inline(cid, item) for cid, item in zip(ids, inlined, strict=True)]
    if None in keys or len(set(keys)) != len(keys) or not set(keys) <= set(ids):
        return refused("the inline responses' metadata keys are not the batch's requests")
    return [parse_inline(k or "", item) for k, item in zip(keys, inlined, strict=True)]


def _inline_key(item: Any) -> str | None:
    meta = item.get("metadata") if isinstance(item, dict) else None
    key = meta.get("key") if isinstance(meta, dict) else None
    return key if isinstance(key, str) else None


def parse_inline(cid: str, item: Any) -> ResultLine:
    """One response: a GenerateContentResponse, or a google.rpc.Status error classified as interactively."""
    if not isinstance(item, dict):
        return ResultLine(custom_id=cid, kind="bad_response", message="unreadable inline response")
    if isinstance(item.get("response"), dict):
        return ResultLine(custom_id=cid, body=orjson.dumps(item["response"]))
    err: dict[str, Any] = item["error"] if isinstance(item.get("error"), dict) else {}
    status = _int(err.get("code")) or _HTTP.get(str(err.get("status")), 500)
    e = classify_gemini_error(status, orjson.dumps({"error": err}), None)
    return ResultLine(custom_id=cid, kind=e.kind, message=str(e.args[0])[:300])
