"""Gemini batch mode through an uploaded JSONL file: the resumable upload, keyed responses, the
inline/file choice at 20 MB, every crash window of upload/create, and a real kill -9 loop.

Against the sim's Gemini batch mode and Files API (providers/sim/gemini_batch.py), written from
Google's docs. Where a test needs every batch on the file path with small images, it lowers the
wire's inline ceiling (``inline_max_bytes``); the 20 MB figure itself is tested with a real round
over it.
"""

from __future__ import annotations

import asyncio
import base64
import os
import random
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pytest
import pyvips
import yaml

from fasteval.config.load import load_config
from fasteval.core.job import job_context
from fasteval.engine.batch.batching import BatchLane, custom_id
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.batch_journal import BatchJournal
from providers.base import ChatRequest, ProviderError
from providers.batch.base import BatchSettings
from providers.batch.gemini import INLINE_MAX_BYTES, GeminiBatchWire, file_name, split_line
from providers.gemini import GeminiProvider
from providers.sim import SimModel, SimServer
from tests.engine.batch_kill import FASTEVAL, kill_loop, records_once
from tests.engine.test_batch_mode import FAST, records, same_results, sim_model, sweep, write_config

SETTINGS = BatchSettings(gather_s=0.02, poll_s=0.02)


@pytest.fixture
def file_only(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every Gemini batch takes the file path, whatever its size."""
    monkeypatch.setattr(GeminiBatchWire, "inline_max_bytes", 0)


@pytest.fixture
async def server() -> Any:
    s = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.05}})])
    await s.start()
    yield s
    await s.stop()


def wire_of(server: SimServer, resolver: Any = None) -> GeminiBatchWire:
    root = server.base_url.removesuffix("/v1")
    return GeminiBatchWire(GeminiProvider("m", base_url=root, api_key="k", api_key_env=None, image_resolver=resolver))


def request(i: int, image: bool = False) -> ChatRequest:
    content: Any = f"question {i}"
    if image:
        content = [{"type": "text", "text": f"question {i}"}, {"type": "image", "image": "big"}]
    return ChatRequest([{"role": "user", "content": content}], params={"max_tokens": 64})


async def prepared(wire: GeminiBatchWire, journal: BatchJournal, n: int) -> tuple[Any, list[bytes]]:
    """Journal a batch's input exactly as a lane would for jobs j0..j{n-1}, round 0."""
    lines, entries = [], []
    for i in range(n):
        body = await wire.body(request(i))
        cid = custom_id("m", f"j{i}", 0, body)
        lines.append(wire.line(cid, body))
        entries.append((cid, f"j{i}", 0))
    return await journal.begin("m", lines, entries), lines


async def rerun(run_dir: Path, server: SimServer, n: int, *, image: bool = False, resolver: Any = None) -> list[str]:
    """A fresh process's lane: reattach, then every job asks its round-0 request again."""
    lane = BatchLane("m", wire_of(server, resolver), BatchJournal(run_dir), SETTINGS)
    await lane.reattach()

    async def job(i: int) -> str:
        with job_context(f"j{i}"):
            resp = await lane.chat(request(i, image))
        return resp.content or ""

    try:
        return await asyncio.wait_for(asyncio.gather(*(job(i) for i in range(n))), 60)
    finally:
        await lane.close()


def uploads(server: SimServer) -> list[Any]:
    return [f for f in server.batch_apis.gemini.files.values() if f.source == "UPLOADED"]


# -- end to end ---------------------------------------------------------------------------------------
async def test_tool_loop_with_images_through_file_batches_matches_an_interactive_run(tmp_path: Path,
                                                                                      file_only: None) -> None:
    inter = await run_sweep(load_config(write_config(tmp_path, sim_model("gemini"), name="i")),
                            RunOptions(run_dir=tmp_path / "inter", progress=False))
    model = sim_model("gemini", batch=FAST, batch_api={"turnaround_s": 0.05, "reverse_responses": True})
    res, s = await sweep(write_config(tmp_path, model, name="b"), tmp_path / "batch")
    assert res.ok == inter.ok == 8 and res.errors == 0
    a, b = records(tmp_path / "inter"), records(tmp_path / "batch")
    assert a.keys() == b.keys() and all(same_results(a[k], b[k]) for k in a)
    assert all(r["rounds"] >= 2 and r["metadata"]["batch_id"] for r in b.values())
    journal = BatchJournal(tmp_path / "batch")
    assert len(journal.batches) >= 2 and all(jb.file_id for jb in journal.batches.values())  # all through files
    assert all(jb.ended == "BATCH_STATE_SUCCEEDED" for jb in journal.batches.values())
    sent = [cid for jb in journal.batches.values() for cid in jb.ids]
    assert len(sent) == len(set(sent))


async def test_a_round_over_20_mb_goes_through_the_file_path_and_small_ones_stay_inline(
        tmp_path: Path, server: SimServer) -> None:
    rng = np.random.default_rng(7)
    side = 2600  # a noise PNG of about 6.8 MB, 9 MB as base64: three of them make a 27 MB round
    pixels = rng.integers(0, 256, size=(side, side), dtype=np.uint8)
    png = pyvips.Image.new_from_memory(pixels.tobytes(), side, side, 1, "uchar").pngsave_buffer(compression=1)
    url = "data:image/png;base64," + base64.b64encode(png).decode()

    async def resolver(ref: str, profile: str) -> str:
        return url

    answers = await rerun(tmp_path / "big", server, 3, image=True, resolver=resolver)
    assert len(answers) == 3 and all(answers)
    journal = BatchJournal(tmp_path / "big")
    (jb,) = journal.batches.values()
    size = (journal.dir / f"{jb.local}.jsonl").stat().st_size
    assert size > INLINE_MAX_BYTES and jb.file_id is not None  # over the inline limit: one uploaded file
    assert server.batch_apis.gemini.uploaded == 1  # in 8 MiB chunks: the sim checks offsets and granularity
    sim_batch = server.batch_apis.batches[str(jb.batch_id)]
    assert sim_batch.input_file_id == jb.file_id and len(sim_batch.requests) == 3
    assert uploads(server) == []  # deleted once its batch ended and the responses were downloaded

    assert await rerun(tmp_path / "small", server, 3)  # a small round: inline, nothing uploaded
    (small,) = BatchJournal(tmp_path / "small").batches.values()
    assert small.file_id is None and server.batch_apis.gemini.uploaded == 1
    assert server.batch_apis.batches[str(small.batch_id)].input_file_id is None


async def test_per_line_errors_are_matched_by_key_and_classified(tmp_path: Path, file_only: None) -> None:
    model = sim_model("gemini", batch={**FAST, "gather_s": 0.3}, policy="direct",
                      faults={"schedule": ["ok", "400", "500"]},
                      batch_api={"turnaround_s": 0.05, "reverse_responses": True})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=3, seeds=1), tmp_path / "run")
    assert (res.ok, res.errors) == (2, 1)
    journal = BatchJournal(tmp_path / "run")
    first = next(iter(journal.batches.values()))
    # the file's lines came back reversed; by key, the second request is the 400 and the third the 500
    kinds = [journal.requests[c] for c in first.ids]
    assert kinds[0].ok and kinds[1].kind == "fatal" and len(kinds[1].batches) == 1
    assert kinds[2].ok and len(kinds[2].batches) == 2  # the 500: resubmitted once, then answered
    bad = [r for r in records(tmp_path / "run").values() if r["status"] == "error"]
    assert bad[0]["error_kind"] == "fatal"


