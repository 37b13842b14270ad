"""Latency and throughput of the sandbox pool vs a fresh ``python -c`` per call, same run.

Run: ``.venv/bin/python benchmarks/sandbox.py [--json] [--calls N] [--gap-ms G] [--phases]
[--baseline-ref REF [--rounds R]]``. The baseline
spawns an interpreter that does the same imports (numpy, PIL, cv2, matplotlib) and the same work,
which is what an unpooled sandbox pays on every call.

Every call runs in a fresh child forked from a warm template; each worker keeps two such children
forked and warmed ahead. ``pool_p50_ms`` is back to back (the forks, warm-ups and exits of
earlier calls compete for the CPU); ``pool_paced_p50_ms`` leaves ``--gap-ms`` between calls, as a
sweep does while the model thinks. ``fork_*`` is the CPU every call costs at least: a bare
``os.fork()`` / ``os._exit(0)`` / ``waitpid`` loop in a process with the template's imports and
environment. ``--phases`` also prints where a trivial call's time goes (median per hop), back to
back and paced.

``--baseline-ref REF``: the same figures for the sandbox of commit REF (benchmarks/_baseline.py), in
the same run and on the same load: both sides' pools (2 workers and 1) are alive at once, each in
its own process, and every measurement is taken in turns, side after side, ``--rounds`` times
(first side alternating), then medians and ours/baseline per figure. On a shared machine whole
passes run one after the other differed by 30% with identical code; measured in turns, the two
sides see the same moments. The ``python -c`` spawn baseline is left out then.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import io
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _code_root() -> Path:
    """Where ``sandbox`` comes from: this tree, or the checkout a --baseline-ref run hands its child."""
    if "--code-root" in sys.argv[:-1]:
        return Path(sys.argv[sys.argv.index("--code-root") + 1]).resolve()
    return HERE.parent


CODE_ROOT = _code_root()
sys.path.insert(0, str(CODE_ROOT))
sys.path.append(str(HERE))

from _baseline import checkout, describe  # noqa: E402

from sandbox import SandboxPool  # noqa: E402

TRIVIAL = "x = 1 + 1"
IMAGE = (
    "from PIL import Image as P, ImageEnhance\n"
    "im = P.open('input_0.png')\n"
    "im = ImageEnhance.Contrast(im.crop((128, 128, 768, 768))).enhance(1.8)\n"
    "im.save(PROCESSED_IMAGE_SAVE_PATH / 'transformed_image_0.png')\n"
)
IMPORTS = "import numpy, cv2, matplotlib\nmatplotlib.use('Agg')\nimport matplotlib.pyplot\nfrom pathlib import Path\n"


def test_png() -> bytes:
    """A 1024x1024 RGB PNG with texture, so encoding costs what a photo-like image costs."""
    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(0)
    base = np.linspace(0, 255, 1024, dtype=np.float32)
    img = (base[None, :, None] + base[:, None, None] * 0.5 + rng.normal(0, 8, (1024, 1024, 3))) % 256
    buf = io.BytesIO()
    Image.fromarray(img.astype("uint8")).save(buf, "PNG")
    return buf.getvalue()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def pool_latency(pool: SandboxPool, code: str, images: list[bytes], n: int, gap_s: float = 0.0) -> list[float]:
    times = []
    for _ in range(n):
        if gap_s:
            await asyncio.sleep(gap_s)
        t = time.perf_counter()
        r = await pool.run(code, images=images)
        times.append(time.perf_counter() - t)
        assert r.ok, r.stderr
    return times


def spawn_latency(code: str, png: bytes, n: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as d:
        folder = Path(d)
        (folder / "out").mkdir()
        script = IMPORTS + "PROCESSED_IMAGE_SAVE_PATH = Path('out')\n" + code
        for _ in range(n):
            t = time.perf_counter()
            (folder / "input_0.png").write_bytes(png)
            subprocess.run([sys.executable, "-c", script], cwd=folder, check=True)
            times.append(time.perf_counter() - t)
    return times


def fork_floor(n: int) -> dict[str, float]:
    """Fork, exit and reap a process that has the zygote's imports and environment, ``n`` times."""
    with tempfile.TemporaryDirectory() as d:
        env = SandboxPool(isolation="process")._worker_env(Path(d))
        env["PYTHONPATH"] = str(CODE_ROOT)
        out = subprocess.run(
            [sys.executable, __file__, "--fork-floor", str(n), "--code-root", str(CODE_ROOT)], env=env, check=True,
            capture_output=True, text=True,
        )
    return dict(json.loads(out.stdout))


