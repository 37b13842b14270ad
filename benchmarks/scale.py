"""Run folders at overnight scale: resume, status, report and merge on N-job runs, before vs after.

    .venv/bin/python benchmarks/scale.py [--cases 100000x2,20000x50] [--shards 4] [--baseline-ref main]
                                         [--no-baseline] [--repeats 1] [--work DIR] [--json]
    .venv/bin/python benchmarks/scale.py --store 1000000     # a results store of N records matched

Each case ``NxKB`` is a run of N jobs (one sim model, 5 seeds, N/5 jsonl tasks) whose records
are about KB kilobytes each, plus the same jobs split into ``--shards`` shard run folders.

How the runs are built (the documented fast path): a real ``fasteval run`` of 20 tasks against
the in-process sim (policy ``tools``, one calculator round, zero latency) gives template records.
Then every job of the big config's real plan (``fasteval.engine.plan.plan``, so job ids are the ones a
sweep would resume) gets a template record with its own identity (job_id, model, suite,
setting, task_id, seed), its tool output padded to reach the size, written through the sweep's
own ``RecordWriter`` with the run index attached, exactly as a sweep writes them; the manifest
(config hash and plan counts) is written by the sweep's own ``prepare_run_dir`` and plan count.

Measured, each in a fresh subprocess, for the code
of this tree ("after") and of ``--baseline-ref`` exported with ``git archive`` ("before"):
``fasteval run`` again (resume, nothing left to do), ``status --format json``,
``report --format json``, ``merge`` of the shards into a new folder; and, after only,
``index rebuild``. Wall time includes interpreter start and imports (what a user waits for),
with each tree's bytecode compiled first, as an installed package has it (otherwise every child
would compile every module again: ~0.4 s on this machine, more than some commands take);
``command_s`` is the command alone and ``cpu_s`` the child's user+sys CPU (the figure least
disturbed by a busy machine). Peak RSS is the child's own VmHWM. Medians over ``--repeats``. Each case's per-job cost is
reported against the smallest-record case with the same N when the cases include one (e.g.
``100000x2,20000x2,20000x50``: the fixed costs cancel, so the ratio is what bytes cost), else
against the first case (command time per job; target: within 1.5x).
"""

from __future__ import annotations

import argparse
import asyncio
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
MODEL = "sim-tools"


def write_config(folder: Path, n_tasks: int, name: str) -> Path:
    with (folder / f"{name}.jsonl").open("w") as f:
        for i in range(n_tasks):
            f.write(json.dumps({"id": f"t{i:07d}", "prompt": f"Task {i}: what is 1 + 1? Use the calculator.",
                                "answer": "2", "tools": ["calculator"]}) + "\n")
    cfg = folder / f"{name}.yaml"
    cfg.write_text(json.dumps({  # JSON is YAML
        "name": name, "seeds": SEEDS,
        "models": [{"name": MODEL, "provider": "sim", "policy": "tools", "tool_uses": 1, "latency_ms": 0}],
        "suites": [{"name": "jsonl", "options": {"path": str(folder / f"{name}.jsonl"), "max_rounds": 10}}],
        "run": {"max_concurrency": 64, "fsync": "never"},
    }, indent=1))
    return cfg


def _env(code: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code) + os.pathsep + env.get("PYTHONPATH", "")
    return env


# The measured child: peak RSS from its own VmHWM (a forked child's ru_maxrss would include the
# parent's memory at fork time), and the time spent in the command itself, imports excluded.
_PROBE = r"""
import json, os, pathlib, sys, time
t0 = time.perf_counter()
import fasteval
from fasteval.cli.main import main
assert pathlib.Path(fasteval.__file__).resolve().is_relative_to(sys.argv[2]), fasteval.__file__
t1 = time.perf_counter()
code = main(sys.argv[3:])
t2 = time.perf_counter()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
cpu = sum(os.times()[:2])
pathlib.Path(sys.argv[1]).write_text(json.dumps({"code": code, "import_s": t1 - t0, "command_s": t2 - t1,
                                                 "cpu_s": cpu, "peak_rss_mb": hwm / 1024}))
sys.exit(code)
"""


