"""Engine throughput: ``fasteval run`` against a minimal raw-aiohttp agent loop, same requests, same run.

    .venv/bin/python benchmarks/throughput.py [--n 1000] [--k 3] [--latency-ms 200] [--concurrency 128]
                                              [--repeats 3] [--tool calculator|python_interpreter]
                                              [--baseline-ref REF] [--json]

N trajectories of K tool rounds each (a ~50 KB noise PNG in the first user message, the
``calculator`` tool offered, the whole growing history re-sent every round, then a final answer:
K+1 model calls per trajectory) against the sim server (``python -m providers.sim``, policy
``tools``, fixed latency L) running as its own process, so the model's CPU is not charged to
the client under test. Two sides, each in its own subprocess with a fresh sim:

* ``ours``: the real ``fasteval run CONFIG --run-dir DIR --max-concurrency C --no-progress`` code
  path (``fasteval.cli.main``) on a generated config and jsonl dataset: records written with
  resume bookkeeping, retries, limits, blob store, image encoder, all on.
* ``raw``: benchmarks/_rawclient.py, uvloop + aiohttp + orjson, no bookkeeping at all.

Per side: trajectories/s (N / wall time of the run, setup included), efficiency = achieved /
ideal with ideal = C / ((K+1)·L), CPU ms per trajectory (whole process, user+sys, imports
included; the steady-state figure without interpreter start-up and imports is printed too),
and peak RSS (the child's own VmHWM: its ru_maxrss would include the benchmark process's memory
at fork time). CPU comes from ``os.wait4`` on that child alone, and the sim's own CPU
is reported alongside, since on a small machine the sim competes for the same cores. Sides
alternate within each repeat; figures are medians over repeats.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # when imported, not run as a script

from _baseline import checkout, describe, ratio  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
PY = sys.executable
MODEL = "sim-tools"
IMAGE_SIDE = 130  # 130x130 RGB noise: incompressible, so the PNG is ~50 KB

# Runs ``fasteval run`` through the CLI entry point in this process and reports what it cost.
_OURS_CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
from fasteval.cli.main import main
try:  # the CLI imports the engine lazily (in `run`): count it as start-up, as before
    import fasteval.engine.run.sweep
except ImportError:  # a --baseline-ref from before the engine's rooms
    import fasteval.engine.sweep
t1 = time.perf_counter()
r1 = resource.getrusage(resource.RUSAGE_SELF)
code = main(sys.argv[2:])
t2 = time.perf_counter()
r2 = resource.getrusage(resource.RUSAGE_SELF)
cpu = lambda r: r.ru_utime + r.ru_stime
with open(sys.argv[1], "w") as f:
    json.dump({"code": code, "wall_s": t2 - t1, "import_s": t1 - t0, "cpu_s": cpu(r2),
               "cpu_startup_s": cpu(r1), "maxrss_kb": next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:"))}, f)
"""