def _fork_floor_child(n: int) -> None:
    from sandbox._worker import _preload

    _preload()
    gc.freeze()
    fork_s, total_s = [], []
    cpu = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    for _ in range(n):
        t = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        forked = time.perf_counter()
        os.waitpid(pid, 0)
        fork_s.append(forked - t)
        total_s.append(time.perf_counter() - t)
    after = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    used = [(b.ru_utime + b.ru_stime - a.ru_utime - a.ru_stime) / n * 1000 for a, b in zip(cpu, after, strict=True)]
    figures = {
        "fork_p50_ms": round(pct(fork_s, 0.5), 2),
        "fork_exit_wait_p50_ms": round(pct(total_s, 0.5), 2),
        "fork_cpu_ms": round(used[0], 2),
        "exit_cpu_ms": round(used[1], 2),
    }
    print(json.dumps(figures))


PHASES = (
    ("waiting for the zygote's tidying", "pool_send", "zygote_ready"),
    ("pool -> zygote", "pool_send", "zygote_read"),
    ("zygote prepares the call", "zygote_read", "zygote_write"),
    ("child wakes up", "zygote_write", "child_start"),
    ("child runs the call", "child_start", "child_done"),
    ("child -> zygote", "child_done", "zygote_reply"),
    ("zygote -> pool", "zygote_reply", "pool_recv"),
)


async def phases(calls: int, gap_s: float) -> dict[str, dict[str, float]]:
    """Median milliseconds per hop of a trivial call, back to back and paced."""
    table: dict[str, dict[str, float]] = {}
    async with SandboxPool(phase_times=True) as pool:
        await pool_latency(pool, TRIVIAL, [], 10)
        for label, gap in (("back_to_back", 0.0), ("paced", gap_s)):
            marks = []
            for _ in range(calls):
                if gap:
                    await asyncio.sleep(gap)
                marks.append((await pool.run(TRIVIAL)).phases)
            row = {}
            for name, a, b in PHASES:
                # the first hop starts when both the request and the zygote are there
                spans = [m[b] - (max(m[a], m["zygote_ready"]) if b == "zygote_read" else m[a]) for m in marks]
                row[name] = round(max(0.0, statistics.median(spans)) * 1000, 2)
            row["total"] = round(statistics.median(m["pool_recv"] - m["pool_send"] for m in marks) * 1000, 2)
            table[label] = row
    return table


async def throughput(workers: int, code: str, images: list[bytes], calls: int) -> float:
    async with SandboxPool(workers) as pool:
        await pool_latency(pool, code, images, 3)
        t = time.perf_counter()
        await asyncio.gather(*(pool.run(code, images=images) for _ in range(calls)))
        return calls / (time.perf_counter() - t)


COMPARED = (
    ("trivial call p50, back to back (ms)", "b2b", 50),
    ("trivial call p95, back to back (ms)", "b2b", 95),
    ("trivial call p50, paced (ms)", "paced", 50),
    ("image call p50 (ms)", "image", 50),
    ("trivial calls/s, 1 worker", "burst 1 t", 50),
    ("trivial calls/s, 2 workers", "burst 2 t", 50),
    ("image calls/s, 1 worker", "burst 1 i", 50),
    ("image calls/s, 2 workers", "burst 2 i", 50),
    ("floor: fork+exit+wait p50 (ms)", "floor", 50),
)


