"""Batch mode throughput: how many batch requests per second our side handles, memory, journal size.

    .venv/bin/python benchmarks/batch.py [--single 10000] [--tool 1000] [--rounds 3] [--baseline 2000]
        [--reply-chars 2000] [--json]

Against the sim's batch APIs (``python -m providers.sim``, its own process, so its CPU is not
ours), for the OpenAI (Chat Completions and Responses), the Anthropic and the Gemini wire in turn (Gemini twice: inline, and through
an uploaded file with the inline ceiling lowered to nothing, as a batch over 20 MB goes):
``--single`` single-turn trajectories (the sim's ``direct`` policy, answers of ``--reply-chars``
characters, a response body of about 2 KB as a real model's answer) and
``--tool`` trajectories of ``--rounds`` rounds (the sim's ``tools`` policy calls the offered
calculator until the last round, each round's request carrying the whole history), each kind
through its own batch lane (gather, journal, create, poll, download, resolve) exactly as two
batched models of a sweep sharing the run's journal. Reported per wire: requests, batches, wall time, our CPU per request and requests per
CPU-second (the process's user+sys time, the sim excluded), peak RSS, and the journal's bytes per
request (inputs as sent plus events and results), and what the journal holds in memory: the
Python heap a fresh process's journal takes once it has loaded that run's journal (tracemalloc;
this is also what the live journal holds per request, since both keep the same state). The baseline in the same run: ``--baseline``
interactive single-turn requests to the same sim through the same client layer, so the ratio says
what batching costs our side per request compared with sending it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import orjson
import uvloop

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasteval.core.job import job_context  # noqa: E402
from fasteval.engine.batch.batching import BatchLane  # noqa: E402
from fasteval.runfolder.batch_journal import BatchJournal  # noqa: E402
from providers.anthropic import AnthropicProvider  # noqa: E402
from providers.base import ChatRequest, Provider  # noqa: E402
from providers.batch.base import BatchSettings  # noqa: E402
from providers.batch.gemini import GeminiBatchWire  # noqa: E402
from providers.client import ModelClient  # noqa: E402
from providers.gemini import GeminiProvider  # noqa: E402
from providers.openai_compat import OpenAICompatProvider  # noqa: E402
from providers.openai_responses import OpenAIResponsesProvider  # noqa: E402
from providers.registry import batch_wire  # noqa: E402

CALCULATOR = {"type": "function", "function": {"name": "calculator", "description": "evaluate arithmetic",
                                               "parameters": {"type": "object", "properties": {
                                                   "expression": {"type": "string"}}, "required": ["expression"]}}}


def vm_hwm_kb() -> int:
    return next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM:"))


def provider(dialect: str, port: int, model: str = "bm") -> Provider:
    if dialect == "openai":
        return OpenAICompatProvider(f"http://127.0.0.1:{port}/v1", model)
    if dialect == "openai-responses":  # the sim's models reason on this wire: say so, as a user would
        return OpenAIResponsesProvider(model, base_url=f"http://127.0.0.1:{port}/v1", api_key="sim", api_key_env=None,
                                       reasoning_effort="low")
    if dialect.startswith("gemini"):
        return GeminiProvider(model, base_url=f"http://127.0.0.1:{port}", api_key="sim", api_key_env=None)
    return AnthropicProvider(model, base_url=f"http://127.0.0.1:{port}", api_key="sim", api_key_env=None)


async def single(lane: BatchLane, i: int) -> None:
    with job_context(f"single-{i}"):
        await lane.chat(ChatRequest([{"role": "user", "content": f"Question {i}: what is {i} + 1?"}],
                                    params={"max_tokens": 64}))


async def tool_loop(lane: BatchLane, i: int, rounds: int) -> int:
    messages: list[dict[str, Any]] = [{"role": "user", "content": f"Task {i}: compute {i} * 7 with the calculator."}]
    n = 0
    with job_context(f"tool-{i}"):
        for _ in range(rounds):
            resp = await lane.chat(ChatRequest(list(messages), tools=[CALCULATOR], params={"max_tokens": 64}))
            n += 1
            if not resp.tool_calls:
                break
            calls = [{"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                     for c in resp.tool_calls]
            messages.append({"role": "assistant", "content": resp.content, "tool_calls": calls})
            messages += [{"role": "tool", "tool_call_id": c.id, "content": str(i * 7)} for c in resp.tool_calls]
    return n


def journal_bytes(run_dir: Path) -> int:
    return sum(p.stat().st_size for p in (run_dir / "batches").iterdir())


async def batched(dialect: str, port: int, a: argparse.Namespace, run_dir: Path) -> dict[str, Any]:
    journal = BatchJournal(run_dir)
    settings = BatchSettings(gather_s=a.gather_s, poll_s=0.05)
    on = dialect.removesuffix("-file")  # gemini-file: the gemini wire, every batch through the Files API
    direct_wire, wire = batch_wire(on, provider(dialect, port, "bmd")), batch_wire(on, provider(dialect, port))
    if dialect == "gemini-file":
        for w in (direct_wire, wire):
            if isinstance(w, GeminiBatchWire):
                w.inline_max_bytes = 0  # every batch through the Files API, as one over 20 MB would go
    direct = BatchLane("bmd", direct_wire, journal, settings)
    lane = BatchLane("bm", wire, journal, settings)
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        await asyncio.gather(*(single(direct, i) for i in range(a.single)))
        rounds = await asyncio.gather(*(tool_loop(lane, i, a.rounds) for i in range(a.tool)))
    finally:
        await direct.close()
        await lane.close()
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - t0
    requests = a.single + sum(rounds)
    rss_mb = round(vm_hwm_kb() / 1024, 1)
    n_batches = len(journal.batches)
    del journal, lane, direct
    held = loaded_journal_bytes(run_dir)
    return {"peak_rss_mb_after": rss_mb, "journal_heap_mb": round(held / 2**20, 1),
            "journal_heap_bytes_per_request": round(held / requests), "wire": dialect, "requests": requests, "batches": n_batches, "wall_s": round(wall, 2),
            "cpu_s": round(cpu, 2), "cpu_us_per_request": round(cpu / requests * 1e6, 1),
            "requests_per_cpu_s": round(requests / cpu), "journal_bytes_per_request": round(
                journal_bytes(run_dir) / requests), "tool_rounds": sum(rounds)}


def loaded_journal_bytes(run_dir: Path) -> int:
    """The heap a journal opened on this run folder holds (what a rerun pays before its first job)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        journal = BatchJournal(run_dir)
        held = tracemalloc.get_traced_memory()[0] - before
        del journal
    finally:
        tracemalloc.stop()
    return held


