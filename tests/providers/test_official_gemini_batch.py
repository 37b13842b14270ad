"""Google's own client (``genai.Client``) runs a file-input batch against the sim's Gemini batch mode.

Our batch wire and the sim's Gemini dialect could share a misreading of the Files API's resumable
upload, the batch resource or the responses file; the SDK cannot share it with us. It uploads a
JSONL file, creates a batch from it, polls it to the end, and downloads the keyed responses file.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import orjson

from providers.sim import SimModel
from tests.providers.native.native_support import native_sim, root

KEY = "sk-official-client-0123456789"


async def test_genai_client_file_batch_upload_create_poll_download(tmp_path: Path) -> None:
    from google import genai
    from google.genai import types

    src = tmp_path / "requests.jsonl"
    src.write_bytes(b"".join(orjson.dumps({"key": f"req-{i}", "request": {
        "contents": [{"role": "user", "parts": [{"text": f"question {i}"}]}]}}) + b"\n" for i in range(3)))
    model = SimModel("sim-model", policy="direct", options={"batch_api": {"turnaround_s": 0.05,
                                                                          "reverse_responses": True}})
    async with native_sim([model], {"gemini": KEY}) as sim:
        client = genai.Client(api_key=KEY, http_options=types.HttpOptions(base_url=root(sim), api_version="v1beta"))
        uploaded = await client.aio.files.upload(file=src, config=types.UploadFileConfig(
            mime_type="application/jsonl", display_name="fasteval-local-1"))
        assert uploaded.name and uploaded.display_name == "fasteval-local-1"
        assert uploaded.size_bytes == src.stat().st_size and uploaded.state == types.FileState.ACTIVE
        job = await client.aio.batches.create(model="sim-model", src=uploaded.name,
                                              config=types.CreateBatchJobConfig(display_name="fasteval-local-1"))
        assert job.name and job.display_name == "fasteval-local-1"
        for _ in range(200):
            job = await client.aio.batches.get(name=job.name)
            if job.state in (types.JobState.JOB_STATE_SUCCEEDED, types.JobState.JOB_STATE_FAILED):
                break
            await asyncio.sleep(0.02)
        assert job.state == types.JobState.JOB_STATE_SUCCEEDED
        assert job.dest is not None and job.dest.file_name
        raw = await client.aio.files.download(file=job.dest.file_name)
        listed = [f.name async for f in await client.aio.files.list()]
        await client.aio.aclose()
    lines = [orjson.loads(x) for x in raw.splitlines() if x.strip()]
    assert [x["key"] for x in lines] == ["req-2", "req-1", "req-0"]  # keyed, so order does not matter
    for x in lines:
        types.GenerateContentResponse.model_validate(x["response"])
    assert uploaded.name in listed and job.dest.file_name in listed