async def agent(gap_s: float) -> None:
    """One side of --baseline-ref: pools of 2 and 1 workers on CODE_ROOT's sandbox, measuring on command.

    Reads one command a line (``b2b N``, ``paced N``, ``image N``, ``burst W t|i N``, ``floor N``) and
    answers one JSON list a line: latencies in ms, or one rate in calls/s, or one floor in ms.
    """
    loop = asyncio.get_running_loop()
    png = test_png()
    async with SandboxPool(2) as two, SandboxPool(1) as one:
        for pool in (two, one):
            await pool_latency(pool, TRIVIAL, [], 20)
            await pool_latency(pool, IMAGE, [png], 2)
        print("ready", flush=True)
        while line := await loop.run_in_executor(None, sys.stdin.readline):
            cmd, *rest = line.split()
            n = int(rest[-1])
            out: list[float]
            if cmd in ("b2b", "paced", "image"):
                code, images = (IMAGE, [png]) if cmd == "image" else (TRIVIAL, [])
                out = [t * 1000 for t in await pool_latency(two, code, images, n, gap_s if cmd == "paced" else 0.0)]
            elif cmd == "burst":
                pool = two if rest[0] == "2" else one
                code, images = (IMAGE, [png]) if rest[1] == "i" else (TRIVIAL, [])
                t0 = time.perf_counter()
                await asyncio.gather(*(pool.run(code, images=images) for _ in range(n)))
                out = [n / (time.perf_counter() - t0)]
            else:
                out = [fork_floor(n)["fork_exit_wait_p50_ms"]]
            print(json.dumps(out), flush=True)


ROUND = ("b2b 20", "paced 10", "image 3", "burst 2 t 100", "burst 1 t 60", "burst 2 i 8", "burst 1 i 6", "floor 30")


