"""A number no index can hold, sent by a server, never loses finished records (issue 21, item 1).

A loopback OpenAI-compatible upstream reports ``usage.prompt_tokens = 2**63`` (past SQLite's
INTEGER) and ``completion_tokens = 1e30`` (read as a float, summed into an int past orjson's 64
bits). The sweep must write every record of both models, exit 0, and every reader of the folder
(status, report, report --html, index rebuild, resume, the viewer's pages) must keep working.
"""

from __future__ import annotations

import asyncio
import json
import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml
from aiohttp import web

from fasteval.runfolder.index import open_index, rebuild_index
from tests.reliability.loopback import LoopbackServer

HUGE = 2**63
INT_MAX = 2**63 - 1  # what an SQLite INTEGER holds


class HugeUsageUpstream(LoopbackServer):
    """Answers every chat completion at once, with token counts no 64-bit column holds."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests += 1
        body = {"id": "c1", "object": "chat.completion", "created": 0, "model": "m",
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": "<answer>42</answer>"}}],
                "usage": {"prompt_tokens": HUGE, "completion_tokens": 1e30, "total_tokens": HUGE}}
        # stdlib json writes the ints as digits, as a misbehaving server would
        return web.Response(text=json.dumps(body), content_type="application/json")


def _config(tmp: Path, url: str) -> Path:
    cfg = {"seeds": 1,
           "models": [{"name": "huge", "provider": "openai", "base_url": f"{url}/v1", "model": "m"},
                      {"name": "sim-direct", "provider": "sim", "policy": "direct"}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                       "settings": [{"name": "direct", "tools": [], "max_rounds": 1}]}],
           "run": {"max_concurrency": 4}}
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "fasteval.cli.main", *args,
                                                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), timeout=120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_a_server_reporting_2_to_the_63_tokens_loses_no_record_and_every_reader_works(tmp_path: Path) -> None:
    upstream = HugeUsageUpstream()
    await upstream.start()
    run_dir = tmp_path / "run"
    cfg = _config(tmp_path, upstream.url)
    try:
        code, out, err = await _cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress", "--no-preflight")
        assert upstream.requests >= 2
        assert code == 0, err[-3000:]
        assert "Traceback" not in err
        lines = (run_dir / "records.jsonl").read_bytes().splitlines()
        records = [orjson.loads(ln) for ln in lines]
        assert sorted(r["model"] for r in records) == ["huge", "huge", "sim-direct", "sim-direct"]
        assert all(r["status"] == "ok" for r in records), [r.get("error") for r in records]
        huge = [r for r in records if r["model"] == "huge"]
        # the record keeps what the server said: 2**63 as a number, 1e30 tokens as exact digits
        assert all(r["usage"]["prompt_tokens"] == HUGE for r in huge)
        assert all(str(r["usage"]["completion_tokens"]).startswith("1000000000000000019884624838656") for r in huge)

        with open_index(run_dir) as idx:  # the index clamps to what it holds, and sums saturate
            assert idx.count() == 4
            assert {r.usage["prompt_tokens"] for r in idx.rows(model="huge")} == {INT_MAX}
            n, prompt, completion = idx.sums(["prompt_tokens", "completion_tokens"], model="huge")
            assert (n, prompt, completion) == (2, INT_MAX, INT_MAX)

        for args in (("status", str(run_dir)), ("status", str(run_dir), "--format", "json"),
                     ("report", str(run_dir)), ("report", str(run_dir), "--format", "json"),
                     ("report", str(run_dir), "--html", str(tmp_path / "r.html")), ("index", "rebuild", str(run_dir))):
            code, out, err = await _cli(*args)
            assert code == 0, (args, err[-2000:])
            assert "Traceback" not in err, args
        assert (tmp_path / "r.html").stat().st_size > 0
        code, out, err = await _cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress", "--no-preflight")
        assert code == 0, err[-2000:]
        assert len((run_dir / "records.jsonl").read_bytes().splitlines()) == 4  # resume: nothing rerun
    finally:
        await upstream.stop()

    await _viewer_pages_work(run_dir, [r["job_id"] for r in records])


async def _viewer_pages_work(run_dir: Path, job_ids: list[str]) -> None:
    from aiohttp.test_utils import TestClient, TestServer

    from fasteval.view.app import make_app
    from fasteval.view.data import RunSet

    runs = RunSet([run_dir])
    client = TestClient(TestServer(make_app(runs), host="127.0.0.1"))
    await client.start_server()
    try:
        for path in ("/", "/jobs", "/api/summary", "/api/jobs", "/api/facets", "/api/runs",
                     *(f"/job/{j}" for j in job_ids)):
            resp = await client.get(path)
            assert resp.status == 200, (path, (await resp.text())[:500])
    finally:
        await client.close()
        runs.close()


def test_the_index_writer_keeps_rows_it_cannot_hold_as_bad_lines_and_never_raises(tmp_path: Path) -> None:
    """Values no coercion makes storable are skipped like a bad line, and counted."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    good: dict[str, Any] = {"job_id": "a", "model": "m", "suite": "s", "setting": "x", "task_id": "t", "seed": 0,
                            "status": "ok", "score": 1.0, "error": None, "error_kind": None, "termination": None,
                            "rounds": 1, "tool_calls": 0, "usage": {"prompt_tokens": 2**64 - 1},
                            "latency_s": 0.1, "retries": 0, "metadata": {"task_type": {"nested": [1, 2]}}}
    odd = {**good, "job_id": "b", "seed": -(2**63) - 5, "score": 2**64 - 1, "rounds": 1e300,
           "usage": {"prompt_tokens": "9" * 30}, "latency_s": -1e308, "task_id": 7, "model": None}
    unreadable = {**good, "job_id": "c", "score": 10**400}  # a number no JSON reader holds: a bad line
    with (run_dir / "records.jsonl").open("w") as f:
        for rec in (good, odd, unreadable):
            f.write(json.dumps(rec) + "\n")  # stdlib json: every int as digits
    stats = rebuild_index(run_dir)
    assert stats["jobs"] == 2 and stats["bad_lines"] == 1
    with open_index(run_dir) as idx:
        rows = {r.job_id: r for r in idx.rows()}
        assert set(rows) == {"a", "b"}
        assert rows["a"].usage["prompt_tokens"] == INT_MAX and rows["b"].usage["prompt_tokens"] == INT_MAX
        assert rows["b"].seed == -(2**63) and rows["b"].rounds == INT_MAX
        assert rows["b"].task_id == "7" and rows["b"].model is None
        assert rows["a"].task_type == "{'nested': [1, 2]}"
        assert idx.sums(["prompt_tokens", "rounds"]) == (2, INT_MAX, INT_MAX)
    (run_dir / "manifest.json").write_bytes(orjson.dumps({"config_hash": "x", "plan": {}}))
    from fasteval.view.report import status

    st = status(run_dir)  # the bad line is reported, the rest counted
    assert st["bad_lines"] == 1 and st["done"] == 2
    db = sqlite3.connect(run_dir / "index.sqlite")
    assert db.execute("SELECT typeof(prompt_tokens) FROM jobs WHERE job_id = 'a'").fetchone() == ("integer",)
    db.close()
    assert os.path.getsize(run_dir / "records.jsonl") > 0
