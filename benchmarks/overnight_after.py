"""The morning after an overnight sweep: leaderboard and compare on a big run, against status and report.

    .venv/bin/python benchmarks/overnight_after.py [--jobs 40000] [--work DIR] [--json]

Builds one run folder of ``--jobs`` records written through the sweep's own ``RecordWriter`` with
the run index attached: two models (``nightly``, ``tonight``) × 4 suites × 2 settings × 5 seeds,
0/1 scores drawn per task (``tonight`` a few points better on one suite). Then runs, each in a fresh
subprocess: ``status`` (the baseline: counts off the index), ``report``, ``report --leaderboard``
and ``compare RUN:nightly RUN:tonight``, all ``--format json``; wall seconds, the command's own
seconds and the child's peak RSS, with each figure's ratio to ``status``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MODELS = ("nightly", "tonight")
SUITES = ("suite-a", "suite-b", "suite-c", "suite-d")
SETTINGS = ("tool", "no-tool")
SEEDS = 5

_PROBE = r"""
import json, pathlib, sys, time
t0 = time.perf_counter()
from fasteval.cli.main import main
t1 = time.perf_counter()
import contextlib, io
with contextlib.redirect_stdout(io.StringIO()):
    code = main(sys.argv[2:])
t2 = time.perf_counter()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
pathlib.Path(sys.argv[1]).write_text(json.dumps({"code": code, "command_s": t2 - t1, "peak_rss_mb": hwm / 1024}))
"""


def build_run(run_dir: Path, jobs: int) -> int:
    from fasteval.runfolder.records import write_manifest

    run_dir.mkdir(parents=True)
    per_task = len(MODELS) * len(SUITES) * len(SETTINGS) * SEEDS
    tasks = max(1, jobs // per_task)
    write_manifest(run_dir, {"config": {"name": "overnight-after",
                                        "models": [{"name": m, "provider": "sim"} for m in MODELS]},
                             "suite_tables": [], "plan": {"total": tasks * per_task}})
    return asyncio.run(write_records(run_dir, tasks))


async def write_records(run_dir: Path, tasks: int) -> int:
    from fasteval.core.types import Record
    from fasteval.runfolder.index import open_index
    from fasteval.runfolder.records import RECORDS, RecordWriter

    index = open_index(run_dir)
    writer = RecordWriter(run_dir / RECORDS, fsync="never", index=index)
    await writer.start()
    rng = random.Random(0)
    n = 0
    for suite in SUITES:
        for setting in SETTINGS:
            for t in range(tasks):
                p = rng.random()  # the task's difficulty, shared by both models: what pairing cancels
                for model in MODELS:
                    bonus = 0.04 if model == "tonight" and suite == "suite-a" else 0.0
                    for seed in range(SEEDS):
                        score = 1.0 if rng.random() < p + bonus else 0.0
                        writer.write(Record(job_id=f"{model}-{suite}-{setting}-{t}-{seed}", model=model, suite=suite,
                                            setting=setting, task_id=f"{suite}-{t:06d}", seed=seed, status="ok",
                                            score=score, answer="x", termination="answered", rounds=1))
                        n += 1
                        if n % 2000 == 0:
                            await asyncio.sleep(0)  # let the writer drain
    await writer.close()
    index.close()
    return n


def measure(args: list[str]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        t0 = time.perf_counter()
        proc = subprocess.run([PY, "-c", _PROBE, str(stats), *args], cwd=ROOT, capture_output=True, text=True)
        wall = time.perf_counter() - t0
        if not stats.exists():
            raise RuntimeError(f"fasteval {' '.join(args)} failed: {proc.stderr[-2000:]}")
        child = json.loads(stats.read_text())
    return {"exit": child["code"], "wall_s": round(wall, 2), "command_s": round(child["command_s"], 2),
            "peak_rss_mb": round(child["peak_rss_mb"], 1)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=40_000)
    ap.add_argument("--work", type=Path)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(dir=a.work) as tmp:
        run = Path(tmp) / "run"
        t0 = time.perf_counter()
        n = build_run(run, a.jobs)
        built = time.perf_counter() - t0
        cases = {"status": ["status", str(run), "--format", "json"],
                 "report": ["report", str(run), "--format", "json"],
                 "leaderboard": ["report", str(run), "--leaderboard", "--format", "json"],
                 "compare": ["compare", f"{run}:nightly", f"{run}:tonight", "--format", "json"]}
        out = {name: measure(args) for name, args in cases.items()}
    base = out["status"]
    for row in out.values():
        row["command_vs_status"] = round(row["command_s"] / max(base["command_s"], 1e-3), 1)
    result = {"jobs": n, "build_s": round(built, 1), "commands": out}
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        print(f"{n} jobs ({len(MODELS)} models x {len(SUITES)} suites x {len(SETTINGS)} settings x {SEEDS} seeds), "
              f"built in {built:.1f} s")
        print(f"{'command':<12} {'wall s':>8} {'command s':>10} {'peak MB':>8} {'x status':>9}")
        for name, row in out.items():
            print(f"{name:<12} {row['wall_s']:>8} {row['command_s']:>10} {row['peak_rss_mb']:>8} "
                  f"{row['command_vs_status']:>9}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
