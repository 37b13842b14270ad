"""A tampered batch journal: ids that would leave the run folder, lines that are not events, and
result offsets past the end of a ``.out`` file are refused, counted, and never paid for again."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.core.redact import add_secrets, clear_secrets
from fasteval.engine.batch.batching import BatchLane
from fasteval.runfolder.batch_journal import BatchJournal, batch_rows
from providers.base import ProviderError
from providers.sim import SimModel, SimServer
from tests.engine.test_batch_restart import SETTINGS, rerun, wire_of


@pytest.fixture
async def server() -> Any:
    s = SimServer([SimModel("m", policy="direct", options={"batch_api": {"turnaround_s": 0.05}})])
    await s.start()
    yield s
    await s.stop()


def _journal(run_dir: Path) -> Path:
    return run_dir / "batches" / "journal.jsonl"


def _append(run_dir: Path, *events: Any) -> None:
    with _journal(run_dir).open("ab") as f:
        for ev in events:
            f.write((ev if isinstance(ev, bytes) else orjson.dumps(ev)) + b"\n")


async def test_a_local_id_that_leaves_the_folder_is_a_bad_line_and_nothing_outside_is_read_or_written(
        tmp_path: Path, server: SimServer) -> None:
    run_dir = tmp_path / "run"
    await rerun(run_dir, server, "openai", 2)
    created = len(server.batch_apis.batches)
    line = {"custom_id": "fe_x", "method": "POST", "url": "/v1/chat/completions",
            "body": {"model": "m", "messages": [{"role": "user", "content": "outside"}]}}
    (tmp_path / "evil.jsonl").write_bytes(orjson.dumps(line) + b"\n")
    _append(run_dir, {"e": "begin", "local": "../../evil", "lane": "m", "at": 1.0, "map": [["fe_x", "jx", 0]]})
    lane = BatchLane("m", wire_of(server, "openai"), BatchJournal(run_dir), SETTINGS)
    try:
        await lane.reattach()  # what a rerun does first: every open batch it knows is driven to its end
        await asyncio.wait_for(lane.drained(), 30)
    finally:
        await lane.close()
    assert len(server.batch_apis.batches) == created  # the outside file was not uploaded
    assert not (tmp_path / "evil.out").exists()
    journal = BatchJournal(run_dir)
    assert journal.bad_lines == 1 and "is not a batch id" in journal.first_bad
    assert all(".." not in local for local in journal.batches)


async def test_bad_lines_are_counted_with_one_message_and_no_traceback(tmp_path: Path, server: SimServer) -> None:
    run_dir = tmp_path / "run"
    await rerun(run_dir, server, "openai", 2)
    good = BatchJournal(run_dir)
    _append(run_dir, {"e": "created", "local": "nope", "id": "x"}, [1, 2], {"e": "begin"}, b"{not json",
            {"e": "results", "local": next(iter(good.batches)), "at": -5, "ok": [["fe_y", 3]]},
            {"e": "ended", "local": next(iter(good.batches)), "status": "\x1b]0;owned\x07"})
    journal = BatchJournal(run_dir, readonly=True)
    assert journal.bad_lines == 5 and journal.batches.keys() == good.batches.keys()
    assert "\x1b" not in journal.first_bad and "no begin event names" in journal.first_bad
    assert len(batch_rows(run_dir)) == len(good.batches)  # what `status` shows
    res = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "fasteval.cli.main", "batches", "list",
                                                   str(run_dir), "--format", "json"],
                                  capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "Traceback" not in res.stderr, res.stderr
    assert len(orjson.loads(res.stdout)) == len(good.batches)
    warning = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(warning) == 1 and "5 bad line(s) skipped" in warning[0], res.stderr


@pytest.mark.parametrize("tamper", ["size", "offset"])
async def test_tampered_result_offsets_are_refused_without_memory_or_a_new_batch(
        tmp_path: Path, server: SimServer, tamper: str) -> None:
    run_dir = tmp_path / "run"
    await rerun(run_dir, server, "openai", 2)
    created = len(server.batch_apis.batches)
    lines = []
    for raw in _journal(run_dir).read_bytes().splitlines():
        ev = orjson.loads(raw)
        if ev["e"] == "results" and tamper == "size":
            ev["ok"] = [[cid, 10 ** 15] for cid, _ in ev["ok"]]
        elif ev["e"] == "results":
            ev["at"] = 10 ** 12
        lines.append(orjson.dumps(ev))
    _journal(run_dir).write_bytes(b"\n".join(lines) + b"\n")
    with pytest.raises(ProviderError, match="journaled but unreadable") as err:
        await rerun(run_dir, server, "openai", 2)
    assert err.value.kind == "fatal"
    assert len(server.batch_apis.batches) == created  # refused, not paid for again


async def test_a_key_echoed_in_a_batch_error_is_masked_in_the_journal(tmp_path: Path) -> None:
    key = "batch-key-5d2e8a9f10c3"
    add_secrets([key])
    try:
        journal = BatchJournal(tmp_path)
        jb = await journal.begin("m", [b'{"custom_id":"fe_a"}'], [("fe_a", "j0", 0)])
        await journal.results(jb.local, [("fe_a", None, "auth", f"HTTP 401: invalid x-api-key {key}")],
                              ended="ended")
    finally:
        clear_secrets()
    text = _journal(tmp_path).read_text()
    assert key not in text and "invalid x-api-key ***" in text
    assert BatchJournal(tmp_path).requests["fe_a"].message == "HTTP 401: invalid x-api-key ***"
