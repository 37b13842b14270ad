"""Run folders at overnight scale: every reader, resume and a fresh start on N-job runs, before vs after.

    .venv/bin/python benchmarks/scale.py [--cases 100000,1000000] [--models 10] [--shards 4]
                                         [--baseline-ref e061baf] [--no-baseline] [--repeats 3]
                                         [--commands resume,status,...] [--work DIR] [--json]
    .venv/bin/python benchmarks/scale.py --store 1000000     # a results store of N records matched

Each case ``N`` (or ``NxKB``) is a run of N jobs: ``--models`` sim models × 5 seeds × N/(5·models)
jsonl tasks (10 models × 5 seeds is the overnight sweep's shape), records of about KB kilobytes
(default 2), about 3 % of them errors and the scores 0 or 1, plus the same jobs split into
``--shards`` shard run folders (for merge).

How the runs are built (the documented fast path): a real ``fasteval run`` of 20 tasks against the
in-process sim (policy ``tools``, one calculator round, zero latency) gives template records. Then
every job of the big config's real plan (``fasteval.engine.plan.plan``, so job ids are the ones a
sweep would resume) gets a template record with its own identity, status and score, its tool
output padded to reach the size, written through the sweep's own ``RecordWriter`` with the run
index attached, exactly as a sweep writes them; the manifest is written by the sweep's own
``prepare_run_dir`` and plan count.

Measured, each in a fresh subprocess, for the code of this tree ("after") and of
``--baseline-ref`` exported with ``git archive`` ("before"), each side with its own index (the two
index versions differ; each is built once, unmeasured, and put back before every command):

- ``resume``: ``fasteval run --keep-errors`` again, nothing left to do (the errors count as done);
- ``status``, ``report``, ``leaderboard`` (``report --leaderboard``), all ``--format json``;
- ``compare``: model 0 against model 1 of the run (``--format json``);
- ``merge`` of the shards into a new folder;
- ``dry_run``: ``run --dry-run --keep-errors`` of the config against the finished run;
- ``first_request``: a fresh ``fasteval run`` of the whole config into a new folder, its models
  pointed at a sim server in its own process (``--log-requests``): seconds from the command's
  start to the sim's first request line, then the sweep's resident memory after it has run
  ``--run-s`` more seconds (VmRSS, and its peak VmHWM), and the sweep is stopped (SIGTERM);
- after only: ``index_rebuild``.

Wall time includes interpreter start and imports (what a user waits for), with each tree's bytecode
compiled first, as an installed package has it; ``command_s`` is the command alone and ``cpu_s``
the child's user+sys CPU (the figure least disturbed by a busy machine). Peak RSS is the child's
own VmHWM. Medians over ``--repeats``. The JSON outputs of status and report are compared between
the two sides (report's latencies aside: their mean is now exact in microseconds).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
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
COMMANDS = ("resume", "status", "report", "leaderboard", "compare", "merge", "dry_run", "first_request",
            "index_rebuild")


def model_names(n: int) -> list[str]:
    return [f"sim-m{i}" for i in range(n)]


def write_config(folder: Path, n_tasks: int, name: str, models: list[str], sim_port: int | None = None) -> Path:
    """The sweep's config (JSON is YAML); with ``sim_port``, its models are served by that sim process."""
    data = folder / f"{name}.jsonl"
    if not data.exists():
        with data.open("w") as f:
            for i in range(n_tasks):
                f.write(json.dumps({"id": f"t{i:07d}", "prompt": f"Task {i}: what is 1 + 1? Use the calculator.",
                                    "answer": "2", "tools": ["calculator"]}) + "\n")
    if sim_port is None:
        entries = [{"name": m, "provider": "sim", "policy": "tools", "tool_uses": 1, "latency_ms": 0} for m in models]
    else:
        entries = [{"name": m, "provider": "openai", "base_url": f"http://127.0.0.1:{sim_port}/v1", "model": m,
                    "limits": {"concurrency": 64}} for m in models]
    cfg = folder / (f"{name}.yaml" if sim_port is None else f"{name}-served.yaml")
    cfg.write_text(json.dumps({
        "name": name, "seeds": SEEDS, "models": entries,
        "suites": [{"name": "jsonl", "options": {"path": str(data), "max_rounds": 10}}],
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
code = main(sys.argv[4:])
t2 = time.perf_counter()
hwm = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))
cpu = sum(os.times()[:2])
pathlib.Path(sys.argv[1]).write_text(json.dumps({"code": code, "import_s": t1 - t0, "command_s": t2 - t1,
                                                 "cpu_s": cpu, "peak_rss_mb": hwm / 1024}))
sys.exit(0 if code in (0, 1) else code)
"""


def measure(code: Path, args: list[str], stdout: Path | None = None) -> dict[str, Any]:
    """Run ``fasteval ARGS`` with the package from ``code``: wall seconds, command seconds, CPU, peak RSS (MB)."""
    with tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryFile("w+") as log:
        stats = Path(tmp) / "stats.json"
        out = stdout.open("w") if stdout is not None else log
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([PY, "-c", _PROBE, str(stats), str(code.resolve()), "-", *args], cwd=code,
                                  env=_env(code), stdout=out, stderr=log if stdout is not None else subprocess.STDOUT)
        finally:
            if stdout is not None:
                out.close()
        wall = time.perf_counter() - t0
        if proc.returncode != 0 or not stats.exists():
            log.seek(0)
            raise RuntimeError(f"fasteval {' '.join(args)} failed (exit {proc.returncode}) with {code}:\n"
                               f"{log.read()[-3000:]}")
        child = json.loads(stats.read_text())
    return {"wall_s": round(wall, 3), "command_s": round(child["command_s"], 3), "cpu_s": round(child["cpu_s"], 3),
            "peak_rss_mb": round(child["peak_rss_mb"], 1)}


def _status_kb(pid: int) -> dict[str, int]:
    try:
        with open(f"/proc/{pid}/status") as f:
            return {k: int(v.split()[0]) for k, _, v in (line.partition(":") for line in f) if k in ("VmRSS", "VmHWM")}
    except (FileNotFoundError, ProcessLookupError, ValueError):
        return {}


def first_request(code: Path, folder: Path, n_tasks: int, models: list[str], run_s: float) -> dict[str, Any]:
    """A fresh sweep of the whole config: seconds to the sim's first request, memory ``run_s`` later."""
    sim = subprocess.Popen([PY, "-m", "providers.sim", "--port", "0", "--latency-ms", "200", "--tool-uses", "1",
                            "--log-requests", *(a for m in models for a in ("--model", f"{m}:tools"))],
                           cwd=ROOT, env=_env(ROOT), stdout=subprocess.PIPE, text=True)
    run_dir = folder / "fresh"
    try:
        assert sim.stdout is not None
        port = int(json.loads(sim.stdout.readline())["port"])
        cfg = write_config(folder, n_tasks, "big", models, sim_port=port)
        t0 = time.perf_counter()
        proc = subprocess.Popen([PY, "-m", "fasteval.cli.main", "run", str(cfg), "--run-dir", str(run_dir),
                                 "--no-progress"], cwd=code, env=_env(code), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        try:
            while True:
                line = sim.stdout.readline()
                if not line or line.startswith("sim-request"):
                    break
            first = time.perf_counter() - t0
            if not line:
                raise RuntimeError("the sim ended before any request")
            time.sleep(run_s)
            mem = _status_kb(proc.pid)
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        done = sum(1 for _ in (run_dir / "records.jsonl").open()) if (run_dir / "records.jsonl").exists() else 0
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait()
        shutil.rmtree(run_dir, ignore_errors=True)
    return {"wall_s": round(first, 3), "rss_mb": round(mem.get("VmRSS", 0) / 1024, 1),
            "peak_rss_mb": round(mem.get("VmHWM", 0) / 1024, 1), "records_after": done}


def template_records(folder: Path) -> list[dict[str, Any]]:
    cfg = write_config(folder, 20, "template", model_names(1))
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


def _outcome(job_id: str, model_index: int) -> tuple[bool, float]:
    """A job's status and score, fixed by its id: ~3 % errors, the models a few points apart."""
    h = int(hashlib.blake2b(job_id.encode(), digest_size=8).hexdigest(), 16)
    return h % 33 != 0, 1.0 if (h >> 8) % 100 < 50 + 3 * model_index else 0.0


async def build_runs(folder: Path, n: int, kb: float, shards: int, models: list[str],
                     templates: list[dict[str, Any]]) -> dict[str, Any]:
    from fasteval.config.load import load_config
    from fasteval.core.types import Record
    from fasteval.engine.plan import RunOptions, in_shard, load_suite, plan, plan_totals
    from fasteval.engine.run.sweep import prepare_run_dir
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.runfolder.index import open_index
    from fasteval.runfolder.records import RECORDS, RecordWriter, read_manifest, write_manifest

    n_tasks = max(1, n // (SEEDS * len(models)))
    cfg = load_config(write_config(folder, n_tasks, "big", models))
    padded = [_padded(t, kb) for t in templates]
    targets: list[tuple[Path, tuple[int, int] | None]] = [(folder / "run", None)]
    targets += [(folder / f"shard{i}", (i, shards)) for i in range(shards)] if shards else []
    writers, indexes = [], []
    for run_dir, shard in targets:
        opts = RunOptions(run_dir=run_dir, shard=shard)
        runs = [load_suite(e, BlobStore(run_dir / "blobs")) for e in cfg.suites]
        # the manifest as the sweep's start writes it, its groups' fingerprints included: without
        # them every measured command would first mark the whole index against the groups a
        # resume writes (~3 s at 10^6), a state no real run folder is left in
        prepare_run_dir(cfg, opts, runs)
        total, by = plan_totals(cfg, runs, shard)  # as Sweep.run records its plan
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
    slot = {m: i for i, m in enumerate(models)}
    count = 0
    for i, (job, _, _, _) in enumerate(plan(cfg, runs, None)):
        rec = dict(padded[i % len(padded)])
        ok, score = _outcome(job.job_id, slot[job.model])
        rec.update(job_id=job.job_id, model=job.model, suite=job.suite, setting=job.setting, task_id=job.task_id,
                   seed=job.seed, fingerprint=job.fingerprint, components=job.identity.components(),
                   status="ok" if ok else "error", score=score if ok else None,
                   error=None if ok else "timeout: the sim took too long", error_kind=None if ok else "timeout",
                   termination="answered" if ok else "error")
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
    return {"config": str(cfg.path), "jobs": count, "tasks": n_tasks, "models": len(models),
            "records_mb": round(size / 2**20, 1), "record_kb": round(size / max(1, count) / 1024, 2)}


def compile_tree(code: Path) -> None:
    """Write the tree's bytecode (compileall writes it even under PYTHONDONTWRITEBYTECODE)."""
    packages = [str(code / p) for p in ("fasteval", "providers", "sandbox", "cache") if (code / p).is_dir()]
    subprocess.run([PY, "-m", "compileall", "-q", *packages], check=True, capture_output=True)


def baseline_tree(ref: str, work: Path, repo: Path = ROOT) -> Path:
    dest = work / f"baseline-{ref.replace('/', '_')}"
    dest.mkdir()
    archive = subprocess.run(["git", "-C", str(repo), "archive", ref], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive, check=True)
    return dest


_INDEX_FILES = ("index.sqlite", "index.sqlite-wal", "index.sqlite-shm")


def _keep_index(folders: list[Path], side: str) -> None:
    """Put this side's copy of each folder's index aside (each fasteval version has its own)."""
    for folder in folders:
        for name in _INDEX_FILES:
            if (folder / name).exists():
                shutil.copyfile(folder / name, folder / f".{side}.{name}")


def _use_index(folders: list[Path], side: str) -> None:
    for folder in folders:
        for name in _INDEX_FILES:
            (folder / name).unlink(missing_ok=True)
            if (folder / f".{side}.{name}").exists():
                shutil.copyfile(folder / f".{side}.{name}", folder / name)


def _same_answers(folder: Path, trees: dict[str, Path]) -> dict[str, Any]:
    """status and report of both sides, compared (report's mean latency aside)."""
    out: dict[str, Any] = {}
    answers: dict[str, dict[str, Any]] = {}
    for side in trees:
        _use_index([folder / "run"], side)
        for what in ("status", "report"):
            path = folder / f"{side}-{what}.json"
            measure(trees[side], [what, str(folder / "run"), "--format", "json"], stdout=path)
            answers.setdefault(what, {})[side] = json.loads(path.read_text())
    if len(trees) == 2:
        for row in (*answers["report"]["before"]["rows"], *answers["report"]["after"]["rows"]):
            row.pop("mean_latency_s", None)
        for side in ("before", "after"):  # keyed suite/setting now; e061baf merged same-named settings
            answers["status"][side].pop("by_setting", None)
        for what in answers:
            differ = _differences(answers[what]["before"], answers[what]["after"])
            out[what] = not differ
            if differ:
                print(f"{what}: before and after differ at {', '.join(differ[:8])}", file=sys.stderr)
    return out


def _differences(before: Any, after: Any, at: str = "") -> list[str]:
    """Where two answers differ, over the keys both have (a key only the newer side prints, such
    as a partial run's completion, is an addition, not a different answer)."""
    if isinstance(before, dict) and isinstance(after, dict):
        return [d for k in before.keys() & after.keys() for d in _differences(before[k], after[k], f"{at}.{k}")]
    if isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        return [d for i, (b, a) in enumerate(zip(before, after, strict=True)) for d in _differences(b, a, f"{at}[{i}]")]
    return [] if before == after else [at or "."]


def _commands(folder: Path, cfg: str, models: list[str], shards: int) -> dict[str, list[str]]:
    run = str(folder / "run")
    # --keep-errors: the built runs hold errors, which a plain resume would run again (and change
    # the folder under the other side's index); with it, resume has nothing left to do.
    return {"resume": ["run", cfg, "--run-dir", run, "--no-progress", "--keep-errors"],
            "status": ["status", run, "--format", "json"],
            "report": ["report", run, "--format", "json"],
            "leaderboard": ["report", run, "--leaderboard", "--format", "json"],
            "compare": ["compare", f"{run}:{models[0]}", f"{run}:{models[min(1, len(models) - 1)]}", "--format", "json"],
            "merge": ["merge", str(folder / "merged"), *(str(folder / f"shard{i}") for i in range(shards))],
            "dry_run": ["run", cfg, "--run-dir", run, "--dry-run", "--keep-errors"]}


def run_case(work: Path, n: int, kb: float, args: argparse.Namespace, trees: dict[str, Path],
             templates: list[dict[str, Any]], commands: set[str]) -> dict[str, Any]:
    folder = work / f"case-{n}x{kb:g}"
    folder.mkdir()
    models = model_names(args.models)
    t0 = time.perf_counter()
    built = asyncio.run(build_runs(folder, n, kb, args.shards, models, templates))
    built["build_s"] = round(time.perf_counter() - t0, 1)
    print(f"built {n} jobs x {built['record_kb']} KB ({built['records_mb']} MB) in {built['build_s']} s",
          file=sys.stderr)
    folders = [folder / "run", *(folder / f"shard{i}" for i in range(args.shards))]
    _keep_index(folders, "after")
    for side, code in trees.items():
        compile_tree(code)
        if side != "after":  # each version's own index, built once and not measured
            for f in folders:
                _use_index([f], side)
                measure(code, ["index", "rebuild", str(f)])
            _keep_index(folders, side)
    out: dict[str, Any] = {"n": n, "kb": kb, "build": built, "same_answers": _same_answers(folder, trees)}
    argv = _commands(folder, built["config"], models, args.shards)
    figures: dict[str, dict[str, list[dict[str, Any]]]] = {side: {} for side in trees}
    for rep in range(args.repeats):
        for side in (trees if rep % 2 == 0 else list(reversed(trees))):  # sides alternate
            code = trees[side]
            for name in COMMANDS:
                if name not in commands or (name == "index_rebuild" and side != "after"):
                    continue
                _use_index(folders, side)
                if name == "first_request":
                    fig = first_request(code, folder, built["tasks"], models, args.run_s)
                elif name == "index_rebuild":
                    fig = measure(code, ["index", "rebuild", str(folder / "run")])
                else:
                    size = (folder / "run" / "records.jsonl").stat().st_size
                    fig = measure(code, argv[name])
                    if (folder / "run" / "records.jsonl").stat().st_size != size:
                        raise RuntimeError(f"{side}'s {name} wrote records: the runs are not finished")
                shutil.rmtree(folder / "merged", ignore_errors=True)
                figures[side].setdefault(name, []).append(fig)
    for side, by_name in figures.items():
        out[side] = {name: {k: statistics.median(f[k] for f in fs) for k in fs[0]} for name, fs in by_name.items()}
        print(f"{side}: " + ", ".join(f"{k} {v['wall_s']:.2f} s / {v['peak_rss_mb']:.0f} MB"
                                      for k, v in out[side].items()), file=sys.stderr)
    shutil.rmtree(folder, ignore_errors=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", default="100000,1000000", help="comma-separated N or NxKB (default 100000,1000000)")
    ap.add_argument("--models", type=int, default=10, help="sim models (default 10; 5 seeds each)")
    ap.add_argument("--shards", type=int, default=4)
    # e061baf: main before the aggregates, the resume array and the streaming plan (issue #44), with
    # the job ids of the results store (an older ref plans other ids: its resume would run every job).
    ap.add_argument("--baseline-ref", default="e061baf", help="git ref measured as 'before' (default e061baf)")
    ap.add_argument("--no-baseline", action="store_true", help="measure this tree only")
    ap.add_argument("--repo", default=str(ROOT), help="the git repository --baseline-ref is read from (default this "
                    "tree: give it when running a copy of the tree)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--run-s", type=float, default=5.0, help="first_request: seconds the sweep runs before its "
                    "memory is read (default 5)")
    ap.add_argument("--work", help="scratch folder (default a temp dir; needs ~3.5x the records' size free)")
    ap.add_argument("--commands", default=",".join(COMMANDS), help=f"which to measure (default all: {','.join(COMMANDS)})")
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
            trees["before"] = baseline_tree(a.baseline_ref, work, Path(a.repo))
        templates = template_records(work)
        cases = []
        for spec in a.cases.split(","):
            n, _, kb = spec.partition("x")
            cases.append(run_case(work, int(n), float(kb or 2), a, trees, templates, set(a.commands.split(","))))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    result = {"cases": cases, "models": a.models, "shards": a.shards,
              "baseline_ref": None if a.no_baseline else a.baseline_ref}
    if a.json:
        print(json.dumps(result, indent=1))
    else:
        for c in cases:
            print(f"N={c['n']} x {c['build']['record_kb']} KB ({c['build']['records_mb']} MB), "
                  f"{c['build']['models']} models x {SEEDS} seeds x {c['build']['tasks']} tasks; "
                  f"same answers: {c['same_answers']}")
            for name in c["after"]:
                after = c["after"][name]
                before = c.get("before", {}).get(name)
                b = f"{before['wall_s']:8.2f} s {before['peak_rss_mb']:7.0f} MB  ->" if before else " " * 24
                print(f"  {name:14s} {b} {after['wall_s']:8.2f} s {after['peak_rss_mb']:7.0f} MB"
                      + (f"  (cpu {after['cpu_s']:.2f} s)" if "cpu_s" in after else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
