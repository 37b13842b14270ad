"""The results store at overnight scale: a store of N records opened and matched against a plan.

    .venv/bin/python benchmarks/scale_store.py [--jobs 1000000] [--writers 8] [--repeats 3] [--json]
    .venv/bin/python benchmarks/scale.py --store 1000000      # the same, from the scale benchmark

The store is built the way sweeps fill it: ``--writers`` segments (one per writer, as Slurm
shards write them) of the real envelope lines and 56-byte entries (``fasteval.store.segments``),
for every job of a real N-job config's plan (one sim model, 5 seeds, N/5 ``jsonl`` tasks), so
its fingerprints are the ones a run of that config asks for; 1% of them are written twice (two
writers that raced) and 1% are errors only. Records are ~0.5 KB (a short trajectory): matching
reads entries, never records, so their size only matters to ``report --store``.

Measured, each in a fresh subprocess (peak RSS its own VmHWM), medians of ``--repeats``:

- ``open``: every segment's entries loaded and merged into one winner per fingerprint;
- ``match``: ``open`` plus the plan's N fingerprints computed (the plan walked as a sweep walks it)
  and matched: the store's side of a sweep's start;
- ``plan``: the plan's N fingerprints computed alone (what ``match`` adds to a start without a store);
- ``dry-run``: ``fasteval run CONFIG --dry-run`` against the store, end to end (the suite loaded,
  the plan walked and sorted into reused / store / new), beside the same command without a store.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
SEEDS = 5

_PROBE = r"""
import json, os, pathlib, sys, time
t0 = time.perf_counter()
sys.path.insert(0, sys.argv[2])
what, store, config = sys.argv[3], pathlib.Path(sys.argv[4]), sys.argv[5]
from fasteval.store.reader import open_view
out = {}
if what in ("plan", "match"):
    from fasteval.config.load import load_config
    from fasteval.engine.identity import fingerprints
    from fasteval.engine.plan import load_suite, plan
    from fasteval.runfolder.blobs import BlobStore
    import tempfile
    cfg = load_config(config)
    runs = [load_suite(e, BlobStore(tempfile.mkdtemp())) for e in cfg.suites]
    t1 = time.perf_counter()
    fps = [job.fingerprint for job, _, _, _ in plan(cfg, runs, None, ids=fingerprints(cfg, runs))]
    out["plan_s"] = time.perf_counter() - t1
if what in ("open", "match"):
    t1 = time.perf_counter()
    view = open_view(store)
    out["open_s"] = time.perf_counter() - t1
    out["fingerprints"], out["lines"] = len(view), view.lines
if what == "match":
    t1 = time.perf_counter()
    found = view.match(fps)
    out["match_s"] = time.perf_counter() - t1
    out["matched"] = int((found >= 0).sum())
