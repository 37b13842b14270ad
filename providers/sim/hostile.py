"""A hostile batch provider: switchable misbehaviours of the sim's batch APIs, for every dialect.

What a flaky or hostile endpoint does to a batch client, played by a real loopback server: set
``SimServer.hostile`` (or pass ``hostile=`` to SimServer) and the batch routes answer

- ``results``: every results download (OpenAI's output and error files, Anthropic's
  ``results_url``, Gemini's responses file and inline responses) is ``html`` (a maintenance page
  served with 200), ``unknown`` (someone else's custom ids), ``junk`` (one line that is not
  JSON), or ``partial`` (every other line, and a junk one); ``results_times`` of them (0: every one);
- ``duplicate``: every result line twice; ``reorder``: result lines in reverse order;
- ``outage``: the next N polls of a batch answer 500; ``unknown_state``: the next N answer a
  status word no API documents;
- ``endless_list``: the batch lists never end (always another page, the same cursor);
- ``refuse_cancel``: every cancel answers 500.

``touched`` counts what a client did to batches it did not create (``foreign``): cancels and
result downloads; the batch APIs count every request submitted (``BatchAPIs.submitted``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RESULT_FAULTS = ("html", "unknown", "junk", "partial")
_HTML = b"<!DOCTYPE html><html><body><h1>Scheduled maintenance</h1><p>Back soon.</p></body></html>\n"


@dataclass(slots=True)
class Hostile:
    results: str | None = None
    """One of RESULT_FAULTS, or None."""
    results_times: int = 0
    duplicate: bool = False
    reorder: bool = False
    outage: int = 0
    unknown_state: int = 0
    endless_list: bool = False
    refuse_cancel: bool = False
    """Every cancel answers 500 (and cancels nothing)."""
    foreign: set[str] = field(default_factory=set)
    """Batch ids of someone else on the same key (the test creates them)."""
    touched: list[str] = field(default_factory=list)
    """``cancel <id>`` / ``results <id>`` of a foreign batch, in order."""
    calls: Counter[str] = field(default_factory=Counter)
    """Batch-API calls by kind (poll, list, results, cancel)."""
    _results_done: int = 0

    def _mangle_results(self) -> bool:
        if self.results is None or (self.results_times and self._results_done >= self.results_times):
            return False
        self._results_done += 1
        return True

    def lines(self, body: bytes) -> bytes:
        """A results file (JSONL) as this provider serves it."""
        lines = [x for x in body.splitlines() if x.strip()]
        if self._mangle_results():
            if self.results == "html":
                return _HTML
            if self.results == "junk":
                return b"\x00this is not a result line\n"
            if self.results == "partial":
                lines = [*lines[::2], b"\x00this is not a result line"]
            else:
                lines = [_stranger(x, i) for i, x in enumerate(lines)]
        if self.reorder:
            lines.reverse()
        if self.duplicate:
            lines = [x for x in lines for _ in (0, 1)]
        return b"".join(x + b"\n" for x in lines)

    def poll_fault(self) -> str | None:
        if self.outage > 0:
            self.outage -= 1
            return "outage"
        if self.unknown_state > 0:
            self.unknown_state -= 1
            return "state"
        return None


def _stranger(line: bytes, i: int) -> bytes:
    """The same line under someone else's id (``custom_id`` or Gemini's ``key``)."""
    try:
        data = orjson.loads(line)
    except orjson.JSONDecodeError:
        return line
    for k in ("custom_id", "key"):
        if k in data:
            data[k] = f"someone_else_{i}"
    return orjson.dumps(data)


def _kind(request: web.Request) -> tuple[str, str]:
    """``(what, batch id)`` of a batch-API request: poll, list, results, cancel, or "" for another."""
    p, m = request.path, request.method
    parts = p.strip("/").split("/")
    if m == "GET" and p in ("/v1/batches", "/v1/messages/batches", "/v1beta/batches"):
        return "list", ""
    if m == "GET" and p.startswith("/v1/files/file-batch_sim") and p.endswith("/content"):
        return "results", parts[2].removeprefix("file-").rsplit("_", 1)[0]
    if m == "GET" and p.startswith("/v1/messages/batches/") and p.endswith("/results"):
        return "results", parts[3]
    if m == "GET" and p.startswith("/download/v1beta/files/batch-"):
        return "results", "batches/" + parts[3].split(":")[0].removeprefix("batch-")
    if m == "GET" and (p.startswith(("/v1/batches/", "/v1/messages/batches/", "/v1beta/batches/"))):
        return "poll", "/".join(parts[1:]) if parts[0] == "v1beta" else parts[-1]
    if m == "POST" and (p.endswith("/cancel") or p.endswith(":cancel")):
        bid = parts[-2] if p.endswith("/cancel") else "batches/" + parts[-1].split(":")[0]
        return "cancel", bid
    return "", ""


def middleware(get: Callable[[], Hostile | None]) -> Any:
    """The aiohttp middleware that plays ``get()``'s misbehaviours (none while it is None)."""

    @web.middleware
    async def hostile(request: web.Request, handler: Handler) -> web.StreamResponse:
        h = get()
        if h is None:
            return await handler(request)
        what, bid = _kind(request)
        if what:
            h.calls[what] += 1
        if what in ("cancel", "results") and bid in h.foreign:
            h.touched.append(f"{what} {bid}")
        if what == "cancel" and h.refuse_cancel:
            return web.json_response({"error": {"message": "cancel failed", "code": 500}}, status=500)
        if what == "poll" and (fault := h.poll_fault()) is not None:
            if fault == "outage":
                return web.json_response({"error": {"message": "upstream unavailable", "code": 500}}, status=500)
            resp = await handler(request)
            return _with_state(resp, "mystery_state")
        if what == "list" and h.endless_list:  # the first page, whatever the cursor, and always one more
            return _endless(await handler(request.clone(rel_url=request.path)))
        resp = await handler(request)
        if what == "results" and isinstance(resp, web.Response) and resp.status == 200 and \
                isinstance(resp.body, bytes):
            return web.Response(body=h.lines(resp.body), content_type="application/octet-stream")
        if what == "poll" and bid.startswith("batches/"):
            return _inline(resp, h)
        return resp

    return hostile


