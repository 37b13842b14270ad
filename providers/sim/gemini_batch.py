"""The sim's Gemini batch mode and the Files API it reads its input from, written from Google's docs.

- Files: ``POST /upload/v1beta/files`` with ``X-Goog-Upload-Protocol: resumable`` and
  ``X-Goog-Upload-Command: start`` (declared size and type in ``X-Goog-Upload-Header-*``, the
  display name in the JSON body) answers with the session's ``X-Goog-Upload-URL``; bytes go to
  that URL with ``X-Goog-Upload-Command: upload`` (or ``upload, finalize`` for the last chunk, or
  ``query``) at ``X-Goog-Upload-Offset``; chunks before the last are multiples of the announced
  granularity. ``GET/DELETE /v1beta/files/{id}`` and ``GET /v1beta/files`` (paged) hold file
  metadata (``drop_finalize = N`` here: the next N finalize calls store the file and drop the
  connection unanswered); files are kept 48 h (``file_ttl_s`` here) and at most 2 GB each; only generated
  files (a batch's responses) can be downloaded, at ``/download/v1beta/files/{id}:download?alt=media``
  (the REST docs' path) or ``/v1beta/files/{id}:download?alt=media`` (the SDK's).
- Batches: ``models/{model}:batchGenerateContent`` takes ``inputConfig.requests.requests``
  (inline, the whole request under 20 MB) or ``inputConfig.fileName`` (a JSONL file of
  ``{"key", "request"}`` lines). The operation's ``response`` holds inline responses in request
  order, each with its request's ``metadata`` (the docs' ``InlinedResponse``), or a
  ``responsesFile`` whose lines are ``{"key", "response"}`` or
  ``{"key", "error"}``. ``batchStats`` counts requests; an expired or cancelled batch says so by
  its state alone. The model's ``batch_api:`` knobs (turnaround, cancel time, ``expire: N``,
  ``fail: N``) apply as in the other dialects; a failed batch carries its ``error``;
  ``reverse_responses: true`` lists a batch's responses (inline or file) in reverse order (they
  are keyed, so a client that matches them by key does not notice); ``drop_responses: N`` leaves
  the last N out.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from dataclasses import dataclass
from typing import Any

import orjson
from aiohttp import web

from providers.sim import gemini_api
from providers.sim.batch_host import BatchCore
from providers.sim.batch_state import SimBatch, ids, iso, reply_of
from providers.sim.wire import Rejected

INLINE_MAX = 20 * 1000 * 1000
FILE_MAX = 2 * 1000 * 1000 * 1000
GRANULARITY = 256 * 1024
_OUTPUT_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatchOutput"
_BATCH_TYPE = "type.googleapis.com/google.ai.generativelanguage.v1main.GenerateContentBatch"
_ENDED = ("BATCH_STATE_SUCCEEDED", "BATCH_STATE_FAILED", "BATCH_STATE_CANCELLED", "BATCH_STATE_EXPIRED")


@dataclass(slots=True)
class SimFile:
    name: str
    display_name: str
    mime: str
    data: bytes
    created: float
    source: str
    """``UPLOADED`` (an input; not downloadable) or ``GENERATED`` (a batch's responses)."""


@dataclass(slots=True)
class UploadSession:
    display_name: str
    mime: str
    declared: int
    data: bytearray


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=gemini_api.error_body(status, message), content_type="application/json")


def _either(obj: Any, camel: str, snake: str) -> Any:
    """A field by its JSON (camelCase) or proto (snake_case) name: the API takes both."""
    return obj.get(camel, obj.get(snake)) if isinstance(obj, dict) else None


