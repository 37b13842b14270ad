"""The results store as a user reaches it: ``$FASTEVAL_STORE``, the dry run, ``fasteval store`` and the
leaderboard across runs, each through the real CLI in its own process (docs/run-folder.md).

The library's reading rules, writers and gc are tested in the other files here; these tests prove the
doors: a team-wide ``FASTEVAL_STORE`` with no ``store:`` in the config fills and feeds runs, the dry run
says what the store will supply, ``store ls|import|gc`` print what they did, and the leaderboard across
runs comes out in every text format with each cell's run of origin.
"""

from __future__ import annotations

import csv
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
import yaml

pytestmark = pytest.mark.slow  # four real sweeps and a dozen CLI processes

JOBS = 2 * 3 * 2  # 2 models × 3 tasks × 2 seeds


def _cli(*args: str, store: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "FASTEVAL_STORE"}
    if store is not None:
        env["FASTEVAL_STORE"] = str(store)
    return subprocess.run([sys.executable, "-m", "fasteval.cli.main", *args], capture_output=True, text=True,
                          timeout=300, env=env)


def _config(tmp: Path) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": 2,
        "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools"},
                   {"name": "sim-direct", "provider": "sim", "policy": "direct"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [64, 48]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": 4, "fsync": "never"}}))
    return path


def _records(run: Path) -> list[dict[str, object]]:
    return [orjson.loads(line) for line in (run / "records.jsonl").read_bytes().splitlines()]


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A config with no ``store:``, run once with ``FASTEVAL_STORE`` set: the store is made and filled."""
    tmp = tmp_path_factory.mktemp("store-cli")
    cfg, store = _config(tmp), tmp / "team-store"
    proc = _cli("run", str(cfg), "--run-dir", str(tmp / "r1"), "--no-progress", store=store)
    assert proc.returncode == 0, proc.stderr
    return cfg, store, tmp / "r1"


def test_the_environments_store_is_filled_and_listed_per_job_with_its_run(filled: tuple[Path, Path, Path]) -> None:
    _, store, r1 = filled
    proc = _cli("store", "ls", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    rows = orjson.loads(proc.stdout)
    assert len(rows) == JOBS and len({r["fingerprint"] for r in rows}) == JOBS
    assert {r["run"] for r in rows} == {str(r1.resolve())}
    assert f"{JOBS} job(s)" in proc.stderr
    table = _cli("store", "ls", str(store))
    assert table.returncode == 0 and len(table.stdout.splitlines()) == JOBS + 1, table.stdout  # a header, a row each


def test_a_dry_run_says_what_the_store_supplies_and_the_run_sends_nothing(
        filled: tuple[Path, Path, Path], tmp_path: Path) -> None:
    cfg, store, r1 = filled
    dry = _cli("run", str(cfg), "--run-dir", str(tmp_path / "r2"), "--dry-run", store=store)
    assert dry.returncode == 0, dry.stderr
    title = " ".join(dry.stdout.split())  # Rich wraps the title to the table's width
    assert f"{JOBS} from the results store, 0 to run" in title, dry.stdout
    for name in ("sim-tools", "sim-direct"):  # per model and suite: reused, store, new, changed
        assert re.search(rf"{name}\s*│\s*demo\s*│\s*0\s*│\s*{JOBS // 2}\s*│\s*0\s*│\s*0\s*│", dry.stdout), dry.stdout
    without = _cli("run", str(cfg), "--run-dir", str(tmp_path / "r2"), "--dry-run")
    assert without.returncode == 0 and "results store" not in without.stdout
    assert re.search(rf"sim-tools\s*│\s*demo\s*│\s*0\s*│\s*0\s*│\s*{JOBS // 2}\s*│", without.stdout), without.stdout
    proc = _cli("run", str(cfg), "--run-dir", str(tmp_path / "r2"), "--no-progress", store=store)
    assert proc.returncode == 0, proc.stderr
    recs = _records(tmp_path / "r2")
    assert len(recs) == JOBS and all(isinstance(r["reused"], dict) for r in recs)
    assert {r["reused"]["run"] for r in recs} == {str(r1.resolve())}  # type: ignore[index]
    assert len(orjson.loads(_cli("store", "ls", str(store), "--json").stdout)) == JOBS, "no second copy"


def test_import_adds_a_run_once_and_gc_keeps_every_job(filled: tuple[Path, Path, Path], tmp_path: Path) -> None:
    _, _, r1 = filled
    other = tmp_path / "other-store"
    first = _cli("store", "import", str(other), str(r1))
    assert first.returncode == 0 and f"{JOBS} record(s) of {r1} added, 0 already held" in first.stderr, first.stderr
    again = _cli("store", "import", str(other), str(r1))
    assert again.returncode == 0 and f"0 record(s) of {r1} added, {JOBS} already held" in again.stderr, again.stderr
    gc = _cli("store", "gc", str(other))
    assert gc.returncode == 0 and "segment(s) ->" in gc.stderr, gc.stderr
    assert len(orjson.loads(_cli("store", "ls", str(other), "--json").stdout)) == JOBS
    for bad in (_cli("store", "ls", str(tmp_path / "nothing")), _cli("store", "gc", str(tmp_path))):
        assert bad.returncode == 2 and "is not a results store" in bad.stderr, bad.stderr
    assert _cli("store", "gc", str(other), "--stale-hours", "0").returncode == 2


def test_the_leaderboard_across_runs_in_every_text_format(filled: tuple[Path, Path, Path]) -> None:
    _, store, r1 = filled
    js = _cli("report", "--store", str(store), "--leaderboard", "--format", "json")
    assert js.returncode == 0, js.stderr
    board = orjson.loads(js.stdout)
    means = {r["model"]: r["cells"]["demo/tools"]["mean"] for r in board["rows"]}
    assert set(means) == {"sim-tools", "sim-direct"} and means["sim-tools"] > means["sim-direct"], means
    assert all(r["cells"]["demo/tools"]["origin"]["runs"] == [str(r1.resolve())] for r in board["rows"])
    rows = list(csv.DictReader(io.StringIO(_cli("report", "--store", str(store), "--leaderboard", "--format",
                                                "csv").stdout)))
    assert {r["model"] for r in rows} == {"sim-tools", "sim-direct"}, rows
    md = _cli("report", "--store", str(store), "--leaderboard", "--format", "markdown").stdout
    assert md.count("| sim-") == 2 and str(r1.resolve()).split("/")[-1] in md, md
    table = _cli("report", "--store", str(store), "--leaderboard")
    assert table.returncode == 0 and "sim-tools" in table.stdout and "sim-direct" in table.stdout
