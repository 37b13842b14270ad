"""A real lane against the sim's batch APIs on every wire, for the hostile-provider tests."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fasteval.core.job import job_context
from fasteval.engine.batch.batching import BatchLane, custom_id
from fasteval.runfolder.batch_journal import BatchJournal
from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest
from providers.batch.anthropic import AnthropicBatchWire
from providers.batch.base import BatchSettings, BatchWire
from providers.batch.gemini import GeminiBatchWire
from providers.batch.openai import OpenAIBatchWire
from providers.batch.openai_responses import OpenAIResponsesBatchWire
from providers.gemini import GeminiProvider
from providers.openai_compat import OpenAICompatProvider
from providers.openai_responses import OpenAIResponsesProvider
from providers.retry import RetryPolicy
from providers.sim import SimServer

WIRES = ("openai", "openai-responses", "anthropic", "gemini", "gemini-file")
FAST = BatchSettings(gather_s=0.02, poll_s=0.02)
QUICK = RetryPolicy(max_attempts=2, total_budget_s=5.0, base_delay_s=0.01, max_delay_s=0.02)
"""Two tries per call: an outage of a few polls outlasts it, as a long one outlasts the default."""


def wire_of(server: SimServer, name: str) -> BatchWire:
    root = server.base_url.removesuffix("/v1")
    if name == "openai":
        return OpenAIBatchWire(OpenAICompatProvider(server.base_url, "m"))
    if name == "openai-responses":
        return OpenAIResponsesBatchWire(OpenAIResponsesProvider("m", base_url=server.base_url, api_key="k",
                                                                api_key_env=None))
    if name == "anthropic":
        return AnthropicBatchWire(AnthropicProvider("m", base_url=root, api_key="k", api_key_env=None))
    wire = GeminiBatchWire(GeminiProvider("m", base_url=root, api_key="k", api_key_env=None))
    if name == "gemini-file":
        wire.inline_max_bytes = 0  # every batch through an uploaded file and a responses file
    return wire


def request(i: int) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": f"question {i}"}], params={"max_tokens": 64})


async def ask(run_dir: Path, server: SimServer, wire: str, n: int, *, settings: BatchSettings = FAST,
              retry: RetryPolicy = QUICK, wait_s: float = 60) -> list[str | BaseException]:
    """A fresh process's lane: reattach what the journal left open, then jobs j0..j{n-1} ask once each."""
    lane = BatchLane("m", wire_of(server, wire), BatchJournal(run_dir), settings, retry=retry)
    await lane.reattach()

    async def job(i: int) -> str:
        with job_context(f"j{i}"):
            return (await lane.chat(request(i))).content or ""

    try:
        return list(await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(n)), return_exceptions=True),
                                           wait_s))
    finally:
        await lane.close()


async def stranded(tmp_path: Path, server: SimServer, wire_name: str, n: int) -> str:
    """A batch journaled (begin) whose create never ran: a crash between the two. Its local id."""
    wire = wire_of(server, wire_name)
    lines, entries = [], []
    for i in range(n):
        body = await wire.body(request(i))
        cid = custom_id("m", f"j{i}", 0, body)
        lines.append(wire.line(cid, body))
        entries.append((cid, f"j{i}", 0))
    jb = await BatchJournal(tmp_path).begin("m", lines, entries)
    await wire.close()
    return jb.local


async def colleague(server: SimServer, wire_name: str, n: int) -> str:
    """Someone else's batch of ``n`` requests on the same key; its id."""
    wire = wire_of(server, wire_name)
    lines = [wire.line(f"colleague{i}", await wire.body(request(100 + i))) for i in range(n)]

    async def noop(fid: str) -> None:
        return None

    try:
        return await wire.create("not-ours", lines, file_id=None, on_file=noop)
    finally:
        await wire.close()
