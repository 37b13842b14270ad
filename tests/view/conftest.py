"""One small real sweep shared by the viewer tests: tir-synth on sim models, one of them failing.

Built once per session with the real CLI (sim server, sandbox, blob store), so every test reads
a run folder exactly as a user's sweep writes it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tests.view.sweep_fixture import CONFIG, run_cli


@pytest.fixture(scope="session")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run folder (read-only by convention: tests that write use ``fresh_run``)."""
    base = tmp_path_factory.mktemp("viewer-run")
    cfg = base / "viewer.yaml"
    cfg.write_text(yaml.safe_dump(CONFIG))
    run_dir = base / "demo"
    proc = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress",
                   env={"FASTEVAL_CACHE_DIR": str(base / "cache")})
    assert (run_dir / "records.jsonl").exists(), proc.stderr[-2000:]
    return run_dir


@pytest.fixture
def fresh_run(demo_run: Path, tmp_path: Path) -> Path:
    """A private copy of the demo run that a test may append to."""
    dest = tmp_path / "demo"
    shutil.copytree(demo_run, dest, ignore=shutil.ignore_patterns("index.sqlite*"))
    return dest


SERIES_CONFIG = {
    "name": "series-test",
    "seeds": 1,
    "models": [{"name": "ck@100", "provider": "sim", "policy": "direct"},
               {"name": "ck@200", "provider": "sim", "policy": "tools"},
               {"name": "ck@300", "provider": "sim", "policy": "tools"}],
    "suites": [{"name": "demo", "options": {"n_tasks": 12, "image_size": [64, 48], "multi_turn_every": 0}}],
    "published": [{"suite": "demo", "setting": "tools", "model": "CK-300 [bold]x[/]", "match": ["ck@300"],
                   "value": 87.5, "paper": "Our report: <b>v2</b>", "table": "Table 1", "note": "greedy"}],
    "run": {"max_concurrency": 16, "fsync": "never"},
}


@pytest.fixture(scope="session")
def series_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkpoint series on one seed of the demo suite (0/1 items, about a second): ck@100 answers
    without tools (all wrong), ck@200 and ck@300 alike with them (all right in setting tools); the
    config publishes a number for ck@300 (with markup and HTML in its texts)."""
    base = tmp_path_factory.mktemp("series-run")
    cfg = base / "series.yaml"
    cfg.write_text(yaml.safe_dump(SERIES_CONFIG))
    run_dir = base / "series"
    proc = run_cli("run", str(cfg), "--run-dir", str(run_dir), "--no-progress",
                   env={"FASTEVAL_CACHE_DIR": str(base / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return run_dir