def measure(code: Path, args: list[str]) -> dict[str, Any]:
    """Run ``fasteval ARGS`` with the package from ``code``: wall seconds, command seconds, peak RSS (MB)."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as log:
        stats = Path(tmp) / "stats.json"
        t0 = time.perf_counter()
        proc = subprocess.run([PY, "-c", _PROBE, str(stats), str(code.resolve()), *args], cwd=code, env=_env(code),
                              stdout=log, stderr=subprocess.STDOUT)
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not stats.exists():
            log.seek(0)
            raise RuntimeError(f"fasteval {' '.join(args)} failed (exit {proc.returncode}) with {code}:\n"
                               f"{log.read()[-3000:]}")
        child = json.loads(stats.read_text())
    return {"wall_s": round(wall, 3), "command_s": round(child["command_s"], 3), "cpu_s": round(child["cpu_s"], 3),
            "peak_rss_mb": round(child["peak_rss_mb"], 1)}


def template_records(folder: Path) -> list[dict[str, Any]]:
    cfg = write_config(folder, 20, "template")
    run = folder / "template-run"
    subprocess.run([PY, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir", str(run), "--no-progress"], cwd=ROOT,
                   env=_env(ROOT), check=True, capture_output=True)
    recs = [json.loads(line) for line in (run / "records.jsonl").read_text().splitlines()]
    ok = [r for r in recs if r["status"] == "ok" and r["tool_calls"] == 1]
    if not ok:
        raise RuntimeError(f"the template sweep produced no ok one-round records: {recs[:1]}")
    return ok


def _padded(template: dict[str, Any], kb: float) -> dict[str, Any]:
    """The template with its tool output grown so the line is about ``kb`` KB."""
    rec = json.loads(json.dumps(template))
    size = len(json.dumps(rec))
    target = int(kb * 1024)
    if target > size:
        filler = ("result row: " + "0123456789 " * 7 + "\n") * (1 + (target - size) // 90)
        filler = filler[: target - size]
        traj = rec["trajectory"]
        traj["tool_calls"][0]["output"] += filler[: len(filler) // 2]
        tool_msgs = [m for m in traj["messages"] if m.get("role") == "tool"]
        if tool_msgs and isinstance(tool_msgs[0].get("content"), str):
            tool_msgs[0]["content"] += filler[len(filler) // 2:]
        else:
            traj["tool_calls"][0]["output"] += filler[len(filler) // 2:]
    return rec


async def build_runs(folder: Path, n: int, kb: float, shards: int, templates: list[dict[str, Any]]) -> dict[str, Any]:
    from fasteval.config.load import load_config
    from fasteval.core.types import Record
    from fasteval.engine.plan import RunOptions, in_shard, load_suite, plan
    from fasteval.engine.run.sweep import prepare_run_dir
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.runfolder.index import open_index
    from fasteval.runfolder.records import RECORDS, RecordWriter, read_manifest, write_manifest

    cfg = load_config(write_config(folder, max(1, n // SEEDS), "big"))
    padded = [_padded(t, kb) for t in templates]
    targets: list[tuple[Path, tuple[int, int] | None]] = [(folder / "run", None)]
    targets += [(folder / f"shard{i}", (i, shards)) for i in range(shards)] if shards else []
    writers, indexes = [], []
    for run_dir, shard in targets:
        opts = RunOptions(run_dir=run_dir, shard=shard)
        prepare_run_dir(cfg, opts)
        runs = [load_suite(e, BlobStore(run_dir / "blobs")) for e in cfg.suites]
        total, by = 0, {"model": {}, "suite": {}, "setting": {}, "seed": {}}  # as Sweep.run counts its plan
        for job, _, _, _ in plan(cfg, runs, shard):
            total += 1
            for dim, val in (("model", job.model), ("suite", job.suite), ("setting", job.setting),
                             ("seed", str(job.seed))):
                by[dim][val] = by[dim].get(val, 0) + 1
        manifest = read_manifest(run_dir) or {}
        manifest["plan"] = {"total": total, **{f"by_{k}": v for k, v in by.items()}}
        write_manifest(run_dir, manifest)
        index = open_index(run_dir)
        writer = RecordWriter(run_dir / RECORDS, fsync="never", index=index)
        await writer.start()
        writers.append((writer, shard))
        indexes.append(index)
    runs = [load_suite(e, BlobStore(folder / "run" / "blobs")) for e in cfg.suites]
    fields = set(Record.__dataclass_fields__)
    count = 0
    for i, (job, _, _, _) in enumerate(plan(cfg, runs, None)):
        rec = dict(padded[i % len(padded)])
        rec.update(job_id=job.job_id, model=job.model, suite=job.suite, setting=job.setting, task_id=job.task_id,
                   seed=job.seed, fingerprint=job.fingerprint, components=job.identity.components())
        record = Record(**{k: v for k, v in rec.items() if k in fields})
        for writer, shard in writers:
            if shard is None or in_shard(job.job_id, shard):
                writer.write(record)
        count += 1
        if count % 2000 == 0:
            await asyncio.sleep(0)  # let the writer tasks drain
    for writer, _ in writers:
        await writer.close()
    for index in indexes:
        index.close()
    size = (folder / "run" / RECORDS).stat().st_size
    return {"config": str(cfg.path), "jobs": count, "records_mb": round(size / 2**20, 1),
            "record_kb": round(size / max(1, count) / 1024, 2)}


def compile_tree(code: Path) -> None:
    """Write the tree's bytecode (compileall writes it even under PYTHONDONTWRITEBYTECODE)."""
    packages = [str(code / p) for p in ("fasteval", "providers", "sandbox", "cache") if (code / p).is_dir()]
    subprocess.run([PY, "-m", "compileall", "-q", *packages], check=True, capture_output=True)


