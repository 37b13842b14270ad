"""The README's quick try (``--limit 2``) after ``make demo`` runs jobs (#39 item 15).

It once ran into ``runs/demo``, which ``make demo`` had just finished: every job was already done,
so the step a new user types second did nothing. Read from the README and the Makefile as written.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import orjson
import pytest

from tests.view.sweep_fixture import run_cli

ROOT = Path(__file__).resolve().parents[2]


def _readme_quick_try() -> list[str]:
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("fasteval run ") and "--limit 2" in line:
            return shlex.split(line.split("#", 1)[0])[1:]
    raise AssertionError("the README has no `fasteval run ... --limit 2` line")


@pytest.mark.slow
def test_the_quick_try_after_make_demo_runs_jobs_in_a_folder_of_its_own(tmp_path: Path) -> None:
    demo = re.search(r"fasteval run (\S+) --run-dir (\S+)", (ROOT / "Makefile").read_text())
    assert demo, "the Makefile's demo target runs no config"
    args = _readme_quick_try()
    assert args[1] == demo.group(1), args  # the same config make demo ran
    run_dir = args[args.index("--run-dir") + 1]
    assert Path(run_dir) != Path(demo.group(2)), f"{run_dir} is the folder make demo finished: nothing to run"
    shutil.copytree(ROOT / "configs", tmp_path / "configs")
    proc = run_cli(*args, "--no-progress", cwd=tmp_path, env={"FASTEVAL_CACHE_DIR": str(tmp_path / "cache")})
    assert proc.returncode == 0, proc.stderr[-2000:]
    status = orjson.loads(run_cli("status", str(tmp_path / run_dir), "--format", "json").stdout)
    assert status["done"] > 0 and status["error"] == 0, status
