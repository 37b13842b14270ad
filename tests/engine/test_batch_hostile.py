"""A hostile or flaky batch provider never makes us pay twice (issue 30, items 1-3 and the rule).

Each test plays one misbehaviour with the sim's real batch APIs (providers.sim.hostile) against
the real lane, journal and wires, and counts what the provider was paid for.
"""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.endpoint import EndpointSpec
from fasteval.engine.batch.batching import BatchLane, custom_id
from fasteval.engine.offline.batch_admin import cancel_batches, manifest_specs
from fasteval.runfolder.batch_journal import BatchJournal
from providers.base import ProviderError
from providers.batch.base import BatchSettings
from providers.sim import SimModel, SimServer
from providers.sim.hostile import Hostile
from tests.engine.hostile_lane import FAST, WIRES, ask, colleague, request, stranded, wire_of


@pytest.fixture
async def server() -> Any:
    s = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.05}})])
    await s.start()
    yield s
    await s.stop()


def paid(server: SimServer) -> Counter[str]:
    return Counter(server.batch_apis.submitted)


@pytest.mark.parametrize("fault", ["html", "unknown", "junk"])
@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini-file"])
async def test_results_with_none_of_our_ids_end_the_jobs_and_never_make_a_new_batch(
        tmp_path: Path, server: SimServer, wire: str, fault: str) -> None:
    server.hostile = Hostile(results=fault)
    out = await ask(tmp_path, server, wire, 3)
    assert all(isinstance(x, ProviderError) and "none of its 3 requests' ids" in str(x) for x in out), out
    assert server.batch_apis.created == 1 and max(paid(server).values()) == 1
    journal = BatchJournal(tmp_path)
    (jb,) = journal.batches.values()
    assert jb.ended is None and jb.batch_id  # still ours, still open: a rerun collects it, `batches cancel` stops it
    server.hostile = None  # the provider mends: the rerun collects the very same batch
    again = await ask(tmp_path, server, wire, 3)
    assert all(isinstance(x, str) for x in again), again
    assert server.batch_apis.created == 1


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini-file"])
async def test_results_missing_some_of_ours_beside_junk_never_resubmit_the_missing(tmp_path: Path, server: SimServer,
                                                                                   wire: str) -> None:
    server.hostile = Hostile(results="partial")
    out = await ask(tmp_path, server, wire, 4)
    ok = [x for x in out if isinstance(x, str)]
    lost = [x for x in out if isinstance(x, ProviderError)]
    assert len(ok) == 2 and len(lost) == 2 and all("may have run" in str(x) for x in lost), out
    assert server.batch_apis.created == 1 and max(paid(server).values()) == 1
    server.hostile = None
    assert all(isinstance(x, str) for x in await ask(tmp_path, server, wire, 4))  # the rerun collects the rest
    assert server.batch_apis.created == 1


@pytest.mark.parametrize("wire", [w for w in WIRES if w != "gemini"])  # inline answers are matched by place
async def test_one_bad_download_is_retried_and_the_batch_collected(tmp_path: Path, server: SimServer,
                                                                  wire: str) -> None:
    server.hostile = Hostile(results="html", results_times=1, duplicate=True, reorder=True)
    out = await ask(tmp_path, server, wire, 3)
    assert all(isinstance(x, str) for x in out), out
    assert server.batch_apis.created == 1


@pytest.mark.parametrize("fault", ["outage", "unknown_state"])
@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_a_batch_that_cannot_be_polled_is_polled_on_never_paid_again(
        tmp_path: Path, server: SimServer, wire: str, fault: str, caplog: pytest.LogCaptureFixture) -> None:
    server.hostile = Hostile(**{fault: 9})  # four rounds of two tries: far past the retry budget
    with caplog.at_level(logging.WARNING, "fasteval"):
        out = await ask(tmp_path, server, wire, 4)
    assert all(isinstance(x, str) for x in out), out
    assert server.batch_apis.created == 1 and max(paid(server).values()) == 1
    assert any("cannot poll it" in r.getMessage() for r in caplog.records)  # one line in run.log
    assert all(b.ended and b.ended != "unreachable" for b in BatchJournal(tmp_path).batches.values())