def baseline_tree(ref: str, work: Path) -> Path:
    dest = work / f"baseline-{ref.replace('/', '_')}"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


def run_case(work: Path, n: int, kb: float, shards: int, trees: dict[str, Path], repeats: int,
             templates: list[dict[str, Any]], commands: set[str]) -> dict[str, Any]:
    folder = work / f"case-{n}x{kb:g}"
    folder.mkdir()
    t0 = time.perf_counter()
    built = asyncio.run(build_runs(folder, n, kb, shards, templates))
    built["build_s"] = round(time.perf_counter() - t0, 1)
    print(f"built {n} jobs x {built['record_kb']} KB ({built['records_mb']} MB) in {built['build_s']} s",
          file=sys.stderr)
    run, cfg = folder / "run", built["config"]
    sources = [str(folder / f"shard{i}") for i in range(shards)]
    out: dict[str, Any] = {"n": n, "kb": kb, "build": built}
    for side, code in trees.items():
        compile_tree(code)
        figures: dict[str, list[dict[str, Any]]] = {}
        for _ in range(repeats):
            for name, args in (("resume", ["run", cfg, "--run-dir", str(run), "--no-progress"]),
                               ("status", ["status", str(run), "--format", "json"]),
                               ("report", ["report", str(run), "--format", "json"]),
                               ("merge", ["merge", str(folder / "merged"), *sources])):
                if name not in commands:
                    continue
                figures.setdefault(name, []).append(measure(code, args))
                shutil.rmtree(folder / "merged", ignore_errors=True)
            if side == "after" and "index_rebuild" in commands:
                figures.setdefault("index_rebuild", []).append(measure(code, ["index", "rebuild", str(run)]))
        out[side] = {name: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for name, fs in figures.items()}
        print(f"{side}: " + ", ".join(f"{k} {v['wall_s']:.2f} s / {v['peak_rss_mb']:.0f} MB"
                                      for k, v in out[side].items()), file=sys.stderr)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="100000x2,20000x50", help="comma-separated NxKB (default 100000x2,20000x50)")
    ap.add_argument("--shards", type=int, default=4)
    # 3b630da: main just before the run index (every reader loaded every record).
    ap.add_argument("--baseline-ref", default="3b630da", help="git ref measured as 'before' (default 3b630da, "
                    "main before the run index)")
    ap.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--work", help="scratch folder (default a temp dir; needs ~3x the records' size free)")
    ap.add_argument("--commands", default="resume,status,report,merge,index_rebuild",
                    help="which to measure (default all: resume,status,report,merge,index_rebuild)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--store", type=int, metavar="N",
                    help="instead: a results store of N records opened and matched (benchmarks/scale_store.py)")
    a = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    if a.store:
        import scale_store

        return scale_store.main(["--jobs", str(a.store), "--repeats", str(a.repeats), *(["--json"] if a.json else [])])
    work = Path(tempfile.mkdtemp(prefix="fasteval-scale-", dir=a.work))
    try:
        trees = {"after": ROOT}
        if not a.no_baseline:
            trees["before"] = baseline_tree(a.baseline_ref, work)
        templates = template_records(work)
        cases = []
        for spec in a.cases.split(","):
            n, _, kb = spec.partition("x")
            cases.append(run_case(work, int(n), float(kb), a.shards, trees, a.repeats, templates,
                                  set(a.commands.split(","))))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for c in cases:
        # Against the smallest-record case of the same N where there is one (fixed costs such as
        # loading the suite cancel out), else the first case.
        same_n = [b for b in cases if b["n"] == c["n"] and b["kb"] < c["kb"]]
        base = min(same_n, key=lambda b: b["kb"]) if same_n else cases[0]
        if base is c or base["kb"] >= c["kb"]:
            continue
        c["per_job_base"] = f"{base['n']}x{base['kb']:g}"
        for side in trees:
            if side in c and side in base:
                c.setdefault("per_job_vs_first_case", {})[side] = {
                    name: round((c[side][name]["command_s"] / c["n"]) / (base[side][name]["command_s"] / base["n"]), 2)
                    for name in c[side] if name in base[side]}
    result = {"cases": cases, "shards": a.shards, "baseline_ref": None if a.no_baseline else a.baseline_ref}
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        for c in cases:
            print(f"N={c['n']} x {c['build']['record_kb']} KB ({c['build']['records_mb']} MB):")
            for name in c["after"]:
                after = c["after"][name]
                before = c.get("before", {}).get(name)
                b = f"{before['wall_s']:8.2f} s {before['peak_rss_mb']:7.0f} MB  ->" if before else " " * 24
                print(f"  {name:14s} {b} {after['wall_s']:8.2f} s {after['peak_rss_mb']:7.0f} MB"
                      f"  (command alone {after['command_s']:.2f} s, cpu {after['cpu_s']:.2f} s)")
            if "per_job_vs_first_case" in c:
                print(f"  per-job cost vs {c['per_job_base']}: {c['per_job_vs_first_case']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