def _json_of(resp: web.StreamResponse) -> Any:
    if not isinstance(resp, web.Response) or resp.status != 200 or not isinstance(resp.body, bytes):
        return None
    return orjson.loads(resp.body)


def _with_state(resp: web.StreamResponse, word: str) -> web.StreamResponse:
    data = _json_of(resp)
    if not isinstance(data, dict):
        return resp
    for key in ("status", "processing_status"):
        if key in data:
            data[key] = word
    if isinstance(data.get("metadata"), dict) and "state" in data["metadata"]:
        data["metadata"]["state"] = word
    return web.json_response(data)


def _endless(resp: web.StreamResponse) -> web.StreamResponse:
    data = _json_of(resp)
    if not isinstance(data, dict):
        return resp
    if "operations" in data:
        data["nextPageToken"] = "again"
    else:
        data["has_more"] = True
        data["last_id"] = "batch_again"
    return web.json_response(data)


def _inline(resp: web.StreamResponse, h: Hostile) -> web.StreamResponse:
    """Gemini's inline responses live in the batch's operation: mangled there, as a results file is."""
    data = _json_of(resp)
    inl = (((data or {}).get("response") or {}).get("inlinedResponses") or {}) if isinstance(data, dict) else {}
    items = inl.get("inlinedResponses") if isinstance(inl, dict) else None
    if not isinstance(items, list) or not items:
        return resp
    assert isinstance(data, dict)
    body = h.lines(b"\n".join(orjson.dumps(x) for x in items))
    out: list[Any] = []
    for line in body.splitlines():
        try:
            out.append(orjson.loads(line))
        except orjson.JSONDecodeError:
            out.append(line.decode("utf-8", "replace"))
    inl["inlinedResponses"] = out
    return web.json_response(data)