async def test_a_failed_file_batch_fails_its_requests_with_the_reason(tmp_path: Path, file_only: None) -> None:
    model = sim_model("gemini", batch=FAST, policy="direct", batch_api={"turnaround_s": 0.05, "fail": 1})
    res, _ = await sweep(write_config(tmp_path, model, n_tasks=2, seeds=1), tmp_path / "run")
    assert res.errors == 2
    rec = next(iter(records(tmp_path / "run").values()))
    assert "failed validation" in rec["error"]
    assert next(iter(BatchJournal(tmp_path / "run").batches.values())).ended == "BATCH_STATE_FAILED"


async def test_a_cancelled_file_batch_is_collected_and_its_requests_resubmitted(
        tmp_path: Path, server: SimServer, file_only: None) -> None:
    server.models["m"].options["batch_api"] = {"turnaround_s": 0.5}
    answers = asyncio.ensure_future(rerun(tmp_path, server, 2))
    apis = server.batch_apis
    for _ in range(200):
        if apis.batches:
            break
        await asyncio.sleep(0.01)
    (first,) = apis.batches.values()
    wire = wire_of(server)
    info = await wire.cancel(first.id)  # what ``fasteval batches cancel`` does
    await wire.close()
    assert info.state in ("running", "ended")
    assert len(await answers) == 2
    journal = BatchJournal(tmp_path)
    ended = [jb.ended for jb in journal.batches.values()]
    assert ended == ["BATCH_STATE_CANCELLED", "BATCH_STATE_SUCCEEDED"]
    assert all(len(st.batches) == 2 for st in journal.requests.values())  # cancelled, so once more
    assert apis.gemini.uploaded == 2 and uploads(server) == []  # both input files deleted once ended


