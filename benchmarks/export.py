"""``fasteval export`` at overnight scale: time and peak RSS of each format on an N-job run folder.

    .venv/bin/python benchmarks/export.py [--jobs 100000] [--kb 2] [--formats parquet,atif,inspect]
                                          [--repeats 1] [--work DIR] [--json]

The run folder is built as ``benchmarks/scale.py`` builds its cases (a real 20-task sweep's records
as templates, one per planned job of a 5-seed jsonl config, written through the sweep's own
``RecordWriter`` with the run index attached). Each command runs in a fresh subprocess (scale.py's
``measure``: wall time with imports, the command alone, CPU, the child's own peak RSS); the
baseline in the same run is ``fasteval report --format json`` on the same folder, the reader every
user already runs, whose cost follows the number of jobs. ``parquet`` includes the rounds table.
Budget (issue 43): a 100,000-job export stays under 300 MB of RSS.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("fasteval_bench_scale", ROOT / "benchmarks" / "scale.py")
assert _spec is not None and _spec.loader is not None
scale = importlib.util.module_from_spec(_spec)
sys.modules["fasteval_bench_scale"] = scale
_spec.loader.exec_module(scale)

BUDGET_MB = 300


def commands(run: Path, out: Path, formats: list[str]) -> dict[str, list[str]]:
    cmds = {"report (baseline)": ["report", str(run), "--format", "json"]}
    for fmt in formats:
        dest = out / (f"{fmt}.parquet" if fmt == "parquet" else fmt)
        cmds[f"export {fmt}"] = ["export", str(run), "--format", fmt, "--out", str(dest), "--force",
                                 *(["--rounds"] if fmt == "parquet" else [])]
    return cmds


def size_mb(path: Path) -> float:
    if path.is_file():
        return path.stat().st_size / 2**20
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 2**20


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=100_000)
    ap.add_argument("--kb", type=float, default=2.0, help="record size in KB (default 2)")
    ap.add_argument("--formats", default="parquet,atif,inspect")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--work", help="scratch folder (default a temp dir)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    work = Path(tempfile.mkdtemp(prefix="fasteval-export-", dir=a.work))
    try:
        templates = scale.template_records(work)
        folder = work / "case"
        folder.mkdir()
        t0 = time.perf_counter()
        built = asyncio.run(scale.build_runs(folder, a.jobs, a.kb, 0, templates))
        built["build_s"] = round(time.perf_counter() - t0, 1)
        print(f"built {built['jobs']} jobs x {built['record_kb']} KB ({built['records_mb']} MB) in "
              f"{built['build_s']} s", file=sys.stderr)
        scale.compile_tree(ROOT)
        out = work / "out"
        out.mkdir()
        figures: dict[str, list[dict[str, Any]]] = {}
        sizes: dict[str, float] = {}
        for _ in range(a.repeats):
            for name, args in commands(folder / "run", out, a.formats.split(",")).items():
                figures.setdefault(name, []).append(scale.measure(ROOT, args))
                if name.startswith("export"):
                    sizes[name] = round(sum(size_mb(p) for p in out.iterdir()), 1)
                    for p in out.iterdir():
                        shutil.rmtree(p) if p.is_dir() else p.unlink()
                print(f"{name}: {figures[name][-1]}", file=sys.stderr)
        medians = {n: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for n, fs in figures.items()}
    finally:
        subprocess.run(["rm", "-rf", str(work)], check=False)
    base = medians["report (baseline)"]
    result = {"jobs": a.jobs, "build": built, "budget_mb": BUDGET_MB, "commands": medians, "output_mb": sizes,
              "vs_report": {n: {"wall": round(m["wall_s"] / base["wall_s"], 2),
                                "rss": round(m["peak_rss_mb"] / base["peak_rss_mb"], 2)}
                            for n, m in medians.items() if n != "report (baseline)"}}
    if a.json:
        print(json.dumps(result, indent=1))
        return 0
    print(f"N={a.jobs} x {built['record_kb']} KB ({built['records_mb']} MB), medians of {a.repeats}:")
    for name, m in medians.items():
        ratio = result["vs_report"].get(name)
        extra = f"  ({ratio['wall']}x report's time, {ratio['rss']}x its RSS; {sizes.get(name)} MB written)" \
            if ratio else ""
        flag = "" if m["peak_rss_mb"] < BUDGET_MB else f"  OVER the {BUDGET_MB} MB budget"
        print(f"  {name:20s} {m['wall_s']:8.2f} s (command {m['command_s']:.2f} s, cpu {m['cpu_s']:.2f} s) "
              f"{m['peak_rss_mb']:7.0f} MB{flag}{extra}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
