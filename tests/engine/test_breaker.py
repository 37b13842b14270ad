"""The endpoint circuit breaker against a real sim server that goes down mid-run.

A server that comes back: jobs wait, none errors, the sweep completes. One that never comes
back: the other endpoint's work finishes, the sweep ends incomplete (exit 3) with no records for
jobs that never ran, and a rerun runs exactly those.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import SweepIncomplete, run_sweep
from providers.breaker import BreakerPolicy, CircuitBreaker, EndpointDown, EndpointUnreachable
from providers.sim import SimModel, SimServer

FAST_BREAKER = {"failures": 3, "probe_initial_s": 0.05, "probe_max_s": 0.2}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def config(tmp: Path, port: int, *, n_tasks: int = 12, outage_budget_s: float = 30.0,
           with_local: bool = False) -> Path:
    models: list[dict[str, Any]] = [{
        "name": "remote", "provider": "vllm", "base_url": f"http://127.0.0.1:{port}/v1", "model": "remote",
        "limits": {"concurrency": 4}, "timeouts": {"connect_s": 1, "read_s": 5, "attempt_s": 5},
        "retry": {"max_attempts": 3, "base_delay_s": 0.01, "max_delay_s": 0.05}}]
    if with_local:
        models.append({"name": "local", "provider": "sim", "policy": "direct", "latency_ms": 2})
    cfg = {"seeds": 1, "models": models,
           "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [64, 48],
                                                   "multi_turn_every": 1000}}],
           "run": {"max_concurrency": 8, "fsync": "never",
                   "breaker": {**FAST_BREAKER, "outage_budget_s": outage_budget_s}}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    return [orjson.loads(x) for x in path.read_bytes().splitlines()] if path.exists() else []


def sim(port: int) -> SimServer:
    return SimServer([SimModel("remote", policy="direct", latency_ms=20)], port=port)


async def test_an_endpoint_that_goes_down_and_comes_back_pauses_its_jobs_and_none_errors(tmp_path: Path) -> None:
    port = free_port()
    server = sim(port)
    await server.start()
    run_dir = tmp_path / "run"
    sweep = asyncio.create_task(run_sweep(load_config(config(tmp_path, port, n_tasks=24)),
                                          RunOptions(run_dir=run_dir, progress=False)))
    for _ in range(3000):  # polling the sim's own counter: it has no event to wait on
        if server.requests >= 4:
            break
        await asyncio.sleep(0.01)
    await server.stop()  # the server dies with requests in flight
    await asyncio.sleep(1.0)  # long enough to exhaust every request's own retries many times over
    assert not sweep.done()
    server = sim(port)
    await server.start()
    try:
        result = await asyncio.wait_for(sweep, 60)
    finally:
        await server.stop()
    assert (result.ok, result.errors, result.not_run) == (48, 0, 0)  # 24 tasks x the demo's 2 settings
    recs = records(run_dir)
    assert len(recs) == 48 and all(r["status"] == "ok" for r in recs)


async def test_an_endpoint_that_never_comes_back_ends_incomplete_and_a_rerun_finishes(tmp_path: Path) -> None:
    port = free_port()  # nothing listens here
    cfg = config(tmp_path, port, n_tasks=6, outage_budget_s=0.5, with_local=True)
    run_dir = tmp_path / "run"
    with pytest.raises(SweepIncomplete) as e:
        await run_sweep(load_config(cfg), RunOptions(run_dir=run_dir, progress=False))
    result = e.value.result
    assert "remote" in str(e.value) and "connection refused" in str(e.value) and "rerun" in str(e.value)
    assert (result.ok, result.errors, result.not_run) == (12, 0, 12)  # the local model's work was done
    recs = records(run_dir)
    assert {r["model"] for r in recs} == {"local"} and len(recs) == 12  # no record for jobs never run

    server = sim(port)
    await server.start()
    try:
        again = await run_sweep(load_config(cfg), RunOptions(run_dir=run_dir, progress=False))
    finally:
        await server.stop()
    assert (again.ok, again.errors, again.skipped) == (12, 0, 12)
    recs = records(run_dir)
    assert len(recs) == 24 and len({r["job_id"] for r in recs}) == 24 and all(r["status"] == "ok" for r in recs)


async def test_breaker_opens_after_consecutive_outage_failures_and_a_probe_closes_it() -> None:
    up = asyncio.Event()

    async def probe() -> None:
        if not up.is_set():
            raise EndpointUnreachable("connection refused (127.0.0.1:9)")

    b = CircuitBreaker("ep", BreakerPolicy(failures=2, probe_initial_s=0.01, probe_max_s=0.02), probe)
    b.on_failure(EndpointUnreachable("connection refused (127.0.0.1:9)"))
    assert not b.is_open
    b.on_failure(EndpointUnreachable("connection refused (127.0.0.1:9)"))
    assert b.is_open and b.describe().startswith("down since ") and "connection refused (127.0.0.1:9)" in b.describe()
    waiter = asyncio.create_task(b.admit())
    await asyncio.sleep(0.05)
    assert not waiter.done()
    up.set()
    await asyncio.wait_for(waiter, 2)
    assert not b.is_open and b.describe() == "up"
    b.give_up("servers exhausted")
    with pytest.raises(EndpointDown, match="servers exhausted"):
        await b.admit()
    await b.close()


async def test_a_supervisor_can_give_up_on_an_endpoint_and_its_remaining_jobs_are_left_unrun(tmp_path: Path) -> None:
    # What a local-server supervisor does when a model's servers are exhausted: give_up() (or raise
    # EndpointDown from the provider). Jobs in flight and not yet started get no record: exit 3.
    from fasteval.engine.run.sweep import Sweep

    port = free_port()
    server = sim(port)
    await server.start()
    cfg = load_config(config(tmp_path, port, n_tasks=24, with_local=True))
    run_dir = tmp_path / "run"
    sweep = Sweep(cfg, RunOptions(run_dir=run_dir, progress=False))
    task = asyncio.create_task(sweep.run())
    try:
        for _ in range(3000):
            if server.requests >= 4:
                break
            await asyncio.sleep(0.01)
        breaker = sweep.clients["remote"].breaker
        assert breaker is not None
        breaker.give_up("servers exhausted")
        with pytest.raises(SweepIncomplete, match="servers exhausted") as e:
            await asyncio.wait_for(task, 60)
    finally:
        await server.stop()
    result = e.value.result
    assert result.errors == 0 and result.not_run > 0 and result.ok + result.not_run == 96
    recs = records(run_dir)
    assert len(recs) == result.ok and all(r["status"] == "ok" for r in recs)