# -- crash windows ------------------------------------------------------------------------------------
class Crash(Exception):
    """Stands for the process dying right after a provider call, before its journal write."""


async def _crash(fid: str) -> None:
    raise Crash(fid)


async def test_crash_between_upload_and_journal_reuses_the_uploaded_file(tmp_path: Path, server: SimServer,
                                                                         file_only: None) -> None:
    wire = wire_of(server)
    jb, lines = await prepared(wire, BatchJournal(tmp_path), 3)
    with pytest.raises(Crash) as crashed:
        await wire.create(jb.local, lines, file_id=None, on_file=_crash)  # uploaded; its name never journaled
    await wire.close()
    assert len(await rerun(tmp_path, server, 3)) == 3
    assert server.batch_apis.gemini.uploaded == 1 and server.batch_apis.created == 1  # found by display name
    (b,) = server.batch_apis.batches.values()
    assert b.input_file_id == crashed.value.args[0]
    (journaled,) = BatchJournal(tmp_path).batches.values()
    assert journaled.file_id == crashed.value.args[0]  # the found file is journaled too


async def test_crash_between_journaled_upload_and_create_creates_once_from_that_file(
        tmp_path: Path, server: SimServer, file_only: None) -> None:
    wire = wire_of(server)
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 3)
    fid = await wire.upload(jb.local, lines)
    await journal.file(jb.local, fid)  # journaled, and then the process died before create
    await wire.close()
    assert len(await rerun(tmp_path, server, 3)) == 3
    assert server.batch_apis.gemini.uploaded == 1 and server.batch_apis.created == 1
    (b,) = server.batch_apis.batches.values()
    assert b.input_file_id == fid


async def test_a_journaled_file_that_expired_is_uploaded_again(tmp_path: Path, server: SimServer,
                                                               file_only: None) -> None:
    wire = wire_of(server)
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 2)
    await journal.file(jb.local, await wire.upload(jb.local, lines))
    await wire.close()
    for f in uploads(server):
        f.created -= 49 * 3600  # the 48 h went by before the rerun: the Files API has dropped it
    assert len(await rerun(tmp_path, server, 2)) == 2
    assert server.batch_apis.gemini.uploaded == 2 and server.batch_apis.created == 1


async def test_crash_between_create_and_id_recorded_finds_the_file_batch(tmp_path: Path, server: SimServer,
                                                                         file_only: None) -> None:
    wire = wire_of(server)
    journal = BatchJournal(tmp_path)
    jb, lines = await prepared(wire, journal, 4)

    async def on_file(fid: str) -> None:
        await journal.file(jb.local, fid)

    await wire.create(jb.local, lines, file_id=None, on_file=on_file)  # created; the id never journaled
    await wire.close()
    assert len(await rerun(tmp_path, server, 4)) == 4
    apis = server.batch_apis
    assert apis.created == 1 and apis.gemini.uploaded == 1
    assert len(apis.submitted) == len(set(apis.submitted)) == 4
    assert uploads(server) == []  # the ended batch's input file was deleted, giving its storage back


async def test_a_lost_finalize_answer_reuses_the_file_it_made(tmp_path: Path, server: SimServer,
                                                               file_only: None) -> None:
    server.batch_apis.gemini.drop_finalize = 1  # the file is stored, the answer never comes
    assert len(await rerun(tmp_path, server, 2)) == 2
    assert server.batch_apis.gemini.uploaded == 1 and server.batch_apis.created == 1


# -- the wire's own checks ----------------------------------------------------------------------------
def test_an_upload_session_url_is_kept_on_our_origin() -> None:
    wire = GeminiBatchWire(GeminiProvider("m", base_url="http://127.0.0.1:9", api_key="k", api_key_env=None))
    for url in ("http://evil.example/upload/v1beta/files?upload_id=x", "https://127.0.0.1:9/upload/v1beta/files?upload_id=x"):
        # the chunks carry our key: they go to the configured origin, whatever host the answer named
        assert wire._session_url({"X-Goog-Upload-URL": url}) == "http://127.0.0.1:9/upload/v1beta/files?upload_id=x"
    for bad in ("", "ftp://127.0.0.1:9/x", "javascript:alert(1)"):
        with pytest.raises(ProviderError, match="unusable session URL"):
            wire._session_url({"X-Goog-Upload-URL": bad})


def test_a_files_name_that_is_not_one_is_refused() -> None:
    assert file_name("files/batch-abc_1") == "files/batch-abc_1"
    for bad in ("files/../v1beta/batches", "https://elsewhere/x", "files/a?alt=media", "", None):
        with pytest.raises(ProviderError, match="not a Files API name"):
            file_name(bad)


