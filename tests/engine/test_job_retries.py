"""Per-record ``retries`` are the retries that job's own requests caused, with no phantom retry.

The sim server counts the faults it injected; each fault on a request that is then retried is
exactly one retry, so the records' sum must equal the sim's count even with many concurrent jobs
of one endpoint (the old counter charged each job its neighbours' retries).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import yaml

from fasteval.config.load import load_config
from fasteval.core.job import job_context
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from providers.base import ChatRequest, ProviderError
from providers.client import ModelClient, RetryPolicy
from providers.openai_compat import OpenAICompatProvider
from providers.sim import Faults, SimModel, SimServer


def config(tmp: Path, url: str, *, concurrency: int, attempts: int = 30, n_tasks: int = 20) -> Path:
    cfg: dict[str, Any] = {
        "seeds": 1,
        "models": [{"name": "m", "provider": "vllm", "base_url": url, "limits": {"concurrency": concurrency},
                    "retry": {"max_attempts": attempts, "base_delay_s": 0.001, "max_delay_s": 0.005}}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [64, 48], "multi_turn_every": 1000},
                    "settings": [{"name": "direct", "tools": [], "max_rounds": 1}]}],
        "run": {"max_concurrency": concurrency, "fsync": "never"},
    }
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def records(run_dir: Path) -> list[dict[str, Any]]:
    return [orjson.loads(x) for x in (run_dir / "records.jsonl").read_bytes().splitlines()]


async def test_records_retries_sum_to_what_the_sim_saw_under_concurrency(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", latency_ms=3, seed=7, faults=Faults(p_500=0.3))])
    await server.start()
    try:
        res = await run_sweep(load_config(config(tmp_path, server.base_url, concurrency=16, n_tasks=40)),
                              RunOptions(run_dir=tmp_path / "run", progress=False))
    finally:
        await server.stop()
    recs = records(tmp_path / "run")
    assert res.errors == 0 and len(recs) == 40
    faults = server.by_outcome.get("500", 0)
    assert faults > 0
    assert sum(r["retries"] for r in recs) == faults == res.stats["m"]["retries"]


async def test_each_record_carries_its_own_jobs_retries(tmp_path: Path) -> None:
    # One job at a time and one request per job: the schedule says exactly which job sees which faults.
    server = SimServer([SimModel("m", policy="direct")])
    server._schedules["m"] = ["500", "500", "ok", "ok", "500", "ok", "ok"]
    await server.start()
    try:
        await run_sweep(load_config(config(tmp_path, server.base_url, concurrency=1, n_tasks=5)),
                        RunOptions(run_dir=tmp_path / "run", progress=False))
    finally:
        await server.stop()
    assert [r["retries"] for r in records(tmp_path / "run")] == [2, 0, 1, 0, 0]


async def test_no_phantom_retry_after_the_last_attempt() -> None:
    server = SimServer([SimModel("m", policy="direct")])
    server._schedules["m"] = ["500", "500", "500"]
    await server.start()
    client = ModelClient("m", OpenAICompatProvider(server.base_url, "m"),
                         retry=RetryPolicy(max_attempts=3, base_delay_s=0.001, max_delay_s=0.002))
    try:
        with job_context("j") as job:
            try:
                await client.chat(ChatRequest(messages=[{"role": "user", "content": "hi"}]))
            except ProviderError as e:
                assert e.kind == "transient"
    finally:
        await client.close()
        await server.stop()
    assert server.requests == 3
    assert job.retries == 2 and client.stats.retries == 2  # three attempts are two retries, not three
