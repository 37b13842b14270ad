"""Where the engine's fixed per-request CPU goes, without a network: one process, no noise from a server.

    .venv/bin/python benchmarks/engine_cost.py [--n 2000] [--k 3] [--image-kb 50] [--local-media] [--json]

``benchmarks/throughput.py`` measures the whole sweep against the sim over loopback; on a shared
2-core machine its CPU figures move by 10% from run to run, more than most single costs of the
request path. This script times the layers of one request in isolation, with the same objects a
sweep builds (the jsonl suite, the calculator tool, a real ``ModelClient`` over a real
``OpenAICompatProvider`` with the blob store and image encoder), and only the HTTP exchange
replaced by the parsed body the sim would answer with, on uvloop as in a sweep:

* ``body``: ``build_body`` + what aiohttp is handed (the history walked, images resolved to their
  shared URL bytes, one ``orjson.dumps``, the splice), then ``parse_response`` of the answer;
* ``client``: ``ModelClient.chat`` around that (retry loop, breaker, limits, accounting);
* ``agent``: ``run_agent`` for a whole trajectory (K tool rounds and the answer), per request;
* ``record``: a finished job's record line (``RecordWriter.write``: redaction, ``orjson.dumps``);
* ``raw``: what ``benchmarks/_rawclient.py`` does per request besides aiohttp (``orjson.dumps``
  of the whole body with its data URL, ``orjson.loads`` of the answer, the tool call).

The difference ``agent`` - ``raw`` is the engine's own CPU per request; aiohttp's cost (the same
for both sides) comes on top of both. Medians of ``--repeats`` passes, in microseconds.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import orjson
import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasteval.config.endpoint import EndpointSpec  # noqa: E402
from fasteval.core.job import job_context  # noqa: E402
from fasteval.core.types import Record, Task, Trajectory  # noqa: E402
from fasteval.engine.run.agent import AgentEnv, run_agent  # noqa: E402
from fasteval.engine.run.clients import image_resolver  # noqa: E402
from fasteval.images import ImageEncoder  # noqa: E402
from fasteval.runfolder.blobs import BlobStore  # noqa: E402
from fasteval.runfolder.records import RecordWriter  # noqa: E402
from fasteval.suites.base import make_suite  # noqa: E402
from fasteval.tools.base import make_tool  # noqa: E402
from providers.base import ChatRequest, ChatResponse  # noqa: E402
from providers.body import body_data  # noqa: E402
from providers.client import ModelClient  # noqa: E402
from providers.openai_compat import OpenAICompatProvider, parse_response  # noqa: E402


def _answer(call: int | None) -> bytes:
    """The completion the sim's ``tools`` policy sends: a calculator call, or the final answer."""
    usage = {"prompt_tokens": 300, "completion_tokens": 20, "total_tokens": 320}
    if call is None:
        msg: dict[str, Any] = {"role": "assistant", "content": "The answer is 2."}
        finish = "stop"
    else:
        msg = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{call}", "type": "function",
             "function": {"name": "calculator", "arguments": '{"expression": "1 + 1"}'}}]}
        finish = "tool_calls"
    return orjson.dumps({"id": "x", "object": "chat.completion", "created": 0, "model": "sim-tools",
                         "choices": [{"index": 0, "message": msg, "finish_reason": finish}], "usage": usage})


class OfflineProvider(OpenAICompatProvider):
    """The real provider up to the socket: builds the body aiohttp would get, parses a canned answer."""

    def __init__(self, k: int, **kwargs: Any) -> None:
        super().__init__("http://127.0.0.1:9/v1", "sim-tools", **kwargs)
        self.answers = [_answer(i) for i in range(k)] + [_answer(None)]

    async def chat(self, request: ChatRequest) -> ChatResponse:
        data, size = body_data(await self.build_body(request))
        rounds = sum(1 for m in request.messages if m.get("role") == "assistant")
        return parse_response(self.answers[min(rounds, len(self.answers) - 1)])