def _raise_nofile() -> None:
    """Children get the hard fd limit: C=1024 needs well over 1024 sockets across client and sim."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def _env(code_root: Path = ROOT) -> dict[str, str]:
    """``code_root`` first on the path: this tree, or a --baseline-ref checkout."""
    env = dict(os.environ)
    env["PYTHONPATH"] = str(code_root) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def make_image(path: Path) -> int:
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    pixels = rng.integers(0, 256, size=(IMAGE_SIDE, IMAGE_SIDE, 3), dtype=np.uint8)
    Image.fromarray(pixels, "RGB").save(path, "PNG")
    return path.stat().st_size


def write_dataset(folder: Path, n: int, port: int, concurrency: int, *, image_name: str = "image.png",
                  tools: tuple[str, ...] = ("calculator",), model_extra: dict[str, Any] | None = None,
                  run_extra: dict[str, Any] | None = None) -> Path:
    """The jsonl dataset and the sweep config that points at the external sim."""
    with (folder / "tasks.jsonl").open("w") as f:
        for i in range(n):
            f.write(json.dumps({"id": f"t{i:06d}", "prompt": f"Task {i}: what is 1 + 1? Use the calculator.",
                                "images": [image_name], "answer": "2", "tools": list(tools)}) + "\n")
    cfg = folder / "bench.yaml"
    cfg.write_text(json.dumps({  # JSON is YAML
        "name": "throughput",
        "seeds": [0],
        "models": [{"name": "bench", "provider": "openai", "base_url": f"http://127.0.0.1:{port}/v1",
                    "model": MODEL, "limits": {"concurrency": concurrency}, **(model_extra or {})}],
        "suites": [{"name": "jsonl", "options": {"path": str(folder / "tasks.jsonl"), "max_rounds": 10}}],
        "run": {"max_concurrency": concurrency, "fsync": "batch", **(run_extra or {})},
    }, indent=1))
    return cfg


class Sim:
    """``python -m providers.sim`` in its own process; its CPU is read with wait4 when stopped."""

    def __init__(self, k: int, latency_ms: float, extra_args: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [PY, "-m", "providers.sim", "--port", "0", "--model", f"{MODEL}:tools", "--latency-ms",
             str(latency_ms), "--tool-uses", str(k), *extra_args],
            cwd=ROOT, env=_env(), stdout=subprocess.PIPE, text=True, preexec_fn=_raise_nofile)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        try:
            self.port = int(json.loads(line)["port"])
        except (ValueError, KeyError, TypeError):
            self.proc.kill()
            self.proc.wait()
            raise RuntimeError(f"the sim server did not start (first line {line!r})") from None

    def stop(self) -> float:
        """Stop it and return the CPU seconds (user+sys) it used."""
        self.proc.send_signal(signal.SIGTERM)
        _, _, ru = os.wait4(self.proc.pid, 0)
        self.proc.returncode = 0  # reaped by wait4
        return ru.ru_utime + ru.ru_stime


def _run_child(cmd: list[str], code_root: Path = ROOT) -> tuple[int, Any, str]:
    """Run one measured child; returns (exit status, its rusage, its stderr+stdout tail)."""
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen(cmd, cwd=code_root, env=_env(code_root), stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_raise_nofile)
        _, status, ru = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        log.seek(0)
        return proc.returncode, ru, log.read()[-4000:]


def _metrics(n_ok: int, wall_s: float, cpu_s: float, cpu_startup_s: float, maxrss_kb: int, sim_cpu_s: float,
             n: int, k: int, latency_s: float, concurrency: int) -> dict[str, Any]:
    ideal = concurrency / ((k + 1) * latency_s)
    tps = n_ok / wall_s
    return {"traj_per_s": tps, "efficiency": tps / ideal, "cpu_ms_per_traj": 1000 * cpu_s / n,
            "cpu_ms_per_traj_steady": 1000 * (cpu_s - cpu_startup_s) / n, "peak_rss_mb": maxrss_kb / 1024,
            "sim_cpu_ms_per_traj": 1000 * sim_cpu_s / n, "wall_s": wall_s, "ok": n_ok}


def run_ours(work: Path, image: Path, n: int, k: int, latency_ms: float, concurrency: int, *,
             tools: tuple[str, ...] = ("calculator",), model_extra: dict[str, Any] | None = None,
             sim_args: tuple[str, ...] = (), code_root: Path = ROOT,
             run_extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """``fasteval run`` of ``code_root``'s code (this tree, or a --baseline-ref checkout) against a fresh sim
    of this tree (the same mock for both)."""
    folder = Path(tempfile.mkdtemp(prefix="ours-", dir=work))
    (folder / image.name).write_bytes(image.read_bytes())
    sim = Sim(k, latency_ms, sim_args)
    try:
        cfg = write_dataset(folder, n, sim.port, concurrency, image_name=image.name, tools=tools,
                            model_extra=model_extra, run_extra=run_extra)
        run_dir, stats = folder / "run", folder / "child.json"
        code, tree, tail = _run_child([PY, "-c", _OURS_CHILD, str(stats), "run", str(cfg), "--run-dir", str(run_dir),
                                    "--max-concurrency", str(concurrency), "--no-progress"], code_root)
    finally:
        sim_cpu = sim.stop()
    if code != 0 or not stats.exists():
        raise RuntimeError(f"fasteval run failed (exit {code}):\n{tail}")
    child = json.loads(stats.read_text())
    recs = [json.loads(line) for line in (run_dir / "records.jsonl").read_text().splitlines()]
    ok = [r for r in recs if r["status"] == "ok" and r["rounds"] == k + 1 and r["tool_calls"] == k]
    if len(ok) != n:
        bad = next((r for r in recs if r not in ok), None)
        print(f"warning: ours: {len(ok)}/{n} trajectories ok with {k + 1} rounds; e.g. "
              f"{ {key: bad.get(key) for key in ('status', 'error', 'rounds')} if bad else 'missing'}",
              file=sys.stderr)
    out = _metrics(len(ok), child["wall_s"], child["cpu_s"], child["cpu_startup_s"], child["maxrss_kb"], sim_cpu,
                   n, k, latency_ms / 1000, concurrency)
    # The process and every child it collected (sandbox workers and their calls): a tool's own
    # processes do work for the client that the client's CPU alone leaves out.
    out["tree_cpu_ms_per_traj"] = 1000 * (tree.ru_utime + tree.ru_stime) / n
    return out


def run_raw(image: Path, n: int, k: int, latency_ms: float, concurrency: int, *, raw_args: tuple[str, ...] = (),
            sim_args: tuple[str, ...] = ()) -> dict[str, Any]:
    sim = Sim(k, latency_ms, sim_args)
    try:
        code, _, tail = _run_child([PY, str(ROOT / "benchmarks" / "_rawclient.py"), "--url",
                                    f"http://127.0.0.1:{sim.port}/v1", "--model", MODEL, "--image", str(image),
                                    "--n", str(n), "--concurrency", str(concurrency), *raw_args])
    finally:
        sim_cpu = sim.stop()
    if code != 0:
        raise RuntimeError(f"raw client failed (exit {code}):\n{tail}")
    child = json.loads(tail.strip().splitlines()[-1])
    ok = child["trajectories"]
    if child["errors"] or child["rounds"] != ok * (k + 1):
        print(f"warning: raw: {child['errors']} errors, {child['rounds']} rounds for {ok} trajectories",
              file=sys.stderr)
    return _metrics(ok, child["wall_s"], child["cpu_s"], child["cpu_startup_s"], child["maxrss_kb"], sim_cpu,
                    n, k, latency_ms / 1000, concurrency)


def _median(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {key: statistics.median(r[key] for r in runs) for key in runs[0]}


TOOLS = ("calculator", "python_interpreter")
"""What the trajectories call: the raw client implements the calculator only, so with
``python_interpreter`` (every call runs ``print('hello')`` in the sandbox) there is no raw side
and the figure to read is the efficiency against the ideal (and, with --baseline-ref, the ratio)."""


def _row(name: str, r: dict[str, Any]) -> str:
    tree = r.get("tree_cpu_ms_per_traj")
    return (f"{name:10}{r['traj_per_s']:9.1f}{r['efficiency']:8.2f}{r['cpu_ms_per_traj']:13.2f}"
            f"{r['cpu_ms_per_traj_steady']:10.2f}{'-' if tree is None else f'{tree:.2f}':>11}"
            f"{r['peak_rss_mb']:13.0f}{r['sim_cpu_ms_per_traj']:17.2f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=1000, help="trajectories per side (default 1000)")
    ap.add_argument("--k", type=int, default=3, help="tool rounds per trajectory (default 3)")
    ap.add_argument("--latency-ms", type=float, default=200.0, help="sim latency per model call (default 200)")
    ap.add_argument("--concurrency", type=int, default=128, help="trajectories in flight (default 128)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side; medians are reported (default 3)")
    ap.add_argument("--tool", choices=TOOLS, default="calculator",
                    help="the tool each round calls (python_interpreter: the sandbox; no raw side)")
    ap.add_argument("--sandbox-workers", type=int, metavar="W",
                    help="run.sandbox.workers for the python tool (default: the sandbox's, the CPU count)")
    ap.add_argument("--baseline-ref", metavar="REF",
                    help="also run `ours` on the code of git commit REF (e.g. a release), alternating, same run")
    ap.add_argument("--json", action="store_true", help="print one JSON object {ours, raw, [baseline], params}")
    a = ap.parse_args(argv)

    with contextlib.ExitStack() as stack, tempfile.TemporaryDirectory(prefix="fasteval-throughput-") as tmp:
        base_root = stack.enter_context(checkout(a.baseline_ref)) if a.baseline_ref else None
        work = Path(tmp)
        image = work / "image.png"
        image_bytes = make_image(image)
        sides = ["ours", *(["baseline"] if base_root else []), *(["raw"] if a.tool == "calculator" else [])]
        runs: dict[str, list[dict[str, Any]]] = {side: [] for side in sides}
        for i in range(a.repeats):
            for side in sides if i % 2 == 0 else sides[::-1]:
                if side == "raw":
                    r = run_raw(image, a.n, a.k, a.latency_ms, a.concurrency)
                else:
                    r = run_ours(work, image, a.n, a.k, a.latency_ms, a.concurrency, tools=(a.tool,),
                                 code_root=base_root if side == "baseline" and base_root else ROOT,
                                 run_extra={"sandbox": {"workers": a.sandbox_workers}} if a.sandbox_workers else None)
                runs[side].append(r)
                if not a.json:
                    print(f"  repeat {i + 1} {side:>8}: {r['traj_per_s']:7.1f} traj/s  "
                          f"{r['cpu_ms_per_traj']:6.2f} ms CPU/traj  {r['peak_rss_mb']:6.0f} MB", file=sys.stderr)
    med = {side: _median(rs) for side, rs in runs.items()}
    params = {"n": a.n, "k": a.k, "latency_ms": a.latency_ms, "concurrency": a.concurrency, "repeats": a.repeats,
              "tool": a.tool, "sandbox_workers": a.sandbox_workers, "image_bytes": image_bytes,
              "ideal_traj_per_s": a.concurrency / ((a.k + 1) * a.latency_ms / 1000), "cpus": os.cpu_count(),
              **({"baseline_ref": describe(a.baseline_ref)} if a.baseline_ref else {})}
    if a.json:
        print(json.dumps({**med, "params": params}))
        return 0
    print(f"N={a.n} K={a.k} L={a.latency_ms:g} ms C={a.concurrency} tool={a.tool} image={image_bytes / 1024:.1f} KB "
          f"ideal={params['ideal_traj_per_s']:.1f} traj/s, medians of {a.repeats} on {os.cpu_count()} CPUs")
    print(f"{'':10}{'traj/s':>9}{'effic.':>8}{'CPU ms/traj':>13}{'(steady)':>10}{'(+tools)':>11}{'peak RSS MB':>13}"
          f"{'sim CPU ms/traj':>17}")
    for side in sides:
        print(_row(side, med[side]))
    ours = med["ours"]
    for other in [s for s in sides if s != "ours"]:
        r = med[other]
        label = f"baseline {params['baseline_ref']}" if other == "baseline" else "raw"
        print(f"ours/{label}: throughput {ratio(ours['traj_per_s'], r['traj_per_s'])}, "
              f"CPU/traj {ratio(ours['cpu_ms_per_traj'], r['cpu_ms_per_traj'])}, "
              f"peak RSS {ratio(ours['peak_rss_mb'], r['peak_rss_mb'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
