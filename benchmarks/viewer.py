"""How fast the viewer answers on a large run: /jobs pages, filters, sort, search, one job, summary.

Builds a run folder of N jobs by copying the records of a small real sweep under new job ids
and task ids (the same bytes a sweep writes, ~2 KB each), indexes it once as the sweep would,
then times each route of a real ``fasteval view`` server over HTTP (median of --repeats).
Baseline in the same run: one full ``iter_records`` pass over records.jsonl, which is what any
page would cost without the index.

    .venv/bin/python benchmarks/viewer.py --jobs 100000 --json
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import yaml

ROOT = Path(__file__).resolve().parent.parent
SMALL = {"name": "viewer-bench", "seeds": 1,
         "models": [{"name": "sim-oracle", "provider": "sim", "policy": "oracle"},
                    {"name": "sim-guess", "provider": "sim", "policy": "guess"}],
         "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1},
                     "settings": [{"name": "tool"}, {"name": "no-tool"}]}],
         "run": {"max_concurrency": 16, "fsync": "never", "sandbox": {"workers": 2}}}


def build_run(work: Path, n: int) -> Path:
    cfg = work / "small.yaml"
    cfg.write_text(yaml.safe_dump(SMALL))
    small = work / "small"
    subprocess.run([sys.executable, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir", str(small),
                    "--no-progress"], check=True, capture_output=True,
                   env={**os.environ, "FASTEVAL_CACHE_DIR": str(work / "cache")})
    templates = [orjson.loads(line) for line in (small / "records.jsonl").read_bytes().splitlines()]
    big = work / "big"
    big.mkdir()
    shutil.copy(small / "manifest.json", big / "manifest.json")
    shutil.copytree(small / "blobs", big / "blobs")
    with (big / "records.jsonl").open("wb") as f:
        for i in range(n):
            rec = dict(templates[i % len(templates)])
            rec["task_id"] = f"{rec['task_id']}-{i // len(templates)}"
            rec["seed"] = i % 5
            rec["job_id"] = hashlib.sha256(f"{i}".encode()).hexdigest()[:20]
            f.write(orjson.dumps(rec) + b"\n")
    return big


async def timed(session: aiohttp.ClientSession, url: str, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        async with session.get(url) as r:
            await r.read()
            assert r.status == 200, (url, r.status)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


async def measure(base: str, job_id: str, repeats: int) -> dict[str, dict[str, float]]:
    """Each route's first answer (cold: nothing cached for it yet) and the median of the next ones."""
    routes = {
        "jobs page 1": "/jobs",
        "jobs page 1000": "/jobs?page=1000",
        "jobs filtered (model, status)": "/jobs?model=sim-oracle&status=ok",
        "jobs sorted by latency": "/jobs?sort=latency_s&desc=1",
        "jobs sorted, page 2": "/jobs?sort=latency_s&desc=1&page=2",
        "jobs score range": "/jobs?score_min=0.5",
        "jobs text search (task id)": "/jobs?q=maze-000-7",
        "jobs text search (question)": "/jobs?q=low%20light",
        "api jobs page": "/api/jobs?per_page=50&page=7",
        "job page": f"/job/{job_id}",
        "summary": "/",
    }
    out: dict[str, dict[str, float]] = {}
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=1200)) as s:
        for name, path in routes.items():
            cold = await timed(s, base + path, 1)
            out[name] = {"cold_s": round(cold, 4), "warm_s": round(await timed(s, base + path, repeats), 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from fasteval.runfolder.index import open_index
    from fasteval.runfolder.records import iter_records

    with tempfile.TemporaryDirectory(prefix="viewer-bench-") as tmp:
        run = build_run(Path(tmp), a.jobs)
        size_mb = (run / "records.jsonl").stat().st_size / 1e6
        t0 = time.perf_counter()
        with open_index(run) as idx:  # the sweep keeps the index current; build it once here
            job_id = next(idx.rows(limit=1, skip=a.jobs // 2)).job_id
        index_build = time.perf_counter() - t0
        t0 = time.perf_counter()
        n = sum(1 for _ in iter_records(run / "records.jsonl"))
        scan = time.perf_counter() - t0
        assert n == a.jobs
        proc = subprocess.Popen([sys.executable, "-m", "fasteval.cli.main", "view", str(run), "--port", "0"],
                                stderr=subprocess.PIPE, text=True)
        try:
            assert proc.stderr is not None
            line = proc.stderr.readline()
            base = line.rsplit(" on ", 1)[1].strip().rstrip("/")
            routes = asyncio.run(measure(base, job_id, a.repeats))
        finally:
            proc.terminate()
            proc.wait()
    result: dict[str, Any] = {"jobs": a.jobs, "records_mb": round(size_mb, 1), "index_build_s": round(index_build, 3),
                              "baseline_full_scan_s": round(scan, 3),
                              "routes": routes,
                              "cold_ratio_to_full_scan": {k: round(v["cold_s"] / scan, 3) for k, v in routes.items()}}
    if a.json:
        print(orjson.dumps(result, option=orjson.OPT_INDENT_2).decode())
    else:
        print(f"{a.jobs} jobs, {result['records_mb']} MB; index build {index_build:.2f} s; "
              f"baseline full scan {scan:.2f} s")
        print(f"  {'route':<32} {'cold ms':>9} {'warm ms':>9} {'cold/scan':>10}")
        for k, v in routes.items():
            print(f"  {k:<32} {v['cold_s'] * 1000:9.1f} {v['warm_s'] * 1000:9.1f} {v['cold_s'] / scan:10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