def _median_us(fn: Callable[[], Awaitable[int]], repeats: int) -> float:
    """Median over passes of (CPU seconds / units) of one pass, in microseconds."""
    out = []
    for _ in range(repeats):
        t0 = time.process_time()
        units = uvloop.run(fn())
        out.append((time.process_time() - t0) / units * 1e6)
    return statistics.median(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=2000, help="trajectories per pass (default 2000)")
    ap.add_argument("--k", type=int, default=3, help="tool rounds per trajectory (default 3)")
    ap.add_argument("--image-kb", type=int, default=50, help="noise PNG in the first message (default 50)")
    ap.add_argument("--local-media", action="store_true", help="file:// URLs instead of data URLs")
    ap.add_argument("--repeats", type=int, default=5, help="passes per figure; medians (default 5)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.append(str(ROOT / "benchmarks"))
    from images_throughput import make_noise

    with tempfile.TemporaryDirectory(prefix="fasteval-engine-cost-") as tmp:
        work = Path(tmp)
        make_noise(work / "image.png", a.image_kb)
        (work / "tasks.jsonl").write_text("".join(json.dumps(
            {"id": f"t{i}", "prompt": f"Task {i}: what is 1 + 1? Use the calculator.", "images": ["image.png"],
             "answer": "2", "tools": ["calculator"]}) + "\n" for i in range(a.n)))
        blobs = BlobStore(work / "blobs")
        suite = make_suite("jsonl", {"path": str(work / "tasks.jsonl")}, blobs)
        tasks = [t for t in suite.load() if isinstance(t, Task)]
        setting = suite.default_settings()[0]
        encoder = ImageEncoder(blobs)
        resolver = image_resolver(encoder, spec=EndpointSpec.of("bench", {"provider": "sim", "local_media": a.local_media}))
        tools = {"calculator": make_tool("calculator", fidelity=setting.fidelity)}
        calls = a.n * (a.k + 1)
        figures: dict[str, float] = {}

        def new_client() -> ModelClient:
            return ModelClient("bench", OfflineProvider(a.k, image_resolver=resolver), concurrency=a.n)

        async def trajectories(keep: bool) -> list[Trajectory]:
            client = new_client()
            env = AgentEnv(client=client, suite=suite, setting=setting, tools=tools, blobs=blobs)
            out = []
            for i, task in enumerate(tasks):
                with job_context(f"job{i}"):
                    traj = await run_agent(task, 0, f"job{i}", env)
                if keep:
                    out.append(traj)
                await asyncio.sleep(0)  # let the loop turn, as it does between a sweep's requests
            return out

        sample = uvloop.run(trajectories(keep=True))
        requests = [ChatRequest(messages=t.messages[:cut], tools=[tools["calculator"].spec()], seed=0,
                                image_profile="original")
                    for t in sample for cut in [i for i, m in enumerate(t.messages) if m["role"] == "assistant"]]
        assert len(requests) == calls, (len(requests), calls)

        async def body_pass() -> int:
            provider = OfflineProvider(a.k, image_resolver=resolver)
            for r in requests:
                await provider.chat(r)
            return calls

        async def client_pass() -> int:
            client = new_client()
            for r in requests:
                await client.chat(r)
            return calls

        async def agent_pass() -> int:
            await trajectories(keep=False)  # a sweep writes each trajectory and lets it go
            return calls

        async def record_pass() -> int:
            writer = RecordWriter(work / "records.jsonl", fsync="never")
            writer._queue.put_nowait = lambda item: None  # type: ignore[method-assign]  # serialise only
            for i, t in enumerate(sample):
                writer.write(Record(job_id=f"{i:020d}", model="bench", suite="jsonl", setting="default",
                                    task_id=f"t{i}", seed=0, status="ok", score=1.0, answer="2", rounds=a.k + 1,
                                    tool_calls=a.k, usage={"prompt_tokens": 1200, "completion_tokens": 80},
                                    trajectory=t))
            return calls

        image_url = uvloop.run(encoder.image_url(tasks[0].turns[0].images[0], "original",
                                                  local=a.local_media)).decode()
        spec = tools["calculator"].spec()
        canned = [_answer(i) for i in range(a.k)] + [_answer(None)]

        async def raw_pass() -> int:
            for _ in range(a.n):
                messages: list[dict[str, Any]] = [{"role": "user", "content": [
                    {"type": "image_url", "image_url": {"url": image_url}},
                    {"type": "text", "text": "Task: what is 1 + 1? Use the calculator."}]}]
                for rnd in range(a.k + 1):
                    orjson.dumps({"model": "sim-tools", "messages": messages, "tools": [spec], "seed": 0})
                    msg = orjson.loads(canned[rnd])["choices"][0]["message"]
                    messages.append(msg)
                    for tc in msg.get("tool_calls") or []:
                        args = orjson.loads(tc["function"]["arguments"])
                        messages.append({"role": "tool", "tool_call_id": tc["id"],
                                         "content": orjson.dumps({"result": 2, "expression": args["expression"]}
                                                                 ).decode()})
            return calls

        gc.freeze()  # what `fasteval run` does after start-up (fasteval/cli/main.py)
        gc.set_threshold(50_000, 50, 100)
        for name, fn in (("body", body_pass), ("client", client_pass), ("agent", agent_pass),
                         ("record", record_pass), ("raw", raw_pass)):
            figures[name] = _median_us(fn, a.repeats)
        encoder.close()

    result = {"us_per_request": figures, "params": {"n": a.n, "k": a.k, "image_kb": a.image_kb,
                                                    "local_media": a.local_media, "repeats": a.repeats}}
    if a.json:
        print(json.dumps(result))
        return 0
    f = figures
    print(f"CPU per request, microseconds (medians of {a.repeats} passes of {a.n} trajectories x {a.k + 1} "
          f"requests; {a.image_kb} KB image, {'file://' if a.local_media else 'data'} URLs; no network)")
    rows = [("provider body + parse", f["body"]), ("+ client layer (retries, limits, breaker)", f["client"] - f["body"]),
            ("+ agent loop (tools, messages, records of calls)", f["agent"] - f["client"]),
            ("= engine per request (agent)", f["agent"]), ("record line per request", f["record"]),
            ("raw client's own work per request", f["raw"]),
            ("engine - raw, per request", f["agent"] + f["record"] - f["raw"])]
    for label, us in rows:
        print(f"  {label:<50}{us:8.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
