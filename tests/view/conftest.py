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