@pytest.mark.parametrize("wire", WIRES)
async def test_a_request_is_resubmitted_at_most_max_resubmissions_times(tmp_path: Path, wire: str) -> None:
    server = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.02,
                                                                              "expire": 100}})])
    await server.start()
    try:
        settings = BatchSettings(gather_s=0.02, poll_s=0.02, max_resubmissions=2)
        out = await ask(tmp_path, server, wire, 2, settings=settings)
        assert all(isinstance(x, ProviderError) and "batch.max_resubmissions (2)" in str(x) for x in out), out
        assert server.batch_apis.created == 3 and set(paid(server).values()) == {3}
        again = await ask(tmp_path, server, wire, 2, settings=settings)  # a rerun: the ceiling is journaled
        assert all(isinstance(x, ProviderError) for x in again) and server.batch_apis.created == 3
    finally:
        await server.stop()


async def test_anthropic_a_colleagues_batch_of_the_same_size_is_never_adopted(tmp_path: Path,
                                                                             server: SimServer) -> None:
    local = await stranded(tmp_path, server, "anthropic", 4)
    theirs = await colleague(server, "anthropic", 4)  # after our begin, same count: the guess matches it
    server.hostile = Hostile(foreign={theirs})
    out = await ask(tmp_path, server, "anthropic", 4)
    assert all(isinstance(x, str) for x in out), out
    journal = BatchJournal(tmp_path)
    assert journal.batches[local].forgotten == [theirs] and journal.batches[local].batch_id != theirs
    events = [orjson.loads(x) for x in (tmp_path / "batches" / "journal.jsonl").read_bytes().splitlines()]
    assert not [e for e in events if e["e"] == "created" and e["id"] == theirs]  # never journaled as ours
    assert "cancel " + theirs not in server.hostile.touched
    assert server.batch_apis.created == 2  # theirs, and ours once


def _manifest(run_dir: Path, server: SimServer, provider: str) -> list[EndpointSpec]:
    """The run's manifest names the endpoint; the specs returned are what the CLI hands over once checked."""
    root = server.base_url.removesuffix("/v1")
    spec = {"name": "m", "provider": provider, "model": "m", "batch": True,
            "base_url": server.base_url if provider == "openai" else root, "api_key_env": "FE_HOSTILE_KEY"}
    (run_dir / "manifest.json").write_bytes(orjson.dumps({"config": {"models": [spec]}}))
    return manifest_specs(run_dir)


