"""A results file is the provider's text: a line past the bound is never held (its request fails,
named from the line's start), and a duplicated id gives the job and the journal the same, first body.
Against a real loopback server speaking OpenAI's Batch API."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest
from aiohttp import web

from fasteval.core.job import job_context
from fasteval.engine.batch.batching import BatchLane
from fasteval.runfolder.batch_journal import BatchJournal
from providers.base import ChatRequest, ProviderError
from providers.batch.base import BatchSettings
from providers.batch.openai import OpenAIBatchWire
from providers.batch.result_lines import LineCutter, LongLine
from providers.openai_compat import OpenAICompatProvider
from tests.reliability.loopback import LoopbackServer

LIMIT = 64 * 1024


def _line(cid: str, text: str) -> bytes:
    body = {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
    return orjson.dumps({"id": f"req_{cid}", "custom_id": cid, "response": {"status_code": 200, "body": body}})


class OneBatch(LoopbackServer):
    """OpenAI's Batch API for one batch: its output repeats the first request's line with another
    answer, and answers the second with a line of 1 MiB."""

    def __init__(self) -> None:
        super().__init__()
        self.ids: list[str] = []
        self.batches = 0

    async def handle(self, request: web.Request) -> web.Response:
        path = request.path
        if path == "/v1/files" and request.method == "POST":
            form = await request.post()
            upload: Any = form["file"]
            self.ids = [orjson.loads(x)["custom_id"] for x in upload.file.read().splitlines() if x.strip()]
            return web.json_response({"id": "file-in"})
        if path == "/v1/batches" and request.method == "POST":
            self.batches += 1
            return web.json_response({"id": "batch_1", "status": "in_progress"})
        if path == "/v1/batches/batch_1":
            return web.json_response({"id": "batch_1", "status": "completed", "output_file_id": "file-out",
                                      "request_counts": {"total": 3, "completed": 3, "failed": 0}})
        if path == "/v1/files/file-out/content":
            first, second, third = self.ids
            huge = _line(second, "x" * (1 << 20))
            lines = [_line(first, "first"), huge, _line(first, "second"), _line(third, "third")]
            return web.Response(body=b"\n".join(lines) + b"\n")
        return web.json_response({"error": {"message": f"no {path}"}}, status=404)


@pytest.fixture
async def one_batch() -> Any:
    s = OneBatch()
    await s.start()
    yield s
    await s.stop()


async def test_a_long_line_fails_its_request_and_a_duplicate_keeps_the_first_body(
        tmp_path: Path, one_batch: OneBatch) -> None:
    wire = OpenAIBatchWire(OpenAICompatProvider(f"{one_batch.url}/v1", "m"))
    wire.max_result_line = LIMIT
    journal = BatchJournal(tmp_path)
    lane = BatchLane("m", wire, journal, BatchSettings(gather_s=0.05, poll_s=0.05))

    async def job(i: int) -> str:
        with job_context(f"j{i}"):
            resp = await lane.chat(ChatRequest([{"role": "user", "content": f"q{i}"}]))
        return resp.content or ""

    try:
        got = await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(3)), return_exceptions=True), 30)
    finally:
        await lane.close()
        await wire.close()
    assert got[0] == "first" and got[2] == "third"
    assert isinstance(got[1], ProviderError) and got[1].kind == "fatal" and "over the 65536-byte limit" in str(got[1])
    assert one_batch.batches == 1  # nothing asked again
    first = one_batch.ids[0]
    assert b'"first"' in BatchJournal(tmp_path).body(first)  # the journal agrees with the job
    out = next((tmp_path / "batches").glob("*.out")).read_bytes()
    assert len(out) < LIMIT and b"second" not in out  # the long line and the duplicate were never written


def test_the_cutter_holds_at_most_one_bounded_line() -> None:
    cutter = LineCutter(max_line=10)
    for chunk in (b"ab\ncd", b"e\n", b"x" * 7, b"y" * 7, b"z" * 100, b'"key":"k1"\nlast', b""):
        cutter.feed(chunk)
        assert len(cutter._buf) <= 10
    lines = cutter.close()
    assert lines[:2] == [b"ab", b"cde"] and lines[3] == b"last"
    assert isinstance(lines[2], LongLine) and lines[2].size == 7 + 7 + 100 + 10
