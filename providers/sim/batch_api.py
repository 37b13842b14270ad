"""The sim's batch APIs, written from the providers' public docs: OpenAI Files + ``/v1/batches``,
Anthropic's ``/v1/messages/batches`` and Gemini's ``batchGenerateContent`` (inline or file input,
with the Files API it reads from: providers.sim.gemini_batch).

Each request of a batch goes through the same core as an interactive one (``SimServer.answer``:
the model's policy and fault schedule), so a per-request 400 or 500 comes back as that request's
error, an Anthropic request is validated only while its batch processes (as the real API does),
and results match an interactive run of the same policy. Per model, ``batch_api:`` sets the
turnaround, how long a cancel takes, and whole-batch faults (the first ``expire`` batches expire
with nothing done; the first ``fail`` are refused at validation).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import orjson
from aiohttp import web

from providers.sim import anthropic_api
from providers.sim.batch_host import BatchHost
from providers.sim.batch_state import SimBatch, iso, reply_of
from providers.sim.batch_state import ids as _ids
from providers.sim.gemini_batch import GeminiBatches
from providers.sim.wire import Rejected

OPENAI_ENDPOINTS = ("/v1/chat/completions", "/v1/responses")
"""The two endpoints of OpenAI's Batch API that fasteval's wires send to."""

log = logging.getLogger(__name__)


class BatchAPIs:
    """State of every file and batch the sim holds (in memory: the sim process is the provider)."""

    def __init__(self, server: BatchHost) -> None:
        self.server = server
        self.files: dict[str, dict[str, Any]] = {}
        self.contents: dict[str, bytes] = {}
        self.batches: dict[str, SimBatch] = {}
        self.created = 0
        """Batches created, all dialects: the tests' "submitted twice?" counter."""
        self.submitted: list[str] = []
        """Every custom_id ever submitted, in order (a duplicate here is a paid-twice request)."""
        self._faults: dict[str, dict[str, int]] = {}
        self.gemini = GeminiBatches(self)
        """Gemini's batches and the Files API they read from (providers.sim.gemini_batch)."""

    def routes(self, app: web.Application) -> None:
        r = app.router
        r.add_post("/v1/files", self.upload)
        r.add_get("/v1/files", self.list_files)
        r.add_get("/v1/files/{id}/content", self.file_content)
        r.add_delete("/v1/files/{id}", self.delete_file)
        r.add_post("/v1/batches", self.openai_create)
        r.add_get("/v1/batches", self.openai_list)
        r.add_get("/v1/batches/{id}", self.openai_get)
        r.add_post("/v1/batches/{id}/cancel", self.openai_cancel)
        r.add_post("/v1/messages/batches", self.anthropic_create)
        r.add_get("/v1/messages/batches", self.anthropic_list)
        r.add_get("/v1/messages/batches/{id}", self.anthropic_get)
        r.add_post("/v1/messages/batches/{id}/cancel", self.anthropic_cancel)
        r.add_get("/v1/messages/batches/{id}/results", self.anthropic_results)
        self.gemini.routes(app)
        app.router.add_get("/sim/batches", self.stats)

    async def stats(self, request: web.Request) -> web.Response:
        return web.json_response({"created": self.created, "submitted": self.submitted,
                                  "batches": {b.id: b.status for b in self.batches.values()},
                                  "gemini": self.gemini.stats()})

    # -- options and faults --------------------------------------------------------------------------
    def _opts(self, model: str) -> dict[str, Any]:
        m = self.server.models.get(model)
        opts = m.options.get("batch_api") if m is not None else None
        return dict(opts) if isinstance(opts, dict) else {}

    def _take(self, model: str, fault: str) -> bool:
        """Consume one of the model's first-N whole-batch faults (``expire: 1`` expires the first)."""
        used = self._faults.setdefault(model, {})
        if used.get(fault, 0) < int(self._opts(model).get(fault, 0)):
            used[fault] = used.get(fault, 0) + 1
            return True
        return False

    # -- OpenAI files --------------------------------------------------------------------------------
    async def upload(self, request: web.Request) -> web.Response:
        form = await request.post()
        purpose, upload = form.get("purpose"), form.get("file")
        if purpose != "batch" or not isinstance(upload, web.FileField):
            return _openai_error(400, "purpose must be 'batch' and a file must be given")
        data = upload.file.read()
        fid = f"file-sim{next(_ids)}"
        self.files[fid] = {"id": fid, "object": "file", "bytes": len(data), "created_at": int(time.time()),
                           "filename": upload.filename, "purpose": "batch", "status": "processed"}
        self.contents[fid] = data
        return web.json_response(self.files[fid])

    async def list_files(self, request: web.Request) -> web.Response:
        purpose = request.query.get("purpose")
        data = [f for f in self.files.values() if purpose is None or f["purpose"] == purpose]
        return web.json_response({"object": "list", "data": data[::-1], "has_more": False})

    async def file_content(self, request: web.Request) -> web.Response:
        fid = request.match_info["id"]
        if fid not in self.contents:
            return _openai_error(404, f"No such File object: {fid}")
        return web.Response(body=self.contents[fid], content_type="application/octet-stream")

    async def delete_file(self, request: web.Request) -> web.Response:
        fid = request.match_info["id"]
        self.files.pop(fid, None)
        self.contents.pop(fid, None)
        return web.json_response({"id": fid, "object": "file", "deleted": True})

    # -- OpenAI batches ------------------------------------------------------------------------------
    async def openai_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        fid = body.get("input_file_id")
        if fid not in self.contents:
            return _openai_error(400, f"input_file_id {fid!r} not found")
        endpoint = body.get("endpoint")
        if endpoint not in OPENAI_ENDPOINTS or body.get("completion_window") != "24h":
            return _openai_error(400, f"endpoint must be one of {', '.join(OPENAI_ENDPOINTS)} and completion_window "
                                 "24h")
        lines = [orjson.loads(x) for x in self.contents[fid].splitlines() if x.strip()]
        batch = SimBatch(id=f"batch_sim{next(_ids)}", dialect="openai", requests=lines, created_at=time.time(),
                         input_file_id=fid, metadata=dict(body.get("metadata") or {}), status="validating",
                         endpoint=str(endpoint))
        models = {str((x.get("body") or {}).get("model")) for x in lines}
        ids = [str(x.get("custom_id")) for x in lines]
        if any(x.get("url") != endpoint for x in lines):
            batch.failure = f"every line's url must be the batch's endpoint {endpoint}"
        elif len(models) != 1:
            batch.failure = "a batch input file may hold requests for one model only"
        elif len(set(ids)) != len(ids):
            batch.failure = "custom_id values must be unique within a batch"
        elif self._take(next(iter(models)), "fail"):
            batch.failure = "input file failed validation (sim fault)"
        self._register(batch, ids)
        return web.json_response(self._openai_view(batch))

    def _register(self, batch: SimBatch, ids: list[str]) -> None:
        self.batches[batch.id] = batch
        self.created += 1
        self.submitted += ids
        batch.task = asyncio.get_running_loop().create_task(self._process(batch))

    def _openai_view(self, b: SimBatch) -> dict[str, Any]:
        done = [orjson.loads(x) for x in b.results]
        failed = len(b.errors)
        out: dict[str, Any] = {
            "id": b.id, "object": "batch", "endpoint": b.endpoint, "input_file_id": b.input_file_id,
            "completion_window": "24h", "status": b.status, "created_at": int(b.created_at),
            "output_file_id": None, "error_file_id": None, "metadata": b.metadata,
            "errors": {"object": "list", "data": [{"code": "invalid_file", "message": b.failure}]} if b.failure
            else None,
            "request_counts": {"total": len(b.requests), "completed": len(done), "failed": failed}}
        if b.status in ("completed", "expired", "cancelled"):
            if b.results:
                out["output_file_id"] = self._file(f"{b.id}_output.jsonl", b.results)
            if b.errors:
                out["error_file_id"] = self._file(f"{b.id}_errors.jsonl", b.errors)
        return out

    def _file(self, name: str, lines: list[bytes]) -> str:
        fid = f"file-{name.removesuffix('.jsonl')}"
        if fid not in self.contents:
            self.contents[fid] = b"\n".join(lines) + b"\n"
            self.files[fid] = {"id": fid, "object": "file", "bytes": len(self.contents[fid]),
                               "created_at": int(time.time()), "filename": name, "purpose": "batch_output"}
        return fid

    async def openai_list(self, request: web.Request) -> web.Response:
        mine = [b for b in self.batches.values() if b.dialect == "openai"][::-1]  # newest first
        return web.json_response(_page(mine, request.query, "after", lambda b: self._openai_view(b)))

    async def openai_get(self, request: web.Request) -> web.Response:
        b = self.batches.get(request.match_info["id"])
        if b is None or b.dialect != "openai":
            return _openai_error(404, "No such batch")
        return web.json_response(self._openai_view(b))

    async def openai_cancel(self, request: web.Request) -> web.Response:
        b = self.batches.get(request.match_info["id"])
        if b is None or b.dialect != "openai":
            return _openai_error(404, "No such batch")
        if b.status in ("validating", "in_progress", "finalizing"):
            b.status = "cancelling"
            b.cancel.set()
        return web.json_response(self._openai_view(b))

    # -- Anthropic batches ---------------------------------------------------------------------------
    def _auth(self, request: web.Request) -> web.Response | None:
        headers = {k.lower(): v for k, v in request.headers.items()}
        bearer = headers.get("authorization", "")  # x-api-key, or a Bearer token (the current SDK)
        key = headers.get("x-api-key", "") or (bearer[7:].strip() if bearer.startswith("Bearer ") else "")
        if not key:
            return _anthropic_error(401, "x-api-key header is required")
        if headers.get("anthropic-version") not in anthropic_api.VERSIONS:
            return _anthropic_error(400, "anthropic-version: header is required and must be a known version")
        return None

    async def anthropic_create(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        body = await request.json()
        reqs = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(reqs, list) or not reqs:
            return _anthropic_error(400, "requests: a non-empty list is required")
        ids = [str(r.get("custom_id")) for r in reqs]
        if len(set(ids)) != len(ids) or any(not anthropic_api._TOOL_NAME.match(c) for c in ids):
            return _anthropic_error(400, "custom_id must be unique and match ^[a-zA-Z0-9_-]{1,64}$")
        batch = SimBatch(id=f"msgbatch_sim{next(_ids)}", dialect="anthropic", requests=reqs, created_at=time.time())
        self._register(batch, ids)
        return web.json_response(self._anthropic_view(batch))

    def _anthropic_view(self, b: SimBatch) -> dict[str, Any]:
        counts = {"processing": 0, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if b.status != "ended":
            counts["processing"] = len(b.requests)
        else:
            for x in b.results:
                counts[orjson.loads(x)["result"]["type"]] += 1
        port = self.server.port
        return {"id": b.id, "type": "message_batch", "processing_status": b.status, "request_counts": counts,
                "created_at": iso(b.created_at), "ended_at": iso(b.ended_at), "expires_at": iso(b.created_at + 86400),
                "cancel_initiated_at": None, "archived_at": None,
                "results_url": f"http://127.0.0.1:{port}/v1/messages/batches/{b.id}/results" if b.status == "ended"
                else None}

    async def anthropic_list(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        mine = [b for b in self.batches.values() if b.dialect == "anthropic"][::-1]
        return web.json_response(_page(mine, request.query, "after_id", self._anthropic_view))

    async def anthropic_get(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        b = self.batches.get(request.match_info["id"])
        if b is None or b.dialect != "anthropic":
            return _anthropic_error(404, "batch not found")
        return web.json_response(self._anthropic_view(b))

    async def anthropic_cancel(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        b = self.batches.get(request.match_info["id"])
        if b is None or b.dialect != "anthropic":
            return _anthropic_error(404, "batch not found")
        if b.status == "in_progress":
            b.status = "canceling"
            b.cancel.set()
        return web.json_response(self._anthropic_view(b))

    async def anthropic_results(self, request: web.Request) -> web.Response:
        if (refused := self._auth(request)) is not None:
            return refused
        b = self.batches.get(request.match_info["id"])
        if b is None or b.status != "ended":
            return _anthropic_error(404, "results are not available")
        return web.Response(body=b"\n".join(b.results) + b"\n", content_type="application/binary")

    # -- processing ----------------------------------------------------------------------------------
    def _model_of(self, b: SimBatch) -> str:
        if b.dialect == "gemini":
            return str(b.metadata["model"])
        first = b.requests[0]
        inner = first.get("body") if b.dialect == "openai" else first.get("params")
        return str((inner or {}).get("model"))

    async def _process(self, b: SimBatch) -> None:
        """Run one batch to its end; a fault of the sim itself ends it failed, never in progress forever."""
        try:
            await self._run_batch(b)
        except Exception as e:
            log.error("sim batch %s crashed: %s", b.id, e, exc_info=True)
            why = f"the sim crashed processing it: {type(e).__name__}: {e}"
            if b.dialect == "anthropic":  # no whole-batch failure there: every unanswered request errored
                done = {orjson.loads(r).get("custom_id") for r in b.results}
                b.results += [orjson.dumps({"custom_id": q.get("custom_id"), "result": {"type": "errored", "error": {
                    "type": "error", "error": {"type": "api_error", "message": why}}}})
                    for q in b.requests if q.get("custom_id") not in done]
                b.status = "ended"
            else:
                b.failure = why
                b.status = "BATCH_STATE_FAILED" if b.dialect == "gemini" else "failed"
            b.ended_at = time.time()

    async def _run_batch(self, b: SimBatch) -> None:
        model = self._model_of(b)
        opts = self._opts(model)
        if b.failure:
            await asyncio.sleep(0.01)
            b.status, b.ended_at = "BATCH_STATE_FAILED" if b.dialect == "gemini" else "failed", time.time()
            return
        b.status = "BATCH_STATE_RUNNING" if b.dialect == "gemini" else "in_progress"
        expire = self._take(model, "expire")
        try:
            await asyncio.wait_for(b.cancel.wait(), float(opts.get("turnaround_s", 0.2)))
        except TimeoutError:
            pass
        if b.cancel.is_set():
            await asyncio.sleep(float(opts.get("cancel_s", 0.05)))  # a cancel takes a while
        skipped = "cancelled" if b.cancel.is_set() else "expired" if expire else None
        for entry in b.requests:
            if skipped is None:
                await self._answer_one(b, entry)
            elif b.dialect != "gemini":  # Gemini reports an expired or cancelled batch by its state alone
                self._skip(b, entry, skipped)
        b.ended_at = time.time()
        if b.dialect == "anthropic":
            b.status = "ended"
        elif b.dialect == "gemini":
            b.status = f"BATCH_STATE_{(skipped or 'succeeded').upper()}"
        else:
            b.status = skipped or "completed"

    def _skip(self, b: SimBatch, entry: dict[str, Any], why: str) -> None:
        cid = entry.get("custom_id")
        if b.dialect == "openai":
            code = "batch_expired" if why == "expired" else "batch_cancelled"
            b.errors.append(orjson.dumps({"id": f"batch_req_{next(_ids)}", "custom_id": cid, "response": None,
                                          "error": {"code": code, "message": f"This request was {why}."}}))
        else:
            b.results.append(orjson.dumps({"custom_id": cid, "result": {"type": "canceled" if why == "cancelled"
                                                                         else "expired"}}))

    @staticmethod
    def _openai_line(b: SimBatch, cid: Any, status: int, payload: Any) -> None:
        line = orjson.dumps({"id": f"batch_req_{next(_ids)}", "custom_id": cid,
                             "response": {"status_code": status, "request_id": f"req_{next(_ids)}",
                                          "body": payload}, "error": None})
        (b.results if status == 200 else b.errors).append(line)

    async def _answer_one(self, b: SimBatch, entry: dict[str, Any]) -> None:
        if b.dialect == "gemini":
            await self.gemini.answer(b, entry)
            return
        cid = entry.get("custom_id")
        if b.dialect == "openai" and b.endpoint == "/v1/responses":
            status, payload = await self.server.responses_wire.batch_answer(entry.get("body"))
            self._openai_line(b, cid, status, payload)
            return
        if b.dialect == "openai":
            resp = await self.server.answer(entry.get("body") or {}, None)
            status = resp.status
            payload = orjson.loads(resp.body) if isinstance(resp, web.Response) and isinstance(resp.body, bytes) \
                and resp.body.startswith(b"{") and resp.body.endswith(b"}") else {"error": {"message": "malformed"}}
            self._openai_line(b, cid, status, payload)
            return
        params = entry.get("params")
        try:
            anthropic_api.validate({"anthropic-version": "2023-06-01", "x-api-key": "batch"}, params, None)
        except Rejected as r:
            b.results.append(orjson.dumps({"custom_id": cid, "result": {"type": "errored", "error": {
                "type": "error", "error": {"type": r.kind, "message": r.message}}}}))
            return
        assert isinstance(params, dict)
        resp = await self.server.answer(anthropic_api.to_openai(params), None)
        reply = reply_of(resp)
        if reply is None:
            etype = anthropic_api.error_kind(resp.status if resp.status != 200 else 500)
            b.results.append(orjson.dumps({"custom_id": cid, "result": {"type": "errored", "error": {
                "type": "error", "error": {"type": etype, "message": f"sim fault {resp.status}"}}}}))
            return
        usage = self.server.anthropic_wire.cache.usage(params)
        message = anthropic_api.from_reply(params, reply, usage)
        b.results.append(orjson.dumps({"custom_id": cid, "result": {"type": "succeeded", "message": message}}))


def _page(items: list[SimBatch], query: Any, cursor: str, view: Any) -> dict[str, Any]:
    """Newest first, ``limit`` per page, continued after the cursor's id (both APIs page this way)."""
    limit = max(1, min(100, int(query.get("limit", 20))))
    start = 0
    after = query.get(cursor)
    if after:
        start = next((i + 1 for i, b in enumerate(items) if b.id == after), len(items))
    page = items[start:start + limit]
    data = [view(b) for b in page]
    return {"object": "list", "data": data, "has_more": start + limit < len(items),
            "first_id": page[0].id if page else None, "last_id": page[-1].id if page else None}


def _openai_error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": "invalid_request_error"}}, status=status)


def _anthropic_error(status: int, message: str) -> web.Response:
    return web.Response(status=status, body=anthropic_api.error_body(status, anthropic_api.error_kind(status), message),
                        content_type="application/json")