async def interactive(port: int, n: int) -> dict[str, Any]:
    client = ModelClient("bm", provider("openai", port), concurrency=256)
    cpu0, t0 = time.process_time(), time.perf_counter()
    try:
        await asyncio.gather(*(client.chat(ChatRequest([{"role": "user", "content": f"Question {i}"}],
                                                       params={"max_tokens": 64})) for i in range(n)))
    finally:
        await client.close()
    cpu = time.process_time() - cpu0
    return {"requests": n, "wall_s": round(time.perf_counter() - t0, 2), "cpu_s": round(cpu, 2),
            "cpu_us_per_request": round(cpu / n * 1e6, 1), "requests_per_cpu_s": round(n / cpu)}


def start_sim(reply_chars: int) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "providers.sim", "--model", "bm:tools", "--model", "bmd:direct",
                             "--tool-uses", "2", "--batch-turnaround-s", "0.05", "--reply-chars", str(reply_chars)],
                            stdout=subprocess.PIPE, text=True, cwd=ROOT)
    assert proc.stdout is not None
    return proc, int(orjson.loads(proc.stdout.readline())["port"])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--single", type=int, default=10_000)
    ap.add_argument("--tool", type=int, default=1_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=int, default=2_000)
    ap.add_argument("--gather-s", type=float, default=0.5)
    ap.add_argument("--reply-chars", type=int, default=2000)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    out: dict[str, Any] = {"batched": []}
    sim, port = start_sim(a.reply_chars)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            out["interactive"] = uvloop.run(interactive(port, a.baseline))
            out["interactive"]["peak_rss_mb_after"] = round(vm_hwm_kb() / 1024, 1)
            for dialect in ("openai", "openai-responses", "anthropic", "gemini", "gemini-file"):
                run_dir = Path(tmp) / dialect
                run_dir.mkdir()
                out["batched"].append(uvloop.run(batched(dialect, port, a, run_dir)))
        out["peak_rss_mb"] = round(vm_hwm_kb() / 1024, 1)
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)
    if a.json:
        print(json.dumps(out, indent=2))
        return
    base = out["interactive"]
    print(f"interactive baseline: {base['requests']} requests, {base['cpu_us_per_request']} µs CPU each, "
          f"{base['requests_per_cpu_s']} requests per CPU-second, peak RSS so far {base['peak_rss_mb_after']} MB")
    for r in out["batched"]:
        ratio = r["cpu_us_per_request"] / base["cpu_us_per_request"]
        print(f"batch {r['wire']:16s}: {r['requests']} requests ({a.single} single-turn + {r['tool_rounds']} tool "
              f"rounds) in {r['batches']} batches, {r['wall_s']} s wall, {r['cpu_us_per_request']} µs CPU each "
              f"({ratio:.2f}x interactive), {r['requests_per_cpu_s']} requests per CPU-second, "
              f"journal {r['journal_bytes_per_request']} B per request on disk, "
              f"{r['journal_heap_bytes_per_request']} B per request in memory once loaded ({r['journal_heap_mb']} MB), "
              f"peak RSS so far {r['peak_rss_mb_after']} MB")
    print(f"peak RSS of our process: {out['peak_rss_mb']} MB (the baseline and every wire, one after another)")


if __name__ == "__main__":
    main()