out["command_s"] = time.perf_counter() - t0
out["peak_rss_mb"] = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) / 1024
pathlib.Path(sys.argv[1]).write_text(json.dumps(out))
"""


def write_config(folder: Path, n_tasks: int) -> Path:
    with (folder / "tasks.jsonl").open("w") as f:
        for i in range(n_tasks):
            f.write(json.dumps({"id": f"t{i:07d}", "prompt": f"Task {i}: what is 1 + 1?", "answer": "2"}) + "\n")
    cfg = folder / "big.yaml"
    cfg.write_text(json.dumps({"seeds": SEEDS,
                               "models": [{"name": "sim-direct", "provider": "sim", "policy": "direct"}],
                               "suites": [{"name": "jsonl", "options": {"path": str(folder / "tasks.jsonl")}}],
                               "run": {"fsync": "never"}}))
    return cfg


def build_store(folder: Path, n: int, writers: int) -> dict[str, Any]:
    """A store holding every job of an N-job config's plan, written by ``writers`` segments."""
    import orjson

    from fasteval.config.load import load_config
    from fasteval.engine.identity import fingerprints
    from fasteval.engine.plan import load_suite, plan
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.store.segments import SegmentWriter, ensure_store, entry_of, envelope

    cfg = load_config(write_config(folder, max(1, n // SEEDS)))
    runs = [load_suite(e, BlobStore(folder / "blobs")) for e in cfg.suites]
    store = folder / "store"
    ensure_store(store)
    segs = [SegmentWriter(store) for _ in range(writers)]
    batches: list[list[tuple[bytes, Any]]] = [[] for _ in range(writers)]
    stored = {"run": str(folder / "run"), "run_id": "bench", "host": "bench", "at": "2026-01-01T00:00:00+00:00"}
    count = 0
    for i, (job, _, _, _) in enumerate(plan(cfg, runs, None, ids=fingerprints(cfg, runs))):
        h = int(hashlib.sha256(str(i).encode()).hexdigest()[:8], 16)
        ok = h % 100 != 0  # 1% errors only
        rec = {"job_id": job.job_id, "model": job.model, "suite": job.suite, "setting": job.setting,
               "task_id": job.task_id, "seed": job.seed, "status": "ok" if ok else "error",
               "score": 1.0 if ok else None, "answer": "2" if ok else None, "fingerprint": job.fingerprint,
               "components": job.identity.components(), "reused": None, "error": None if ok else "boom",
               "error_kind": None if ok else "transient", "termination": "answered", "rounds": 1, "tool_calls": 0,
               "usage": {"prompt_tokens": 120, "completion_tokens": 8}, "latency_s": 0.01, "retries": 0,
               "score_details": {}, "metadata": {"max_rounds": 10, "fidelity": "fixed"},
               "trajectory": {"messages": [{"role": "user", "content": "What is 1 + 1?"},
                                           {"role": "assistant", "content": "2"}], "tool_calls": [], "rounds": 1}}
        line = orjson.dumps(rec) + b"\n"
        item = (envelope(job.fingerprint, ok, stored, line), entry_of(job.fingerprint, rec["components"], ok, 0, 0))
        w = h % writers
        batches[w].append(item)
        if h % 100 == 1:  # 1% written twice, by another writer (two shards that raced)
            batches[(w + 1) % writers].append(item)
        for k in (w, (w + 1) % writers):
            if len(batches[k]) >= 4096:
                segs[k].write(batches[k])
                batches[k] = []
        count += 1
    for k, seg in enumerate(segs):
        seg.write(batches[k])
        seg.close()
    size = sum(p.stat().st_size for p in (store / "segments").iterdir())
    return {"config": str(cfg.path), "store": str(store), "jobs": count, "store_mb": round(size / 2**20, 1)}


def probe(what: str, store: str, config: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        stats = Path(tmp) / "stats.json"
        t0 = time.perf_counter()
        subprocess.run([PY, "-c", _PROBE, str(stats), str(ROOT), what, store, config], check=True, cwd=ROOT)
        out: dict[str, Any] = json.loads(stats.read_text())
        out["wall_s"] = time.perf_counter() - t0
        return out


def dry_run(config: str, store: str | None) -> dict[str, Any]:
    env = {**os.environ, "FASTEVAL_STORE": store or "", "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.run([PY, "-c", "import resource, sys\nfrom fasteval.cli.main import main\ncode = main(sys.argv[1:])\n"
                               "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\nsys.exit(code)",
                               "run", config, "--run-dir", str(Path(tmp) / "run"), "--dry-run"],
                              capture_output=True, text=True, env=env, cwd=ROOT)
        wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return {"wall_s": wall, "peak_rss_mb": int(proc.stderr.strip().splitlines()[-1]) / 1024}


def measure(n: int, writers: int, repeats: int, work: Path) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="store-", dir=work))
    try:
        t0 = time.perf_counter()
        built = build_store(folder, n, writers)
        built["build_s"] = round(time.perf_counter() - t0, 1)
        print(f"built a store of {built['jobs']} jobs ({built['store_mb']} MB, {writers} segments) in "
              f"{built['build_s']} s", file=sys.stderr)
        figures: dict[str, list[dict[str, Any]]] = {}
        for _ in range(repeats):
            for what in ("open", "plan", "match"):
                figures.setdefault(what, []).append(probe(what, built["store"], built["config"]))
            figures.setdefault("dry_run_store", []).append(dry_run(built["config"], built["store"]))
            figures.setdefault("dry_run_no_store", []).append(dry_run(built["config"], None))
        out = {k: {f: round(statistics.median(x[f] for x in v), 3) for f in v[0]} for k, v in figures.items()}
        return {"n": n, "writers": writers, "build": built, "figures": out}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def report(r: dict[str, Any]) -> str:
    f = r["figures"]
    lines = [f"store of {r['n']} jobs ({r['build']['store_mb']} MB in {r['writers']} segments, "
             f"{f['open']['lines']:.0f} lines, {f['open']['fingerprints']:.0f} fingerprints):",
             f"  open (entries loaded, merged)   {f['open']['open_s']:7.2f} s   peak {f['open']['peak_rss_mb']:6.0f} MB",
             f"  plan fingerprints alone         {f['plan']['plan_s']:7.2f} s",
             f"  open + match the whole plan     {f['match']['open_s'] + f['match']['match_s']:7.2f} s   peak "
             f"{f['match']['peak_rss_mb']:6.0f} MB   ({f['match']['matched']:.0f} ok matches; the match itself "
             f"{f['match']['match_s']:.2f} s)",
             f"  run --dry-run with the store    {f['dry_run_store']['wall_s']:7.2f} s   peak "
             f"{f['dry_run_store']['peak_rss_mb']:6.0f} MB",
             f"  run --dry-run without a store   {f['dry_run_no_store']['wall_s']:7.2f} s   peak "
             f"{f['dry_run_no_store']['peak_rss_mb']:6.0f} MB   (ratio "
             f"{f['dry_run_store']['wall_s'] / f['dry_run_no_store']['wall_s']:.2f}x)"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--writers", type=int, default=8)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--work", help="scratch folder (default a temp dir; ~0.7 KB per job)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    work = Path(a.work) if a.work else Path(tempfile.gettempdir())
    r = measure(a.jobs, a.writers, a.repeats, work)
    print(json.dumps(r, indent=1) if a.json else report(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())
