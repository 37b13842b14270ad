"""A partial run says it is partial wherever its numbers appear (#39 item 1).

``report`` (table and JSON), the HTML report, the viewer's summary, the leaderboard (table,
Markdown, CSV, JSON) and ``compare`` put done / total, how the last sweep ended and what is left per
model above the numbers of a run whose plan is not all recorded; a complete run shows no such line.
The counts come from the run index and the manifest's plan, never from the records.
"""

from __future__ import annotations

import csv
import io
import signal
import subprocess
import sys
import time
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.runfolder.records import read_manifest, write_manifest
from fasteval.view.completion import run_completion
from fasteval.view.html_report import render_report


def _config(tmp: Path, *, n_tasks: int = 3, latency_ms: float = 0.0) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": 2,
        "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": latency_ms},
                   {"name": "sim-direct", "provider": "sim", "policy": "direct", "latency_ms": latency_ms}],
        "suites": [{"name": "demo", "options": {"n_tasks": n_tasks, "image_size": [64, 48]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": 2, "fsync": "never"}}))
    return path


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    capsys.readouterr()
    code = main(list(args))
    return code, capsys.readouterr().out


@pytest.fixture(scope="module")
def narrowed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A run of 12 planned jobs (2 models × 3 tasks × 2 seeds) of which ``--limit 1`` ran 4."""
    tmp = tmp_path_factory.mktemp("partial")
    cfg = _config(tmp)
    assert main(["run", str(cfg), "--run-dir", str(tmp / "run"), "--no-progress", "--limit", "1"]) == 0
    return cfg, tmp / "run"


def test_a_narrowed_run_says_done_of_total_and_what_is_left_per_model(narrowed: tuple[Path, Path]) -> None:
    _, run = narrowed
    c = run_completion(run)
    assert (c["total"], c["done"], c["remaining"], c["complete"], c["state"]) == (12, 4, 8, False, "narrowed")
    assert c["by_model"] == {"sim-direct": {"total": 6, "done": 2, "remaining": 4},
                             "sim-tools": {"total": 6, "done": 2, "remaining": 4}}
    assert c["line"].startswith("partial run: the last sweep ran a part of the plan"), c["line"]
    assert "4 of 12 jobs have a record (33%), 8 remaining" in c["line"]
    assert "sim-direct 4 of 6, sim-tools 4 of 6" in c["line"]


def test_report_leaderboard_html_and_compare_of_a_partial_run_say_so(
        narrowed: tuple[Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    _, run = narrowed
    code, out = _cli(capsys, "report", str(run))
    assert code == 0 and out.startswith("partial run: the last sweep ran a part of the plan"), out
    code, out = _cli(capsys, "report", str(run), "--format", "json")
    assert orjson.loads(out)["completion"]["remaining"] == 8
    code, out = _cli(capsys, "report", str(run), "--leaderboard")
    assert out.startswith("partial run:") and "sim-tools (2/6 jobs)" in out, out
    code, out = _cli(capsys, "report", str(run), "--leaderboard", "--format", "markdown")
    assert out.startswith("**partial run:") and "| sim-tools (2/6 jobs) |" in out, out
    code, out = _cli(capsys, "report", str(run), "--leaderboard", "--format", "json")
    board = orjson.loads(out)
    assert board["completion"]["state"] == "narrowed"
    assert {r["model"]: r["jobs"]["done"] for r in board["rows"]} == {"sim-tools": 2, "sim-direct": 2}
    code, out = _cli(capsys, "report", str(run), "--leaderboard", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(out)))
    assert {(r["model"], r["jobs done"], r["jobs planned"]) for r in rows} == {("sim-tools", "2", "6"),
                                                                               ("sim-direct", "2", "6")}
    html = render_report(run)
    assert '<p class="partial error-box">partial run: the last sweep ran a part of the plan' in html
    code, out = _cli(capsys, "compare", f"{run}:sim-direct", f"{run}:sim-tools")
    assert code == 0 and out.startswith(f"{run}: partial run:"), out


def test_a_complete_run_shows_no_partial_line(narrowed: tuple[Path, Path], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    cfg, partial = narrowed
    run = tmp_path / "full"
    assert main(["run", str(cfg), "--run-dir", str(run), "--no-progress"]) == 0
    c = run_completion(run)
    assert (c["done"], c["remaining"], c["complete"], c["state"], c["line"]) == (12, 0, True, "complete", "")
    for args in (["report", str(run)], ["report", str(run), "--leaderboard"],
                 ["report", str(run), "--leaderboard", "--format", "markdown"]):
        code, out = _cli(capsys, *args)
        assert code == 0 and "partial" not in out and "jobs)" not in out, out
    assert "partial" not in render_report(run)


def test_a_sweep_that_left_no_word_is_said_to_have_stopped_without_one(narrowed: tuple[Path, Path],
                                                                        tmp_path: Path) -> None:
    import shutil

    _, run = narrowed
    copy = tmp_path / "copy"
    shutil.copytree(run, copy, ignore=shutil.ignore_patterns("run.lock"))
    manifest = read_manifest(copy)
    assert manifest is not None
    manifest["history"][-1].pop("ended")  # what a kill -9 leaves: the start noted, no ending
    write_manifest(copy, manifest)
    c = run_completion(copy)
    assert c["state"] == "killed" and "left no word of how it ended (kill -9" in c["line"], c


def test_report_table_shows_tokens_per_trajectory(narrowed: tuple[Path, Path],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, run = narrowed
    _, out = _cli(capsys, "report", str(run), "--format", "json")
    row = next(r for r in orjson.loads(out)["rows"] if r["model"] == "sim-tools")
    n = row["n_ok"] + row["n_error"]
    per_traj = round(row["tokens"]["prompt_tokens"] / n)
    assert n == 2 and row["tokens"]["prompt_tokens"] > per_traj  # the JSON keeps the group's totals
    _, out = _cli(capsys, "report", str(run))
    table = out.split("cost and behaviour per trajectory")[1]
    line = next(x for x in table.splitlines() if "sim-tools" in x)
    cells = [c.strip() for c in line.split("│") if c.strip()]
    assert cells[3] == str(per_traj) and cells[4] == str(round(row["tokens"]["completion_tokens"] / n)), line


@pytest.mark.slow
def test_an_interrupted_sweep_is_running_then_interrupted(tmp_path: Path) -> None:
    """A real ``fasteval run`` process: while it runs the report says a sweep is running; after
    Ctrl-C, that the last sweep was interrupted."""
    cfg = _config(tmp_path, n_tasks=30, latency_ms=150)
    records = tmp_path / "run" / "records.jsonl"
    proc = subprocess.Popen([sys.executable, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir",
                             str(tmp_path / "run"), "--no-progress"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not records.exists() or len(records.read_bytes().splitlines()) < 3:
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
            time.sleep(0.05)
        running = run_completion(tmp_path / "run")
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == 130, err
    assert running["state"] == "running" and running["line"].startswith("partial run (a sweep is running now)")
    c = run_completion(tmp_path / "run")
    assert c["state"] == "interrupted" and 0 < c["done"] < 120, c
    assert c["line"].startswith("partial run: the last sweep was interrupted (Ctrl-C or SIGTERM)"), c["line"]
    assert c["line"].endswith("rerun the same command to continue")


def test_compare_names_models_only_one_side_has_and_sums_up_several_pairs(
        narrowed: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """#39 item 4: ``compare RUN_A RUN_B`` skipped a model only one side had without a word."""
    cfg, run_a = narrowed
    raw = yaml.safe_load(cfg.read_text())
    raw["models"].append({"name": "sim-extra", "provider": "sim", "policy": "direct"})
    other = tmp_path / "other.yaml"
    other.write_text(yaml.safe_dump(raw))
    run_b = tmp_path / "b"
    assert main(["run", str(other), "--run-dir", str(run_b), "--no-progress", "--limit", "1"]) == 0
    code, out = _cli(capsys, "compare", str(run_a), str(run_b))
    assert code == 0, out
    assert f"note: {run_b} has a model the other side lacks, not compared: sim-extra" in out, out
    summary = out.split("summary: 2 comparisons")[1]
    assert "sim-direct" in summary and "sim-tools" in summary and "no detectable" in summary, out
    code, out = _cli(capsys, "compare", str(run_a), str(run_b), "--format", "json")
    assert len(orjson.loads(out)["notes"]) == 1


async def test_the_viewer_over_http_says_a_run_is_partial(narrowed: tuple[Path, Path]) -> None:
    """The live viewer's summary page and its /api/summary carry the same line as ``report``."""
    import aiohttp
    from aiohttp import web

    from fasteval.view.app import make_app
    from fasteval.view.data import RunSet

    _, run = narrowed
    runner = web.AppRunner(make_app(RunSet([run])))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    base = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession() as s:
            async with s.get(f"{base}/") as r:
                assert r.status == 200
                page = await r.text()
            async with s.get(f"{base}/api/summary") as r:
                summary = await r.json()
    finally:
        await runner.cleanup()
    assert '<p class="partial error-box">partial run: the last sweep ran a part of the plan' in page
    assert "4 of 12 jobs have a record (33%), 8 remaining" in page
    assert summary["runs"][0]["completion"]["remaining"] == 8
