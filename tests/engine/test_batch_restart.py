"""Restarts in batch mode: every crash window of submit/poll/download, and a real kill -9 loop.

The windows are played with the real lane, journal, wires and sim, by doing a step's provider
call without the journal write that follows it (which is what a crash at that moment leaves).
"""

from __future__ import annotations

import asyncio
import os
import random
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.core.job import job_context
from fasteval.engine.batch.batching import BatchLane, custom_id
from fasteval.runfolder.batch_journal import BatchJournal
from providers.anthropic import AnthropicProvider
from providers.base import ChatRequest, Provider, ProviderError
from providers.batch.anthropic import AnthropicBatchWire
from providers.batch.base import BatchSettings, BatchWire
from providers.batch.gemini import GeminiBatchWire
from providers.batch.openai import OpenAIBatchWire
from providers.gemini import GeminiProvider
from providers.openai_compat import OpenAICompatProvider
from providers.sim import SimModel, SimServer
from tests.engine.batch_kill import FASTEVAL, kill_loop, records_once

SETTINGS = BatchSettings(gather_s=0.02, poll_s=0.02)


class Crash(Exception):
    """Stands for the process dying right after a provider call, before its journal write."""


def wire_of(server: SimServer, dialect: str) -> BatchWire:
    provider: Provider
    if dialect == "openai":
        provider = OpenAICompatProvider(server.base_url, "m")
        return OpenAIBatchWire(provider)  # type: ignore[arg-type]
    root = server.base_url.removesuffix("/v1")
    if dialect == "gemini":
        return GeminiBatchWire(GeminiProvider("m", base_url=root, api_key="k", api_key_env=None))
    provider = AnthropicProvider("m", base_url=root, api_key="k", api_key_env=None)
    return AnthropicBatchWire(provider)


def request(i: int) -> ChatRequest:
    return ChatRequest([{"role": "user", "content": f"question {i}"}], params={"max_tokens": 64})


async def prepared(wire: BatchWire, journal: BatchJournal, n: int) -> tuple[Any, list[bytes]]:
    """Journal a batch's input exactly as a lane would for jobs j0..j{n-1}, round 0."""
    lines, entries = [], []
    for i in range(n):
        body = await wire.body(request(i))
        cid = custom_id("m", f"j{i}", 0, body)
        lines.append(wire.line(cid, body))
        entries.append((cid, f"j{i}", 0))
    return await journal.begin("m", lines, entries), lines


async def rerun(run_dir: Path, server: SimServer, dialect: str, n: int) -> list[str]:
    """A fresh process's lane: reattach, then every job asks its round-0 request again."""
    journal = BatchJournal(run_dir)
    lane = BatchLane("m", wire_of(server, dialect), journal, SETTINGS)
    await lane.reattach()

    async def job(i: int) -> str:
        with job_context(f"j{i}"):
            resp = await lane.chat(request(i))
        return resp.content or ""

    try:
        return await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(n))), 30)
    finally:
        await lane.close()


@pytest.fixture
async def server() -> Any:
    s = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.05}})])
    await s.start()
    yield s
    await s.stop()


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_crash_between_create_and_id_recorded_reattaches_without_paying_twice(
        tmp_path: Path, server: SimServer, dialect: str) -> None:
    wire = wire_of(server, dialect)
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 4)

    async def on_file(fid: str) -> None:
        await journal.file(jb.local, fid)

    await wire.create(jb.local, lines, file_id=None, on_file=on_file)  # created; the id never journaled
    await wire.close()
    answers = await rerun(tmp_path, server, dialect, 4)
    assert len(answers) == 4 and all(answers)
    assert server.batch_apis.created == 1
    assert len(server.batch_apis.submitted) == len(set(server.batch_apis.submitted)) == 4


async def test_crash_after_upload_reuses_the_uploaded_file(tmp_path: Path, server: SimServer) -> None:
    wire = wire_of(server, "openai")
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 3)

    async def crash(fid: str) -> None:
        raise Crash(fid)

    with pytest.raises(Crash):
        await wire.create(jb.local, lines, file_id=None, on_file=crash)
    await wire.close()
    assert await rerun(tmp_path, server, "openai", 3)
    inputs = [f for f in server.batch_apis.files.values() if f["purpose"] == "batch"]
    assert len(inputs) == 1 and server.batch_apis.created == 1


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_crash_before_create_creates_once(tmp_path: Path, server: SimServer, dialect: str) -> None:
    wire = wire_of(server, dialect)
    await prepared(wire, BatchJournal(tmp_path), 3)  # input fsynced and journaled; create never ran
    await wire.close()
    assert await rerun(tmp_path, server, dialect, 3)
    assert server.batch_apis.created == 1


async def test_anthropic_match_by_time_and_count_is_confirmed_by_custom_ids(tmp_path: Path,
                                                                           server: SimServer) -> None:
    wire = wire_of(server, "anthropic")
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 2)
    noop = _noop
    await wire.create(jb.local, lines, file_id=None, on_file=noop)  # ours, id lost in the crash
    # someone else's batch of the same size, created after ours: the newest, so matched first
    other = [wire.line(f"other{i}", await wire.body(request(90 + i))) for i in range(2)]
    await wire.create("x", other, file_id=None, on_file=noop)
    await wire.close()
    assert await rerun(tmp_path, server, "anthropic", 2)
    journal = BatchJournal(tmp_path)
    assert journal.batches[jb.local].forgotten  # the stranger was tried and disproved
    assert server.batch_apis.created == 2  # and ours was found, not created again


