"""``fasteval view`` over real HTTP: pages, the /api JSON behind them, blobs, errors."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from fasteval.view.app import make_app
from fasteval.view.data import RunSet
from fasteval.view.report import report

pytestmark = pytest.mark.slow


@pytest.fixture
async def base_url(demo_run: Path) -> AsyncIterator[str]:
    runner = web.AppRunner(make_app(RunSet([demo_run])))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


async def _get(url: str) -> tuple[int, str, bytes]:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        return r.status, r.headers.get("Content-Type", ""), await r.read()


async def _json(url: str) -> object:
    async with aiohttp.ClientSession() as s, s.get(url) as r:
        assert r.status == 200, await r.text()
        return await r.json()


async def test_api_summary_equals_report_json(base_url: str, demo_run: Path) -> None:
    summary = await _json(f"{base_url}/api/summary")
    assert isinstance(summary, dict)
    assert summary["runs"][0]["rows"] == report(demo_run)["rows"]


async def test_pages_render_and_load_nothing_from_outside(base_url: str) -> None:
    jobs = await _json(f"{base_url}/api/jobs?model=sim-oracle&setting=tool&q=contrast")
    assert isinstance(jobs, dict) and jobs["total"] == 2
    job_id = jobs["rows"][0]["job_id"]
    for path in ("/", "/jobs", "/jobs?status=error&sort=score&desc=1", f"/job/{job_id}?run=demo",
                 f"/job/{job_id}", "/compare?task=tir-synth-0-contrast-000"):
        status, ctype, body = await _get(base_url + path)
        assert status == 200, (path, body[:300])
        assert ctype.startswith("text/html")
        html = body.decode()
        # Every script and style is inline: no src/href to another host, no <link rel=stylesheet>.
        assert not re.search(r'(src|href)="(https?:)?//', html), path
        assert "<script src" not in html and 'rel="stylesheet"' not in html


async def test_summary_page_shows_the_report_numbers_and_plots(base_url: str, demo_run: Path) -> None:
    _, _, body = await _get(base_url + "/")
    html = body.decode()
    for row in report(demo_run)["rows"]:
        m = re.search(rf'<tr data-model="{row["model"]}" data-suite="tir-synth" data-setting="{row["setting"]}">'
                      r'.*?<span class="mean">([^<]*)</span>', html)
        assert m is not None and m.group(1) == f"{100 * row['mean']:.1f}"
    assert html.count('<svg class="plot"') >= 6
    assert html.count('class="bar"') > 10 and 'class="dot"' in html


async def test_job_page_shows_the_code_and_serves_its_images(base_url: str) -> None:
    jobs = await _json(f"{base_url}/api/jobs?model=sim-oracle&setting=tool&q=contrast")
    assert isinstance(jobs, dict)
    job_id = jobs["rows"][0]["job_id"]
    api = await _json(f"{base_url}/api/job/{job_id}?run=demo")
    assert isinstance(api, dict)
    call = api["record"]["trajectory"]["tool_calls"][0]
    _, _, body = await _get(f"{base_url}/job/{job_id}?run=demo")
    html = body.decode()
    assert 'class="code"' in html and "PROCESSED_IMAGE_SAVE_PATH" in html
    srcs = re.findall(r'<img class="thumb"[^>]* src="([^"]+)"', html)
    assert f"/blob/demo/{call['images'][0]}" in srcs
    for src in set(srcs):
        status, ctype, data = await _get(base_url + src)
        assert status == 200 and ctype == "image/png" and data.startswith(b"\x89PNG")


async def test_missing_things_are_404_and_bad_queries_400(base_url: str) -> None:
    assert (await _get(f"{base_url}/api/job/{'0' * 20}"))[0] == 404
    status, ctype, body = await _get(f"{base_url}/job/{'0' * 20}")
    assert status == 404 and ctype.startswith("text/html") and b"no job" in body
    assert (await _get(f"{base_url}/blob/demo/{'0' * 64}"))[0] == 404
    assert (await _get(f"{base_url}/blob/demo/..%2Fmanifest.json"))[0] == 404
    assert (await _get(f"{base_url}/blob/other/{'0' * 64}"))[0] == 404
    status, _, body = await _get(f"{base_url}/api/jobs?seed=x")
    assert status == 400 and b"seed" in body
    assert (await _get(f"{base_url}/api/compare"))[0] == 400
    assert (await _get(f"{base_url}/api/jobs?run=nope"))[0] == 404


async def test_api_facets_list_filter_values(base_url: str) -> None:
    facets = await _json(f"{base_url}/api/facets")
    assert isinstance(facets, dict)
    assert facets["model"] == ["sim-flaky", "sim-guess", "sim-oracle"]
    assert facets["status"] == ["error", "ok"] and facets["error_kind"] == ["fatal"]
    runs = await _json(f"{base_url}/api/runs")
    assert isinstance(runs, dict) and runs["runs"][0]["name"] == "demo"


def test_view_of_a_non_run_folder_is_a_usage_error(tmp_path: Path) -> None:
    from tests.view.sweep_fixture import run_cli

    proc = run_cli("view", str(tmp_path), "--port", "0", timeout=60)
    assert proc.returncode == 2 and "not a run folder" in proc.stderr


async def test_a_run_being_written_shows_new_records_on_reload(tmp_path: Path) -> None:
    """A real sweep appends while the app serves it: totals only grow and end at the full plan."""
    import asyncio
    import os
    import sys

    import yaml

    cfg = {"name": "live", "seeds": 3,
           "models": [{"name": "sim-guess", "provider": "sim", "policy": "guess", "latency_ms": 150}],
           "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1}, "settings": [{"name": "no-tool"}]}],
           "run": {"max_concurrency": 2, "fsync": "never"}}
    (tmp_path / "live.yaml").write_text(yaml.safe_dump(cfg))
    run_dir = tmp_path / "live"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "fasteval.cli.main", "run", str(tmp_path / "live.yaml"), "--run-dir", str(run_dir),
        "--no-progress", stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "FASTEVAL_CACHE_DIR": str(tmp_path / "cache")})
    try:
        while not (run_dir / "manifest.json").exists():
            assert proc.returncode is None, "the sweep ended before writing its manifest"
            await asyncio.sleep(0.05)
        runner = web.AppRunner(make_app(RunSet([run_dir])))
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        base = f"http://127.0.0.1:{runner.addresses[0][1]}"
        seen: list[int] = []
        try:
            while proc.returncode is None:
                jobs = await _json(f"{base}/api/jobs")
                assert isinstance(jobs, dict)
                seen.append(jobs["total"])
                assert (await _get(f"{base}/"))[0] == 200
                await asyncio.sleep(0.1)
            final = await _json(f"{base}/api/jobs")
            assert isinstance(final, dict)
        finally:
            await runner.cleanup()
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert proc.returncode == 0
    assert final["total"] == 24 and seen == sorted(seen)
    assert any(0 < n < 24 for n in seen), seen