class GeminiBatches:
    """Gemini's batches and files, on the shared batch core of ``BatchAPIs`` (processing, faults)."""

    def __init__(self, apis: BatchCore) -> None:
        self.apis = apis
        self.files: dict[str, SimFile] = {}
        self.uploads: dict[str, UploadSession] = {}
        self.file_ttl_s = 48 * 3600.0
        self.uploaded = 0
        """Upload sessions finalized: the tests' "uploaded twice?" counter."""
        self.drop_finalize = 0
        """Fault: the next N finalize calls store the file and then drop the connection unanswered."""
        self.contents: list[str] = []
        """A digest of every request body submitted in a batch (a duplicate is one paid twice by content)."""

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/upload/v1beta/files", self.upload)
        r.add_get("/v1beta/files", self.list_files)
        r.add_get("/v1beta/files/{id}", self.get_file)
        r.add_delete("/v1beta/files/{id}", self.delete_file)
        r.add_get("/download/v1beta/files/{id}", self.download)
        r.add_get("/v1beta/batches", self.list_batches)
        r.add_get("/v1beta/batches/{name}", self.get_batch)
        r.add_post("/v1beta/batches/{name}", self.cancel)

    def stats(self) -> dict[str, Any]:
        inputs = {b.input_file_id for b in self.apis.batches.values() if b.dialect == "gemini" and b.input_file_id}
        return {"uploaded": self.uploaded, "contents": self.contents, "input_files": sorted(inputs)}

    def _unauthorized(self, request: web.Request) -> web.Response | None:
        """The API key, from the header or ``?key=``, and the right one when the sim was given one."""
        key = request.headers.get("x-goog-api-key") or request.query.get("key")
        if not key:
            return _error(403, "Method doesn't allow unregistered callers. Please use an API key.")
        want = self.apis.server.api_keys.get("gemini")
        if want is not None and key != want:
            return _error(400, "API key not valid. Please pass a valid API key.")
        return None

    # -- files ---------------------------------------------------------------------------------------
    def _file(self, fid: str) -> SimFile | None:
        f = self.files.get(f"files/{fid}")
        if f is not None and time.time() - f.created > self.file_ttl_s:  # expired: gone
            del self.files[f.name]
            return None
        return f

    def _file_view(self, f: SimFile) -> dict[str, Any]:
        port = self.apis.server.port
        return {"name": f.name, "displayName": f.display_name, "mimeType": f.mime, "sizeBytes": str(len(f.data)),
                "createTime": iso(f.created), "updateTime": iso(f.created),
                "expirationTime": iso(f.created + self.file_ttl_s),
                "sha256Hash": base64.b64encode(hashlib.sha256(f.data).digest()).decode(),
                "uri": f"http://127.0.0.1:{port}/v1beta/{f.name}", "state": "ACTIVE", "source": f.source}

    def _new_file(self, display_name: str, mime: str, data: bytes, source: str, name: str | None = None) -> SimFile:
        f = SimFile(name=name or f"files/sim{next(ids)}{secrets.token_hex(4)}", display_name=display_name, mime=mime,
                    data=data, created=time.time(), source=source)
        self.files[f.name] = f
        return f

    async def upload(self, request: web.Request) -> web.Response:
        if request.query.get("upload_id"):  # the session's own URL: its id is the credential, as at Google
            return await self._upload_command(request, request.query["upload_id"])
        if (refused := self._unauthorized(request)) is not None:
            return refused
        h = request.headers
        if h.get("X-Goog-Upload-Protocol", "").lower() != "resumable" or \
                h.get("X-Goog-Upload-Command", "").lower() != "start":
            return _error(400, "the sim speaks the resumable upload protocol: X-Goog-Upload-Command: start first")
        try:
            declared = int(h.get("X-Goog-Upload-Header-Content-Length", ""))
        except ValueError:
            return _error(400, "X-Goog-Upload-Header-Content-Length is required")
        if declared > FILE_MAX:
            return _error(400, f"File size {declared} exceeds the 2 GB limit per file")
        raw = await request.read()
        meta = orjson.loads(raw) if raw.strip() else {}
        file = meta.get("file") if isinstance(meta, dict) else None
        display = str(_either(file, "displayName", "display_name") or "")
        token = secrets.token_urlsafe(16)
        self.uploads[token] = UploadSession(display_name=display, declared=declared, data=bytearray(),
                                            mime=h.get("X-Goog-Upload-Header-Content-Type", "application/octet-stream"))
        url = f"http://127.0.0.1:{self.apis.server.port}/upload/v1beta/files?upload_id={token}&upload_protocol=resumable"
        return web.Response(status=200, headers={"X-Goog-Upload-URL": url, "X-Goog-Upload-Status": "active",
                                                 "X-Goog-Upload-Chunk-Granularity": str(GRANULARITY)})

    async def _upload_command(self, request: web.Request, token: str) -> web.Response:
        session = self.uploads.get(token)
        if session is None:
            return _error(404, "upload session not found")
        commands = {c.strip().lower() for c in request.headers.get("X-Goog-Upload-Command", "").split(",")}
        if "query" in commands:
            return web.Response(headers={"X-Goog-Upload-Status": "active",
                                         "X-Goog-Upload-Size-Received": str(len(session.data))})
        if not commands & {"upload", "finalize"}:
            return _error(400, "X-Goog-Upload-Command must be upload, finalize or query")
        data = await request.read()
        if "upload" in commands:
            try:
                offset = int(request.headers.get("X-Goog-Upload-Offset", ""))
            except ValueError:
                return _error(400, "X-Goog-Upload-Offset is required")
            if offset != len(session.data):
                return _error(400, f"X-Goog-Upload-Offset {offset} does not match the {len(session.data)} bytes received")
            if "finalize" not in commands and len(data) % GRANULARITY:
                return _error(400, f"a chunk before the last must be a multiple of {GRANULARITY} bytes")
            session.data += data
        if len(session.data) > session.declared or ("finalize" in commands and len(session.data) != session.declared):
            del self.uploads[token]
            return _error(400, f"received {len(session.data)} bytes, declared {session.declared}")
        if "finalize" not in commands:
            return web.Response(headers={"X-Goog-Upload-Status": "active",
                                         "X-Goog-Upload-Size-Received": str(len(session.data))})
        del self.uploads[token]
        f = self._new_file(session.display_name, session.mime, bytes(session.data), "UPLOADED")
        self.uploaded += 1
        if self.drop_finalize > 0 and request.transport is not None:
            self.drop_finalize -= 1
            request.transport.close()
            return web.Response(status=500)
        return web.json_response({"file": self._file_view(f)}, headers={"X-Goog-Upload-Status": "final"})

    async def get_file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["id"].endswith(":download"):  # the SDK's path for a download (REST: /download/...)
            return await self.download(request)
        if (refused := self._unauthorized(request)) is not None:
            return refused
        f = self._file(request.match_info["id"])
        if f is None:
            return _error(404, f"File files/{request.match_info['id']} not found")
        return web.json_response(self._file_view(f))

    async def list_files(self, request: web.Request) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        live = [f for f in list(self.files.values()) if self._file(f.name.removeprefix("files/")) is not None]
        start = int(request.query.get("pageToken") or 0)
        size = max(1, min(100, int(request.query.get("pageSize", 10))))
        out: dict[str, Any] = {"files": [self._file_view(f) for f in live[::-1][start:start + size]]}
        if start + size < len(live):
            out["nextPageToken"] = str(start + size)
        return web.json_response(out)

    async def delete_file(self, request: web.Request) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        f = self._file(request.match_info["id"])
        if f is None:
            return _error(404, f"File files/{request.match_info['id']} not found")
        del self.files[f.name]
        return web.json_response({})

    async def download(self, request: web.Request) -> web.StreamResponse:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        fid, _, action = request.match_info["id"].partition(":")
        f = self._file(fid) if action == "download" else None
        if f is None:
            return _error(404, f"File files/{fid} not found")
        if request.query.get("alt") != "media":
            return _error(400, "download needs alt=media")
        if f.source != "GENERATED":
            return _error(400, "Only generated files (a batch's responses) can be downloaded")
        return web.Response(body=f.data, content_type="application/jsonl")

    # -- batches -------------------------------------------------------------------------------------
    async def create(self, request: web.Request, model: str) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        if model not in self.apis.server.models:
            return _error(404, f"models/{model} is not found")
        if request.content_length and request.content_length > INLINE_MAX:
            return _error(400, "Request payload size exceeds the limit of 20 MB: use an input file")
        body = await request.json()
        spec = body.get("batch") if isinstance(body, dict) else None
        display = _either(spec, "displayName", "display_name")
        source = _either(spec, "inputConfig", "input_config")
        if not display or not isinstance(source, dict):
            return _error(400, "batch.displayName and batch.inputConfig are required")
        file_name = _either(source, "fileName", "file_name")
        inline = (source.get("requests") or {}).get("requests") if isinstance(source.get("requests"), dict) else None
        if (file_name is None) == (inline is None):
            return _error(400, "batch.inputConfig takes exactly one of requests or fileName")
        if inline is not None:
            if not isinstance(inline, list) or not inline:
                return _error(400, "batch.inputConfig.requests.requests must be a non-empty list")
            entries = inline
            keys = [str((r.get("metadata") or {}).get("key")) for r in inline]
        else:
            f = self._file(str(file_name).removeprefix("files/"))
            if f is None:
                return _error(404, f"File {file_name} not found")
            try:
                entries = [orjson.loads(x) for x in f.data.splitlines() if x.strip()]
            except orjson.JSONDecodeError:
                return _error(400, f"{file_name} is not a JSONL file of requests")
            if not entries or not all(isinstance(e, dict) and isinstance(e.get("request"), dict) for e in entries):
                return _error(400, f"every line of {file_name} must be an object with a request")
            keys = [str(e.get("key")) for e in entries]
        batch = SimBatch(id=f"batches/sim{next(ids)}", dialect="gemini", requests=entries, created_at=time.time(),
                         input_file_id=None if file_name is None else str(file_name),
                         metadata={"displayName": str(display), "model": model}, status="BATCH_STATE_PENDING")
        self.contents += [hashlib.blake2b(orjson.dumps(e.get("request"), option=orjson.OPT_SORT_KEYS),
                                          digest_size=16).hexdigest() for e in entries]
        if self.apis._take(model, "fail"):
            batch.failure = "the batch failed validation (sim fault)"
        self.apis._register(batch, keys)
        return web.json_response(self.view(batch))

    def view(self, b: SimBatch) -> dict[str, Any]:
        done = b.status in _ENDED
        meta: dict[str, Any] = {
            "@type": _BATCH_TYPE, "model": f"models/{b.metadata['model']}", "displayName": b.metadata["displayName"],
            "createTime": iso(b.created_at), "updateTime": iso(b.ended_at or b.created_at), "endTime": iso(b.ended_at),
            "state": b.status,
            "batchStats": {"requestCount": str(len(b.requests)), "successfulRequestCount": str(b.succeeded),
                           "failedRequestCount": str(len(b.results) - b.succeeded),
                           "pendingRequestCount": str(len(b.requests) - len(b.results))}}
        if b.input_file_id:
            meta["inputConfig"] = {"fileName": b.input_file_id}
        out: dict[str, Any] = {"name": b.id, "done": done, "metadata": meta}
        if b.status == "BATCH_STATE_SUCCEEDED":
            output: dict[str, Any] = {"@type": _OUTPUT_TYPE}
            if b.input_file_id:
                output["responsesFile"] = self._responses(b)
            else:
                output["inlinedResponses"] = {"inlinedResponses": [orjson.loads(x) for x in self._hostile(b, b.results)]}
            out["response"] = output
            meta["output"] = {k: v for k, v in output.items() if k != "@type"}
        elif b.status == "BATCH_STATE_FAILED":
            out["error"] = {"code": 400, "message": b.failure or "failed", "status": "INVALID_ARGUMENT"}
        return out

    def _hostile(self, b: SimBatch, results: list[bytes]) -> list[bytes]:
        """A batch's responses as the model's knobs spoil them: reversed, the last N missing."""
        opts = self.apis._opts(str(b.metadata["model"]))
        out = results[::-1] if opts.get("reverse_responses") else list(results)
        drop = int(opts.get("drop_responses") or 0)
        return out[:len(out) - drop] if drop else out

    def _responses(self, b: SimBatch) -> str:
        """The batch's responses file, written once when first asked for."""
        name = f"files/batch-{b.id.removeprefix('batches/')}"
        if name not in self.files:
            lines = self._hostile(b, b.results)
            self._new_file(f"{b.metadata['displayName']}-responses", "application/jsonl",
                           b"\n".join(lines) + b"\n", "GENERATED", name=name)
        return name

    async def list_batches(self, request: web.Request) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        mine = [b for b in self.apis.batches.values() if b.dialect == "gemini"][::-1]
        start = int(request.query.get("pageToken") or 0)
        size = max(1, min(100, int(request.query.get("pageSize", 20))))
        out: dict[str, Any] = {"operations": [self.view(b) for b in mine[start:start + size]]}
        if start + size < len(mine):
            out["nextPageToken"] = str(start + size)
        return web.json_response(out)

    async def get_batch(self, request: web.Request) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        b = self.apis.batches.get(f"batches/{request.match_info['name']}")
        if b is None or b.dialect != "gemini":
            return _error(404, "batch not found")
        return web.json_response(self.view(b))

    async def cancel(self, request: web.Request) -> web.Response:
        if (refused := self._unauthorized(request)) is not None:
            return refused
        name, _, action = request.match_info["name"].partition(":")
        b = self.apis.batches.get(f"batches/{name}")
        if b is None or b.dialect != "gemini" or action != "cancel":
            return _error(404, "batch not found")
        if b.status in ("BATCH_STATE_PENDING", "BATCH_STATE_RUNNING"):
            b.cancel.set()
        return web.json_response({})

    # -- processing ----------------------------------------------------------------------------------
    async def answer(self, b: SimBatch, entry: dict[str, Any]) -> None:
        """One request through the interactive core; a file batch's line carries its key."""
        result = await self._result(str(b.metadata["model"]), entry.get("request"))
        if "response" in result:
            b.succeeded += 1
        # a file line carries its key; an inline response its request's metadata (the docs' InlinedResponse)
        keyed = {"key": entry.get("key"), **result} if b.input_file_id else \
            {**({"metadata": entry["metadata"]} if isinstance(entry.get("metadata"), dict) else {}), **result}
        b.results.append(orjson.dumps(keyed))

    async def _result(self, model: str, body: Any) -> dict[str, Any]:
        try:
            gemini_api.validate({"x-goog-api-key": "batch"}, body, None)
        except Rejected as r:
            return {"error": {"code": r.status, "message": r.message, "status": r.kind}}
        assert isinstance(body, dict)
        server = self.apis.server
        resp = await server.answer(gemini_api.to_openai(model, body), None)
        reply = reply_of(resp)
        if reply is None:
            status = resp.status if resp.status != 200 else 500
            return {"error": {"code": status, "message": f"sim fault {resp.status}",
                              "status": "INVALID_ARGUMENT" if status == 400 else "INTERNAL"}}
        usage = server.gemini_wire.cache.usage(body)
        return {"response": gemini_api.from_reply(body, reply, usage)}