async def _noop(fid: str) -> None:
    return None


@pytest.mark.parametrize("dialect", ["openai", "anthropic", "gemini"])
async def test_results_already_journaled_need_no_network(tmp_path: Path, server: SimServer, dialect: str) -> None:
    first = await rerun(tmp_path, server, dialect, 3)
    seen = (server.batch_apis.created, server.requests)
    again = await rerun(tmp_path, server, dialect, 3)
    assert again == first and (server.batch_apis.created, server.requests) == seen


async def test_a_torn_journal_line_is_cut_off(tmp_path: Path, server: SimServer) -> None:
    await rerun(tmp_path, server, "openai", 2)
    path = tmp_path / "batches" / "journal.jsonl"
    good = path.read_bytes()
    path.write_bytes(good + b'{"e": "created", "loc')
    journal = BatchJournal(tmp_path)
    assert path.read_bytes() == good and len(journal.batches) == 1


def _sim_process(dialect: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen([sys.executable, "-m", "providers.sim", "--model", "bm:tools",
                             "--batch-turnaround-s", "0.4"], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    port = int(orjson.loads(proc.stdout.readline())["port"])
    return proc, port


def _config(tmp: Path, port: int, dialect: str, *, batch: bool, name: str) -> Path:
    model: dict[str, Any] = {"name": "bm", "provider": dialect}
    if dialect == "openai":
        model["base_url"] = f"http://127.0.0.1:{port}/v1"
    else:
        model.update(base_url=f"http://127.0.0.1:{port}", api_key_env="FASTEVAL_TEST_ANTHROPIC_KEY")
    if batch:
        model["batch"] = {"gather_s": 0.1, "poll_s": 0.1}
    cfg = {"seeds": 2, "models": [model],
           "suites": [{"name": "demo", "options": {"n_tasks": 6, "image_size": [160, 120]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
           "run": {"max_concurrency": 64, "fsync": "always"}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


@pytest.mark.slow
@pytest.mark.parametrize("dialect", ["openai", "anthropic"])
def test_kill_9_at_random_points_then_rerun_records_each_job_once_and_pays_once(tmp_path: Path,
                                                                               dialect: str) -> None:
    sim, port = _sim_process(dialect)
    env = {**os.environ, "FASTEVAL_TEST_ANTHROPIC_KEY": "sim-key"}
    rng = random.Random(24)
    try:
        batched = _config(tmp_path, port, dialect, batch=True, name="batched")
        run_dir = tmp_path / "run"
        argv = [*FASTEVAL, "run", str(batched), "--run-dir", str(run_dir), "--no-progress"]
        journal = run_dir / "batches" / "journal.jsonl"
        kills = kill_loop(argv, journal, env, rng)
        assert kills >= 3
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/sim/batches", timeout=10) as resp:
            stats = orjson.loads(resp.read())
        sent = stats["submitted"]
        assert len(sent) == len(set(sent)), "a request was submitted twice"
        inter = _config(tmp_path, port, dialect, batch=False, name="inter")
        plain = subprocess.run([*FASTEVAL, "run", str(inter), "--run-dir", str(tmp_path / "inter"), "--no-progress"],
                               capture_output=True, text=True, timeout=180, env=env)
        assert plain.returncode == 0, plain.stderr[-2000:]
        a, b = records_once(tmp_path / "inter"), records_once(run_dir)
        assert a.keys() == b.keys() and len(b) == 12
        for k in a:
            assert (a[k]["answer"], a[k]["score"], a[k]["rounds"]) == (b[k]["answer"], b[k]["score"], b[k]["rounds"])
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)


async def test_the_live_panel_rows_show_each_batch_in_flight(tmp_path: Path, server: SimServer) -> None:
    server.models["m"].options["batch_api"] = {"turnaround_s": 1.0}
    lane = BatchLane("m", wire_of(server, "openai"), BatchJournal(tmp_path), SETTINGS)

    async def job(i: int) -> None:
        with job_context(f"j{i}"):
            await lane.chat(request(i))

    jobs = asyncio.gather(job(0), job(1))
    try:
        for _ in range(200):
            rows = {k: v for k, v in lane.rows().items() if k.startswith("batch batch_")}
            if rows and next(iter(rows.values()))["limit"] == "in_progress":
                break
            await asyncio.sleep(0.02)
        (name, row), = rows.items()
        assert name.endswith("(m)") and row["in_flight"] == 2 and "total=2" in row["requests"]
        await jobs
        assert lane.rows() == {}
    finally:
        await lane.close()


async def test_a_journal_that_cannot_be_written_fails_the_requests_instead_of_submitting(
        tmp_path: Path, server: SimServer) -> None:
    journal = BatchJournal(tmp_path)
    (tmp_path / "batches").write_text("not a folder")  # every input and event write now fails
    lane = BatchLane("m", wire_of(server, "openai"), journal, SETTINGS)
    try:
        with job_context("j0"), pytest.raises(ProviderError, match="cannot journal a batch"):
            await asyncio.wait_for(lane.chat(request(0)), 10)
    finally:
        await lane.close()
    assert server.batch_apis.created == 0  # never submitted what could not be journaled first


def test_a_planted_journal_link_is_refused(tmp_path: Path) -> None:
    from fasteval.core.errors import UnsafeRunFolder

    (tmp_path / "batches").mkdir()
    (tmp_path / "elsewhere.jsonl").write_bytes(b"")
    (tmp_path / "batches" / "journal.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(UnsafeRunFolder):
        BatchJournal(tmp_path)