async def test_an_earlier_journals_inline_lines_are_uploaded_as_keyed_file_lines(
        tmp_path: Path, server: SimServer, file_only: None) -> None:
    wire = wire_of(server)
    lines, entries = [], []
    for i in range(2):
        body = await wire.body(request(i))
        cid = custom_id("m", f"j{i}", 0, body)
        lines.append(b'{"request":' + body + b',"metadata":{"key":"' + cid.encode() + b'"}}')
        entries.append((cid, f"j{i}", 0))
    await BatchJournal(tmp_path).begin("m", lines, entries)  # begun by the inline-only wire, never created
    await wire.close()
    assert len(await rerun(tmp_path, server, 2)) == 2
    assert server.batch_apis.submitted == [c for c, _, _ in entries] and server.batch_apis.created == 1


def test_journal_lines_read_back_in_both_formats() -> None:
    wire = GeminiBatchWire(GeminiProvider("m", base_url="http://127.0.0.1:9", api_key="k", api_key_env=None))
    body = b'{"contents":[{"role":"user","parts":[{"text":"a \\"quoted\\" \\",\\"request\\": x"}]}]}'
    assert wire.entry(wire.line("fe_abc", body)) == ("fe_abc", body)
    odd = wire.line('odd "id"', body)
    assert orjson.loads(odd)["key"] == 'odd "id"' and split_line(odd)[0] == 'odd "id"'
    earlier = b'{"request":' + body + b',"metadata":{"key":"fe_abc"}}'  # an inline-only journal's line
    assert split_line(earlier) == ("fe_abc", orjson.dumps(orjson.loads(body)))


# -- kill -9 ------------------------------------------------------------------------------------------
def _config(tmp: Path, port: int, *, batch: bool, name: str) -> Path:
    model: dict[str, Any] = {"name": "bm", "provider": "gemini", "base_url": f"http://127.0.0.1:{port}",
                             "api_key_env": "FASTEVAL_TEST_GEMINI_KEY"}
    if batch:
        model["batch"] = {"gather_s": 0.15, "poll_s": 0.05}
    # images big enough that a whole round (4 requests of about 5.5 MB) is over 20 MB: the file path;
    # the second turn's rounds (one trajectory) go inline
    cfg = {"seeds": 2, "models": [model],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [2300, 1800], "multi_turn_every": 2},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
           "run": {"max_concurrency": 64, "fsync": "always"}}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def _get(port: int, path: str) -> Any:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as resp:
        return orjson.loads(resp.read())


@pytest.mark.slow
def test_kill_9_at_random_points_then_rerun_records_each_job_once_and_pays_once(tmp_path: Path) -> None:
    sim = subprocess.Popen([sys.executable, "-m", "providers.sim", "--model", "bm:tools", "--batch-turnaround-s",
                            "0.1"], stdout=subprocess.PIPE, text=True)
    assert sim.stdout is not None
    port = int(orjson.loads(sim.stdout.readline())["port"])
    env = {**os.environ, "FASTEVAL_TEST_GEMINI_KEY": "sim-key"}
    rng = random.Random(24)
    try:
        run_dir = tmp_path / "run"
        argv = [*FASTEVAL, "run", str(_config(tmp_path, port, batch=True, name="batched")), "--run-dir",
                str(run_dir), "--no-progress"]
        journal = run_dir / "batches" / "journal.jsonl"
        kills = kill_loop(argv, journal, env, rng)
        assert kills >= 3
        done = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        stats = _get(port, "/sim/batches")
        sent, contents = stats["submitted"], stats["gemini"]["contents"]
        assert len(sent) == len(set(sent)), "a request was submitted twice (by key)"
        assert len(contents) == len(set(contents)), "a request was submitted twice (by content)"
        inputs = stats["gemini"]["input_files"]
        assert inputs and stats["gemini"]["uploaded"] == len(inputs), "an uploaded file was not used, or used twice"
        before = Counter(_get(port, "/sim/stats")["by_outcome"])
        plain = subprocess.run([*FASTEVAL, "run", str(_config(tmp_path, port, batch=False, name="inter")),
                                "--run-dir", str(tmp_path / "inter"), "--no-progress"],
                               capture_output=True, text=True, timeout=180, env=env)
        assert plain.returncode == 0, plain.stderr[-2000:]
        interactive = sum((Counter(_get(port, "/sim/stats")["by_outcome"]) - before).values())
        assert len(sent) == interactive  # every request the interactive run made, paid for once
        a, b = records_once(tmp_path / "inter"), records_once(run_dir)
        assert a.keys() == b.keys() and len(b) == 4
        for k in a:
            assert (a[k]["answer"], a[k]["score"], a[k]["rounds"]) == (b[k]["answer"], b[k]["score"], b[k]["rounds"])
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=10)
