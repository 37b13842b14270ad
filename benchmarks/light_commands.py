"""How long the light commands take: ``--help``, ``list``, ``status``, ``ctl``, each a fresh process.

    .venv/bin/python benchmarks/light_commands.py [--repeat 15] [--before CHECKOUT] [--json]

A control client (``fasteval ctl``) is run while a sweep works, and the test suite spawns the CLI
hundreds of times, so their start-up is what the user waits for. Each command runs ``--repeat``
times, interleaved (one of each in turn, so a burst of load on a shared machine hits all alike);
the figure is the median wall time. ``python -c pass`` (the interpreter and site, which no change
of ours makes faster) is the floor in the same run. ``--before CHECKOUT`` times the same commands
from another checkout of fasteval (e.g. ``git worktree add /tmp/before main``) through
``PYTHONPATH``, in the same rounds, for a ratio. A small demo run folder is made first (sim, one
task); ``ctl`` finds no sweep there and exits 2 after its one line, as a user's typo would.
``-X importtime`` of one run of each command gives the breakdown (``--importtime``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
NEUTRAL = tempfile.gettempdir()
"""Where the commands run: outside both checkouts, since ``-m`` puts the working folder first on sys.path."""


def _commands(run: Path) -> dict[str, list[str]]:
    return {
        "python -c pass": ["-c", "pass"],
        "--help": ["-m", "fasteval.cli.main", "--help"],
        "list policies": ["-m", "fasteval.cli.main", "list", "policies"],
        "status RUN": ["-m", "fasteval.cli.main", "status", str(run)],
        "status RUN --format json": ["-m", "fasteval.cli.main", "status", str(run), "--format", "json"],
        "ctl RUN status": ["-m", "fasteval.cli.main", "ctl", str(run), "status"],
    }


def _demo_run(work: Path) -> Path:
    cfg = work / "light.yaml"
    cfg.write_text("seeds: 1\nmodels: [{name: sim-direct, provider: sim, policy: direct}]\n"
                   "suites: [{name: demo, options: {n_tasks: 1, image_size: [32, 24]}}]\n")
    subprocess.run([PY, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir", str(work / "run"), "--no-progress"],
                   check=True, capture_output=True, cwd=ROOT)
    return work / "run"


def _time(argv: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run([PY, *argv], capture_output=True, env=env, cwd=NEUTRAL)
    return time.perf_counter() - t0


def _importtime(argv: list[str], env: dict[str, str], top: int = 12) -> list[tuple[str, float]]:
    """The modules imported directly by the command (cumulative ms), largest first."""
    proc = subprocess.run([PY, "-X", "importtime", *argv], capture_output=True, text=True, env=env, cwd=NEUTRAL)
    out = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if name.startswith(" ") and not name.startswith("   ") and cumulative.strip().isdigit():
            out.append((name.strip(), int(cumulative) / 1000))
    return sorted(out, key=lambda x: -x[1])[:top]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=15)
    ap.add_argument("--before", type=Path, help="another fasteval checkout to time in the same rounds")
    ap.add_argument("--importtime", action="store_true", help="print each command's import breakdown")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    sides = {"now": {**os.environ, "PYTHONPATH": str(ROOT)}}
    if a.before is not None:
        sides["before"] = {**os.environ, "PYTHONPATH": str(a.before.resolve())}
    with tempfile.TemporaryDirectory() as tmp:
        cmds = _commands(_demo_run(Path(tmp)))
        times: dict[str, dict[str, list[float]]] = {s: {c: [] for c in cmds} for s in sides}
        for _ in range(a.repeat):
            for side, env in sides.items():
                for name, argv in cmds.items():
                    times[side][name].append(_time(argv, env))
        breakdown = {name: _importtime(argv, sides["now"]) for name, argv in cmds.items()} if a.importtime else {}
    result: dict[str, Any] = {"repeat": a.repeat, "load_avg": os.getloadavg(), "median_s": {
        side: {c: statistics.median(v) for c, v in per.items()} for side, per in times.items()}}
    if a.json:
        print(json.dumps({**result, "importtime_ms": breakdown}, indent=2))
        return
    print(f"median of {a.repeat} runs each, seconds (load average at the end: "
          f"{', '.join(f'{x:.1f}' for x in result['load_avg'])})")
    for name in cmds:
        now = result["median_s"]["now"][name]
        line = f"  {name:<26} {now:6.3f}"
        if "before" in result["median_s"]:
            before = result["median_s"]["before"][name]
            line += f"   before {before:6.3f}   now/before {now / before:4.2f}"
        print(line)
    for name, top in breakdown.items():
        print(f"{name}: " + ", ".join(f"{m} {ms:.0f} ms" for m, ms in top))


if __name__ == "__main__":
    main()
