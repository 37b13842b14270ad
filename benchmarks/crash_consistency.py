"""Crash consistency: ``kill -9`` a sweep at random moments, rerun after each kill, count the damage.

The sweep runs against the sim with injected 429s, 500s and hangs (the client times out and
retries). After every kill the same command is started again; at the end one run finishes the
plan. Three figures, each with a target of 0:

- jobs lost: planned jobs without an ok record at the end;
- jobs duplicated: jobs with more than one ok record (a finished job ran again);
- finished bytes changed: bytes of complete record lines seen after a kill that a later run
  rewrote (the file must only ever grow by appending after its last complete line).

    python benchmarks/crash_consistency.py --kills 20 --jobs 2000 [--json]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]


def write_config(folder: Path, jobs: int, latency_ms: float, concurrency: int) -> Path:
    """Two sim models x one setting x 2 seeds: ``jobs`` jobs over jobs/4 demo tasks."""
    faults = {"p_429": 0.02, "retry_after_s": 0.05, "p_500": 0.02, "p_hang": 0.005, "hang_s": 3600}
    common = {"provider": "sim", "latency_ms": latency_ms, "latency_jitter_ms": latency_ms / 2, "faults": faults,
              "timeouts": {"read_s": 1.0, "attempt_s": 2.0},
              "retry": {"max_attempts": 6, "base_delay_s": 0.05, "max_delay_s": 0.5}}
    cfg = {
        "seeds": 2,
        "models": [{"name": "sim-tools", "policy": "tools", **common},
                   {"name": "sim-direct", "policy": "direct", **common}],
        "suites": [{"name": "demo", "options": {"n_tasks": max(1, jobs // 4), "image_size": [160, 120]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}],
        "run": {"max_concurrency": concurrency, "fsync": "batch"},
    }
    path = folder / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def complete_prefix(path: Path) -> bytes:
    """The file up to its last newline: the records a kill cannot take back."""
    if not path.exists():
        return b""
    data = path.read_bytes()
    return data[: data.rfind(b"\n") + 1]


def changed_bytes(before: bytes, after: bytes) -> int:
    """How many bytes of ``before`` are not the same at the start of ``after``."""
    if after.startswith(before):
        return 0
    n = min(len(before), len(after))
    same = next((i for i in range(n) if before[i] != after[i]), n)
    return len(before) - same


def run_once(cmd: list[str], records: Path, kill: tuple[str, float] | None) -> tuple[bool, int | None]:
    """Start the sweep and SIGKILL it; returns (killed while running, exit code if it ended itself).

    ``kill``: ("start", s) kills s seconds after the start (startup, planning, resume scan);
    ("running", s) kills s seconds after this run's first record reached the file.
    """
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if kill is None:
        return False, proc.wait()
    mode, delay = kill
    if mode == "running":
        size = records.stat().st_size if records.exists() else 0
        while proc.poll() is None and (not records.exists() or records.stat().st_size <= size):
            time.sleep(0.02)
    try:
        return False, proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return True, None


def measure(kills: int, jobs: int, latency_ms: float, concurrency: int, seed: int,
            min_s: float, max_s: float) -> dict[str, Any]:
    rnd = random.Random(seed)
    tmp = Path(tempfile.mkdtemp(prefix="fasteval-crash-"))
    try:
        cfg = write_config(tmp, jobs, latency_ms, concurrency)
        run_dir = tmp / "run"
        records = run_dir / "records.jsonl"
        cmd = [*FASTEVAL, "run", str(cfg), "--run-dir", str(run_dir), "--no-progress"]
        t0 = time.monotonic()
        done_kills, attempts, changed, violations = 0, 0, 0, 0
        seen = b""
        kill_lines: list[int] = []
        torn_after_kill = 0
        while done_kills < kills and attempts < kills * 3:
            attempts += 1
            # One kill in four lands anywhere from the start; the rest while records are being written.
            mode = "start" if rnd.random() < 0.25 else "running"
            killed, code = run_once(cmd, records, (mode, rnd.uniform(min_s, max_s)))
            now = complete_prefix(records)
            lost = changed_bytes(seen, now)
            changed += lost
            violations += lost > 0
            seen = now
            if killed:
                done_kills += 1
                kill_lines.append(now.count(b"\n"))
                torn_after_kill += records.exists() and records.stat().st_size > len(now)
            elif code == 0:
                break  # the sweep finished before this kill: nothing left to interrupt
        finishing_runs = 0
        while finishing_runs < 5:
            finishing_runs += 1
            _, code = run_once(cmd, records, None)
            now = complete_prefix(records)
            lost = changed_bytes(seen, now)
            changed += lost
            violations += lost > 0
            seen = now
            oks = [r for r in _records(records) if r.get("status") == "ok"]
            if code == 0 and len({r["job_id"] for r in oks}) >= _planned(run_dir):
                break
        planned = _planned(run_dir)
        recs = list(_records(records))
        ok_counts = Counter(r["job_id"] for r in recs if r.get("status") == "ok")
        torn = records.read_bytes()[len(complete_prefix(records)):]
        return {
            "kills": done_kills, "jobs_planned": planned, "jobs_lost": planned - len(ok_counts),
            "jobs_duplicated": sum(1 for n in ok_counts.values() if n > 1),
            "finished_bytes_changed": changed, "prefix_violations": violations,
            "torn_tail_bytes_at_end": len(torn), "kills_that_left_a_torn_line": torn_after_kill, "record_lines": len(recs),
            "error_records_superseded": sum(1 for r in recs if r.get("status") != "ok"),
            "records_at_each_kill": kill_lines, "finishing_runs": finishing_runs,
            "wall_s": round(time.monotonic() - t0, 1),
            "params": {"kills": kills, "jobs": jobs, "latency_ms": latency_ms, "concurrency": concurrency,
                       "seed": seed, "kill_window_s": [min_s, max_s],
                       "faults": "p_429=0.02 p_500=0.02 p_hang=0.005 (client timeout 1-2 s, retried)"},
        }
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _records(path: Path) -> Any:
    with path.open("rb") as f:
        for line in f:
            if line.endswith(b"\n"):
                yield json.loads(line)


def _planned(run_dir: Path) -> int:
    manifest = json.loads((run_dir / "manifest.json").read_bytes())
    return int(manifest["plan"]["total"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kills", type=int, default=20, help="SIGKILLs during the sweep (default 20)")
    ap.add_argument("--jobs", type=int, default=2000, help="jobs in the plan (default 2000)")
    ap.add_argument("--latency-ms", type=float, default=40.0, help="sim latency per model call (default 40)")
    ap.add_argument("--concurrency", type=int, default=32, help="jobs in flight (default 32)")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill moments (default 0)")
    ap.add_argument("--min-s", type=float, default=0.05, help="shortest delay before a kill, s (default 0.05)")
    ap.add_argument("--max-s", type=float, default=3.0, help="longest delay before a kill, s (default 3)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    a = ap.parse_args()
    res = measure(a.kills, a.jobs, a.latency_ms, a.concurrency, a.seed, a.min_s, a.max_s)
    if a.json:
        print(json.dumps(res))
        return
    print(f"kill -9 x{res['kills']} during a {res['jobs_planned']}-job sweep (429/500/hang faults), "
          f"rerun after each; {res['finishing_runs']} finishing run(s); {res['wall_s']} s")
    print(f"  jobs lost:              {res['jobs_lost']}")
    print(f"  jobs duplicated:        {res['jobs_duplicated']}")
    print(f"  finished bytes changed: {res['finished_bytes_changed']}")
    print(f"  torn tail at the end:   {res['torn_tail_bytes_at_end']} bytes "
          f"({res['kills_that_left_a_torn_line']} kills left a torn line, repaired by the rerun)")
    print(f"  record lines: {res['record_lines']} ({res['error_records_superseded']} error records, rerun)")
    print(f"  records on disk at each kill: {res['records_at_each_kill']}")


if __name__ == "__main__":
    main()