async def test_batches_cancel_never_cancels_a_guess_nor_submits(tmp_path: Path, server: SimServer,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_HOSTILE_KEY", "k")
    server.models["m"].options["batch_api"] = {"turnaround_s": 5.0}
    local = await stranded(tmp_path, server, "anthropic", 4)
    theirs = await colleague(server, "anthropic", 4)
    server.hostile = Hostile(foreign={theirs})
    specs = _manifest(tmp_path, server, "anthropic")
    said: list[str] = []
    cancelled, kept = await cancel_batches(tmp_path, specs, poll_s=0.02, say=said.append)
    assert (cancelled, kept) == (0, 0) and server.hostile.touched == []
    assert server.batch_apis.created == 1  # theirs only: nothing of ours submitted
    assert any("not looked for or cancelled" in x for x in said)
    assert BatchJournal(tmp_path).batches[local].ended is None  # a rerun still confirms it


async def test_batches_cancel_does_not_wait_for_a_batch_whose_cancel_failed(
        tmp_path: Path, server: SimServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FE_HOSTILE_KEY", "k")
    server.models["m"].options["batch_api"] = {"turnaround_s": 30.0}
    with pytest.raises(TimeoutError):  # a run stopped while its batch runs
        await ask(tmp_path, server, "openai", 2, wait_s=1.0)
    (bid,) = server.batch_apis.batches
    server.hostile = Hostile(refuse_cancel=True)
    specs = _manifest(tmp_path, server, "openai")
    said: list[str] = []
    cancelled, _ = await asyncio.wait_for(cancel_batches(tmp_path, specs, poll_s=0.02, say=said.append), 20)
    assert cancelled == 0 and any("cancelling " + bid + " failed" in x for x in said), said
    assert server.hostile.calls["poll"] == 0  # not waited for: it runs on, and a rerun collects it
    assert BatchJournal(tmp_path).batches[next(iter(BatchJournal(tmp_path).batches))].ended is None


@pytest.mark.parametrize("wire", ["openai", "anthropic", "gemini"])
async def test_a_batch_list_that_never_ends_is_bounded_and_creates_nothing(tmp_path: Path, server: SimServer,
                                                                           wire: str) -> None:
    await colleague(server, wire.split("-")[0], 2)  # a list with something in it, never ours
    await stranded(tmp_path, server, wire, 2)
    server.hostile = Hostile(endless_list=True)
    before = server.batch_apis.created
    out = await ask(tmp_path, server, wire, 2)
    assert all(isinstance(x, ProviderError) and "list does not end" in str(x) for x in out), out
    assert server.batch_apis.created == before  # not knowing whether ours exists, none was made
    assert server.hostile.calls["list"] <= 8


async def test_stopped_before_a_batch_was_created_says_none_is_left_running(
        tmp_path: Path, server: SimServer, caplog: pytest.LogCaptureFixture) -> None:
    """Ctrl-C during a Gemini upload: the batch is journaled (begun) but was never created."""
    await stranded(tmp_path, server, "gemini-file", 2)
    lane = BatchLane("m", wire_of(server, "gemini-file"), BatchJournal(tmp_path), FAST)
    with caplog.at_level(logging.WARNING, "fasteval"):
        await lane.close()
    assert lane.in_flight() == 0  # what `run` reports as "left running at the provider"
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "left running" not in said and "1 batch(es) were being submitted" in said


@pytest.mark.parametrize("value", [-1, True, "3", 1.5])
def test_max_resubmissions_takes_a_whole_number(value: Any) -> None:
    with pytest.raises(ValueError, match="batch.max_resubmissions"):
        BatchSettings.from_config({"max_resubmissions": value})
    assert BatchSettings.from_config(True) == BatchSettings(max_resubmissions=3)


@pytest.mark.slow
def test_a_run_through_a_polling_outage_exits_0_pays_once_and_says_so_in_run_log(tmp_path: Path) -> None:
    """The issue's run: `GET /v1/batches/{id}` answers 500 past the retry budget, end to end."""
    sim = subprocess.Popen([sys.executable, "-m", "providers.sim", "--model", "bm:direct", "--batch-turnaround-s",
                            "0.3", "--hostile", '{"outage": 8}'], stdout=subprocess.PIPE, text=True)
    try:
        assert sim.stdout is not None
        port = int(orjson.loads(sim.stdout.readline())["port"])
        cfg = {"seeds": 1, "models": [{"name": "bm", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                                       "batch": {"gather_s": 0.1, "poll_s": 0.1},
                                       "retry": {"max_attempts": 2, "base_delay_s": 0.05}}],
               "suites": [{"name": "demo", "options": {"n_tasks": 4, "image_size": [160, 120]},
                           "settings": [{"name": "direct", "tools": []}]}]}
        (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(cfg))
        run_dir = tmp_path / "run"
        done = subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(tmp_path / "sweep.yaml"),
                               "--run-dir", str(run_dir), "--no-progress"], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/sim/batches", timeout=10) as resp:
            seen = orjson.loads(resp.read())
        assert len(seen["submitted"]) == len(set(seen["submitted"])) >= 4  # each request paid once
        assert "cannot poll it" in (run_dir / "run.log").read_text()
    finally:
        sim.terminate()
        sim.wait(timeout=10)


async def test_anthropic_two_of_our_batches_found_by_guess_are_each_adopted_by_their_own(
        tmp_path: Path, server: SimServer) -> None:
    """Two batches of the same size whose ids were both lost: each guess that is the other's is left to it."""
    wire = wire_of(server, "anthropic")
    journal = BatchJournal(tmp_path)

    async def noop(fid: str) -> None:
        return None

    for k in (0, 1):  # jobs j0,j1 in the first, j2,j3 in the second; both created, neither id journaled
        lines, entries = [], []
        for i in (2 * k, 2 * k + 1):
            body = await wire.body(request(i))
            cid = custom_id("m", f"j{i}", 0, body)
            lines.append(wire.line(cid, body))
            entries.append((cid, f"j{i}", 0))
        jb = await journal.begin("m", lines, entries)
        await wire.create(jb.local, lines, file_id=None, on_file=noop)
    await wire.close()
    out = await ask(tmp_path, server, "anthropic", 4)
    assert all(isinstance(x, str) for x in out), out
    assert server.batch_apis.created == 2 and max(paid(server).values()) == 1  # nothing paid twice
