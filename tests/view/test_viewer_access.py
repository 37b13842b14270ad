"""Viewer exposure: Host names (DNS rebinding), tokens for a non-loopback bind, security headers,
malformed query values and records with odd field types, over real HTTP."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from aiohttp import web

from fasteval.view.access import Access
from fasteval.view.app import make_app
from fasteval.view.data import RunSet
from tests.view.sweep_fixture import FASTEVAL, run_cli


@asynccontextmanager
async def _viewer(run: Path, access: Access | None = None) -> AsyncIterator[str]:
    runner = web.AppRunner(make_app(RunSet([run]), access))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()


async def _get(url: str, **kw: Any) -> tuple[int, dict[str, str], str]:
    async with aiohttp.ClientSession() as s, s.get(url, allow_redirects=False, **kw) as r:
        return r.status, dict(r.headers), await r.text()


def _sha(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


async def test_every_response_carries_the_security_headers(demo_run: Path) -> None:
    async with _viewer(demo_run) as base:
        for path in ("/", "/jobs", "/api/jobs", "/job/nope", "/static/app.js", "/api/summary"):
            _, headers, _ = await _get(base + path)
            csp = headers.get("Content-Security-Policy", "")
            assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp, path
            assert headers.get("X-Content-Type-Options") == "nosniff", path
            assert headers.get("X-Frame-Options") == "DENY", path


async def test_the_policy_allows_exactly_the_inline_script_and_style(demo_run: Path) -> None:
    """What a browser checks: the hash of each inline <script>/<style> is in the policy."""
    async with _viewer(demo_run) as base:
        status, headers, html = await _get(base + "/")
    assert status == 200
    csp = headers["Content-Security-Policy"]
    scripts = re.findall(r"<script>(.*?)</script>", html, re.S)
    styles = re.findall(r"<style>(.*?)</style>", html, re.S)
    assert scripts and styles
    for body in scripts + styles:
        assert _sha(body) in csp
    assert "unsafe-inline" not in csp and "<script src" not in html


@pytest.mark.parametrize(("host", "status"), [("evil.example", 421), ("evil.example:8765", 421),
                                              ("127.0.0.1.evil.example", 421), ("localhost", 200),
                                              ("127.0.0.1:1234", 200), ("[::1]:80", 200)])
async def test_a_loopback_viewer_answers_only_to_loopback_names(demo_run: Path, host: str, status: int) -> None:
    async with _viewer(demo_run) as base:
        got, _, body = await _get(base + "/api/summary", headers={"Host": host})
    assert got == status, body[:300]
    if status == 421:
        assert "DNS rebinding" in body and "sim-oracle" not in body


async def test_a_token_viewer_needs_the_token_and_keeps_it_out_of_urls(demo_run: Path) -> None:
    async with _viewer(demo_run, Access(hosts=None, token="s3cret-token")) as base:
        assert (await _get(base + "/api/summary"))[0] == 401
        assert (await _get(base + "/api/summary?token=wrong"))[0] == 401
        assert (await _get(base + "/", headers={"Host": "anything.example"}))[0] == 401
        status, headers, _ = await _get(base + "/jobs?token=s3cret-token&model=sim-oracle")
        assert status == 303 and headers["Location"] == "/jobs?model=sim-oracle"
        assert "HttpOnly" in headers["Set-Cookie"] and "SameSite=Strict" in headers["Set-Cookie"]
        assert (await _get(base + "/jobs", cookies={"fasteval_view_token": "s3cret-token"}))[0] == 200
        assert (await _get(base + "/api/summary", headers={"Authorization": "Bearer s3cret-token"}))[0] == 200


@pytest.mark.parametrize("query", ["page=99999999999999999999", "seed=99999999999999999999", "page=0",
                                   "per_page=-1", "per_page=99999999999999999999", "seed=x", "score_min=abc"])
async def test_malformed_query_values_are_400_not_500(demo_run: Path, query: str) -> None:
    async with _viewer(demo_run) as base:
        for path in ("/api/jobs", "/jobs"):
            status, _, body = await _get(f"{base}{path}?{query}")
            assert status == 400, (path, query, body[:300])


ODD = [
    {"score": "high", "latency_s": "slow", "rounds": "3", "tool_calls": [1], "usage": [], "metadata": [],
     "answer": {"a": [1]}},
    {"trajectory": "not an object"},
    {"trajectory": {"messages": "str", "tool_calls": "x", "answers": 5, "usage_by_turn": [1]}},
    {"trajectory": {"messages": [1, None, "x", {"role": 5, "content": 7, "tool_calls": "y"}],
                    "tool_calls": [1, {"id": [], "images": "abc", "latency_s": "z", "args": 5, "extra": 3}]}},
    {"trajectory": {"messages": [{"role": "assistant", "content": [5, {"type": "image", "image": 5}],
                                  "tool_calls": [{"function": "x"}, 5, {"id": 1, "function": {"name": 5}}]},
                                 {"role": "user", "content": [{"type": "text", "text": 3}]}]}},
    {"score_details": "x", "error": {"x": 1}, "error_kind": 5, "termination": []},
]


def _append_odd(run: Path) -> list[str]:
    base = orjson.loads((run / "records.jsonl").read_bytes().splitlines()[0])
    ids = []
    with (run / "records.jsonl").open("ab") as f:
        for i, change in enumerate(ODD):
            rec = {**base, **change, "job_id": f"odd{i:017d}"}
            f.write(orjson.dumps(rec) + b"\n")
            ids.append(rec["job_id"])
    return ids


@pytest.mark.slow
async def test_records_with_odd_field_types_render(fresh_run: Path, tmp_path: Path) -> None:
    ids = _append_odd(fresh_run)
    async with _viewer(fresh_run) as base:
        for job_id in ids:
            for path in (f"/job/{job_id}", f"/api/job/{job_id}"):
                status, _, body = await _get(base + path)
                assert status == 200, (path, body[:500])
        for path in ("/jobs?q=question", "/jobs?q=zebra", "/jobs?q=%C3%A9t%C3%A9", "/jobs?sort=score", "/"):
            status, _, body = await _get(base + path)
            assert status == 200, (path, body[:500])
    for job_id in ids:
        proc = run_cli("show", str(fresh_run), job_id, "--images", str(tmp_path))
        assert proc.returncode == 0, proc.stderr[-2000:]


def _first_line(proc: subprocess.Popen[str], want: Callable[[str], bool]) -> str:
    assert proc.stderr is not None
    for line in proc.stderr:
        if want(line):
            return line
    raise AssertionError("the viewer exited without printing its address")


def test_a_non_loopback_bind_is_refused_without_remote(demo_run: Path) -> None:
    proc = run_cli("view", str(demo_run), "--host", "0.0.0.0", "--port", "0")
    assert proc.returncode == 2
    assert "--remote" in proc.stderr and "SSH" in proc.stderr


def test_remote_prints_a_token_url_and_warns(demo_run: Path) -> None:
    proc = subprocess.Popen([*FASTEVAL, "view", str(demo_run), "--host", "0.0.0.0", "--port", "0", "--remote"],
                            stderr=subprocess.PIPE, text=True)
    try:
        warning = _first_line(proc, lambda s: s.startswith("warning:"))
        serving = _first_line(proc, lambda s: "serving" in s)
    finally:
        proc.terminate()
        proc.wait(10)
    assert "reachable from other machines" in warning
    assert re.search(r"http://0\.0\.0\.0:\d+/\?token=[\w-]{20,}", serving), serving
