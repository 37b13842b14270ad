"""The vendors' own clients drive the sim's batch APIs: if ``AsyncOpenAI`` or ``AsyncAnthropic``
cannot create, poll, list, cancel and read a batch of the sim, the sim is wrong (and so would be
our wires, which were written from the same docs)."""

from __future__ import annotations

import asyncio

import orjson

from providers.sim import SimModel
from tests.providers.native.native_support import native_sim, root

KEY = "sk-official-batch-0123456789"


def _model() -> SimModel:
    return SimModel("sim-model", policy="direct", options={"batch_api": {"turnaround_s": 0.05}})


async def test_async_openai_files_and_batches_round_trip() -> None:
    from openai import AsyncOpenAI
    from openai.types.chat import ChatCompletion

    async with native_sim([_model()]) as sim:
        client = AsyncOpenAI(api_key=KEY, base_url=f"{root(sim)}/v1", max_retries=0)
        lines = [orjson.dumps({"custom_id": f"r{i}", "method": "POST", "url": "/v1/chat/completions",
                               "body": {"model": "sim-model", "messages": [{"role": "user", "content": f"q{i}"}]}})
                 for i in range(3)]
        f = await client.files.create(file=("in.jsonl", b"\n".join(lines) + b"\n"), purpose="batch")
        batch = await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                            completion_window="24h", metadata={"fasteval_batch": "x1"})
        assert batch.status in ("validating", "in_progress") and batch.metadata == {"fasteval_batch": "x1"}
        for _ in range(200):
            batch = await client.batches.retrieve(batch.id)
            if batch.status == "completed":
                break
            await asyncio.sleep(0.02)
        assert batch.request_counts is not None and batch.request_counts.completed == 3
        assert batch.output_file_id is not None
        out = (await client.files.content(batch.output_file_id)).content
        rows = [orjson.loads(x) for x in out.splitlines()]
        assert sorted(r["custom_id"] for r in rows) == ["r0", "r1", "r2"]
        assert all(ChatCompletion.model_validate(r["response"]["body"]).choices for r in rows)
        listed = [b.id async for b in client.batches.list(limit=1)]
        assert listed == [batch.id]  # paged one by one, newest first
        second = await client.batches.create(input_file_id=f.id, endpoint="/v1/chat/completions",
                                             completion_window="24h")
        cancelled = await client.batches.cancel(second.id)
        assert cancelled.status == "cancelling"
        await client.close()


async def test_async_anthropic_message_batches_round_trip() -> None:
    from anthropic import AsyncAnthropic

    async with native_sim([_model()]) as sim:
        client = AsyncAnthropic(api_key=KEY, base_url=root(sim), max_retries=0)
        batch = await client.messages.batches.create(requests=[
            {"custom_id": f"r{i}", "params": {"model": "sim-model", "max_tokens": 64,
                                             "messages": [{"role": "user", "content": f"q{i}"}]}} for i in range(2)])
        assert batch.processing_status == "in_progress" and batch.request_counts.processing == 2
        for _ in range(200):
            batch = await client.messages.batches.retrieve(batch.id)
            if batch.processing_status == "ended":
                break
            await asyncio.sleep(0.02)
        assert batch.request_counts.succeeded == 2
        results = [r async for r in await client.messages.batches.results(batch.id)]
        assert sorted(r.custom_id for r in results) == ["r0", "r1"]
        assert all(r.result.type == "succeeded" and r.result.message.content for r in results)
        page = await client.messages.batches.list(limit=5)
        assert [b.id for b in page.data] == [batch.id]
        other = await client.messages.batches.create(requests=[
            {"custom_id": "c", "params": {"model": "sim-model", "max_tokens": 8,
                                          "messages": [{"role": "user", "content": "x"}]}}])
        assert (await client.messages.batches.cancel(other.id)).processing_status == "canceling"
        await client.close()