def compare(args: argparse.Namespace) -> None:
    """Both sides' pools alive at once, measured in turns (see the module docstring)."""
    with checkout(args.baseline_ref) as base, contextlib.ExitStack() as stack:
        sides: dict[str, subprocess.Popen[str]] = {}
        for side, root in (("ours", HERE.parent), ("baseline", base)):
            sides[side] = stack.enter_context(subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--agent", "--gap-ms", str(args.gap_ms),
                 "--code-root", str(root)], cwd=root, env={**os.environ, "PYTHONPATH": str(root)},
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
        for proc in sides.values():
            assert proc.stdin is not None and proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                raise SystemExit("a side's sandbox pool did not start")
        got: dict[str, dict[str, list[float]]] = {side: {} for side in sides}
        for i in range(args.rounds):
            for cmd in ROUND:
                for side in list(sides) if i % 2 == 0 else list(sides)[::-1]:
                    proc = sides[side]
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(cmd + "\n")
                    proc.stdin.flush()
                    key = cmd.rsplit(" ", 1)[0]
                    got[side].setdefault(key, []).extend(json.loads(proc.stdout.readline()))
            if not args.json:
                b2b = {s: statistics.median(got[s]["b2b"]) for s in sides}
                print(f"  round {i + 1}: back to back p50 so far ours {b2b['ours']:.2f} ms, "
                      f"baseline {b2b['baseline']:.2f} ms", file=sys.stderr)
        for proc in sides.values():
            assert proc.stdin is not None
            proc.stdin.close()
    table = {label: {side: statistics.quantiles(got[side][key], n=100)[q - 1] if q != 50
                     else statistics.median(got[side][key]) for side in sides}
             for label, key, q in COMPARED}
    if args.json:
        print(json.dumps({"figures": table, "rounds": args.rounds, "baseline_ref": describe(args.baseline_ref)}))
        return
    print(f"sandbox, this tree vs {describe(args.baseline_ref)}: both pools alive, {args.rounds} rounds measured "
          f"in turns ({', '.join(ROUND)}); medians (p95 where named)")
    print(f"{'':38}{'ours':>10}{'baseline':>10}{'ours/base':>11}")
    for label, row in table.items():
        ratio = row["ours"] / row["baseline"] if row["baseline"] else 0.0
        print(f"{label:38}{row['ours']:10.2f}{row['baseline']:10.2f}{ratio:10.2f}x")


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--gap-ms", type=float, default=20.0, help="pause between paced calls")
    parser.add_argument("--phases", action="store_true", help="also time each hop of a trivial call")
    parser.add_argument("--baseline-ref", metavar="REF", help="also measure the sandbox of git commit REF, same run")
    parser.add_argument("--rounds", type=int, default=8, help="with --baseline-ref: rounds of measurements (default 8)")
    parser.add_argument("--no-spawn", action="store_true", help="leave out the `python -c` per call baseline")
    parser.add_argument("--fork-floor", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--code-root", help=argparse.SUPPRESS)
    parser.add_argument("--agent", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fork_floor:
        _fork_floor_child(args.fork_floor)
        return
    if args.agent:
        await agent(args.gap_ms / 1000)
        return
    if args.baseline_ref:
        compare(args)
        return
    png = test_png()
    async with SandboxPool() as pool:
        await pool_latency(pool, TRIVIAL, [], 10)
        trivial = await pool_latency(pool, TRIVIAL, [], args.calls)
        paced = await pool_latency(pool, TRIVIAL, [], max(20, args.calls // 2), args.gap_ms / 1000)
        image = await pool_latency(pool, IMAGE, [png], max(20, args.calls // 5))
        isolation, size = pool.isolation, pool.size
    n_spawn = 0 if args.no_spawn else max(5, args.calls // 20)
    spawn_trivial = spawn_latency(TRIVIAL, png, n_spawn) or [float("nan")]
    spawn_image = spawn_latency(IMAGE, png, n_spawn) or [float("nan")]
    tput = {w: await throughput(w, IMAGE, [png], 40) for w in (1, 2)}
    tput_trivial = {w: await throughput(w, TRIVIAL, [], 400) for w in (1, 2)}
    floor = fork_floor(max(50, args.calls // 2))
    hops = await phases(max(50, args.calls), args.gap_ms / 1000) if args.phases else {}
    figures = {
        "isolation": isolation,
        "pool_size": size,
        "pool_p50_ms": round(pct(trivial, 0.5), 2),
        "pool_p95_ms": round(pct(trivial, 0.95), 2),
        "pool_p99_ms": round(pct(trivial, 0.99), 2),
        "pool_paced_p50_ms": round(pct(paced, 0.5), 2),
        "pool_paced_p95_ms": round(pct(paced, 0.95), 2),
        "pool_paced_p99_ms": round(pct(paced, 0.99), 2),
        "spawn_p50_ms": round(pct(spawn_trivial, 0.5), 1),
        "speedup": round(statistics.median(spawn_trivial) / statistics.median(trivial), 1),
        "image_pool_p50_ms": round(pct(image, 0.5), 1),
        "image_pool_p99_ms": round(pct(image, 0.99), 1),
        "image_spawn_p50_ms": round(pct(spawn_image, 0.5), 1),
        "image_speedup": round(statistics.median(spawn_image) / statistics.median(image), 1),
        "image_calls_per_s_1_worker": round(tput[1], 1),
        "image_calls_per_s_2_workers": round(tput[2], 1),
        "trivial_calls_per_s_1_worker": round(tput_trivial[1], 1),
        "trivial_calls_per_s_2_workers": round(tput_trivial[2], 1),
        **floor,
        **({"phases_ms": hops} if hops else {}),
    }
    if args.json:
        print(json.dumps(figures))
        return
    print(f"isolation={isolation} workers={size}")
    print(f"trivial call: pool p50 {figures['pool_p50_ms']} ms p99 {figures['pool_p99_ms']} ms | "
          f"spawn p50 {figures['spawn_p50_ms']} ms | speedup {figures['speedup']}x")  # fmt: skip
    print(f"trivial call, {args.gap_ms:g} ms apart: pool p50 {figures['pool_paced_p50_ms']} ms "
          f"p99 {figures['pool_paced_p99_ms']} ms")  # fmt: skip
    print(f"image call:   pool p50 {figures['image_pool_p50_ms']} ms p99 {figures['image_pool_p99_ms']} ms | "
          f"spawn p50 {figures['image_spawn_p50_ms']} ms | speedup {figures['image_speedup']}x")  # fmt: skip
    print(f"throughput (image calls/s): 1 worker {figures['image_calls_per_s_1_worker']}, "
          f"2 workers {figures['image_calls_per_s_2_workers']}")  # fmt: skip
    print(f"throughput (trivial calls/s): 1 worker {figures['trivial_calls_per_s_1_worker']}, "
          f"2 workers {figures['trivial_calls_per_s_2_workers']}")  # fmt: skip
    print(f"floor (bare fork of a process with the zygote's imports): fork p50 {floor['fork_p50_ms']} ms, "
          f"fork+exit+wait p50 {floor['fork_exit_wait_p50_ms']} ms; CPU per fork {floor['fork_cpu_ms']} ms "
          f"(parent) + {floor['exit_cpu_ms']} ms (child)")  # fmt: skip
    for label, row in hops.items():
        print(f"trivial call hops, {label.replace('_', ' ')} (median ms): " + ", ".join(f"{k} {v}" for k, v in row.items()))


if __name__ == "__main__":
    asyncio.run(main())
