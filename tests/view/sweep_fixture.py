"""The small real sweep the viewer tests read, and the CLI runner they use."""

from __future__ import annotations

import os
import subprocess
import sys

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]

CONFIG = {
    "name": "viewer-test",
    "seeds": 2,
    "models": [
        {"name": "sim-oracle", "provider": "sim", "policy": "oracle"},
        {"name": "sim-guess", "provider": "sim", "policy": "guess"},
        # 400s are not retried: its first jobs end as error records (errors by kind, status filter).
        {"name": "sim-flaky", "provider": "sim", "policy": "oracle",
         "faults": {"schedule": ["400", "400", "400"]}},
    ],
    "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1},
                "settings": [{"name": "tool"}, {"name": "no-tool"}]}],
    "run": {"max_concurrency": 16, "fsync": "never", "sandbox": {"workers": 2}},
}


def run_cli(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: str | os.PathLike[str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*FASTEVAL, *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, cwd=cwd)
