"""Batch mode's memory: response bodies live on disk, not in the journal's state.

A run of 50,000 batched requests downloads ~100 MB of bodies; the journal keeps per request only
where its body lies, hands a fresh body to its waiter, and reads one back from disk only when a
replayed job (a rerun) asks for it. Loading a journal streams it, old inline-body journals too.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.core.job import job_context
from fasteval.engine.batch.batching import BatchLane, custom_id
from fasteval.runfolder.batch_journal import BatchJournal
from providers.base import ChatRequest, ProviderError
from providers.batch.base import BatchSettings
from providers.batch.openai import OpenAIBatchWire
from providers.openai_compat import OpenAICompatProvider
from providers.sim import SimModel, SimServer

SETTINGS = BatchSettings(gather_s=0.02, poll_s=0.02)
LONG = "a long considered answer " * 2000  # 50 KB per body


@pytest.fixture
async def server() -> Any:
    s = SimServer([SimModel("m", policy="direct", default_reply=LONG,
                            options={"batch_api": {"turnaround_s": 0.02}})])
    await s.start()
    yield s
    await s.stop()


def request(i: int) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": f"question {i}"}], params={"max_tokens": 64})


def wire(server: SimServer) -> OpenAIBatchWire:
    return OpenAIBatchWire(OpenAICompatProvider(server.base_url, "m"))


async def run_jobs(run_dir: Path, server: SimServer, n: int) -> list[str]:
    lane = BatchLane("m", wire(server), BatchJournal(run_dir), SETTINGS)
    await lane.reattach()

    async def job(i: int) -> str:
        with job_context(f"j{i}"):
            return (await lane.chat(request(i))).content or ""

    try:
        return await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(n))), 30)
    finally:
        await lane.close()


def heap_of_loading(run_dir: Path) -> tuple[int, BatchJournal]:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        journal = BatchJournal(run_dir)
        return tracemalloc.get_traced_memory()[0] - before, journal
    finally:
        tracemalloc.stop()


async def test_a_loaded_journal_holds_where_bodies_lie_not_the_bodies(tmp_path: Path, server: SimServer) -> None:
    answers = await run_jobs(tmp_path, server, 40)
    assert all(a == LONG for a in answers)
    on_disk = sum(p.stat().st_size for p in (tmp_path / "batches").glob("*.out"))
    assert on_disk >= 40 * len(LONG)  # the bodies are in the batch's results file
    assert LONG.encode() not in (tmp_path / "batches" / "journal.jsonl").read_bytes()
    held, journal = heap_of_loading(tmp_path)
    assert len(journal.requests) == 40 and all(st.ok for st in journal.requests.values())
    assert held < 40 * len(LONG) / 20  # 2 MB of bodies: the journal's state is a small share of it


async def test_a_rerun_reads_its_results_from_disk_without_the_network(tmp_path: Path, server: SimServer) -> None:
    first = await run_jobs(tmp_path, server, 5)
    seen = (server.batch_apis.created, server.requests)
    assert await run_jobs(tmp_path, server, 5) == first
    assert (server.batch_apis.created, server.requests) == seen


async def test_a_result_cut_short_on_disk_fails_the_job_and_is_never_bought_again(tmp_path: Path,
                                                                                 server: SimServer) -> None:
    await run_jobs(tmp_path, server, 2)
    out = next((tmp_path / "batches").glob("*.out"))
    out.write_bytes(out.read_bytes()[:100])
    created = server.batch_apis.created
    with pytest.raises(ProviderError, match="journaled but unreadable") as e:
        await run_jobs(tmp_path, server, 2)
    assert e.value.kind == "fatal" and server.batch_apis.created == created


async def test_a_journal_with_bodies_inline_is_still_read(tmp_path: Path, server: SimServer) -> None:
    """Journals written before ``<local>.out`` files held each body inside its ``results`` event."""
    w = wire(server)
    bodies, entries, lines = {}, [], []
    for i in range(3):
        body = await w.body(request(i))
        cid = custom_id("m", f"j{i}", 0, body)
        entries.append([cid, f"j{i}", 0])
        lines.append(w.line(cid, body))
        bodies[cid] = orjson.dumps({"id": f"r{i}", "object": "chat.completion", "created": 1, "model": "m",
                                    "choices": [{"index": 0, "finish_reason": "stop", "message": {
                                        "role": "assistant", "content": f"old answer {i}"}}],
                                    "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}})
    await w.close()
    folder = tmp_path / "batches"
    folder.mkdir()
    (folder / "fe1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    events = [{"e": "begin", "local": "fe1", "lane": "m", "at": 1.0, "map": entries},
              {"e": "created", "local": "fe1", "id": "batch_old"},
              {"e": "results", "local": "fe1", "r": [[c, b.decode(), None, ""] for c, b in bodies.items()]},
              {"e": "ended", "local": "fe1", "status": "completed"}]
    (folder / "journal.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events))
    assert await run_jobs(tmp_path, server, 3) == [f"old answer {i}" for i in range(3)]
    assert server.batch_apis.created == 0


async def test_a_batch_input_is_written_line_by_line_not_joined(tmp_path: Path) -> None:
    """A batch of image rounds may be gigabytes (Gemini's file limit is 2 GB): journaling its input
    must not make one more copy of all of it."""
    journal = BatchJournal(tmp_path)
    lines = [bytes([65 + i]) * (2 << 20) for i in range(16)]  # 32 MB of input
    tracemalloc.start()
    try:
        jb = await journal.begin("m", lines, [(f"c{i}", f"job{i}", 0) for i in range(16)])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"journaling 32 MB of input allocated {peak / 2**20:.0f} MB more"
    assert journal.input_lines(jb.local) == lines
