"""Peak RSS of HR-Bench 8K sweeps as the release grows: flat means images are decoded lazily.

    .venv/bin/python benchmarks/twi_8k_memory.py [--images 1,2,4,8] [--concurrency 2] [--settings direct,zoom]

Builds an ``hr_bench_8k.tsv`` with N distinct 7680×4320 JPEGs (4 option rotations each, base64
in the TSV, as the release ships them) and runs ``fasteval run`` on it in a fresh interpreter
with the sim (``tools`` policy: one image_zoom_in_tool call on the original, then an answer).
Prints peak RSS (the child's VmHWM) and the growth per extra image against the decoded size of
one image (~95 MB), the cost if every image stayed decoded.
"""

from __future__ import annotations

import argparse
import base64
import csv
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyvips
import yaml

WIDTH, HEIGHT = 7680, 4320
DECODED_MB = WIDTH * HEIGHT * 3 / 2**20
PROBE = r"""
import json, sys
from fasteval.cli.main import main
code = main(["run", sys.argv[1], "--run-dir", sys.argv[2], "--no-progress"])
hwm = next(l for l in open("/proc/self/status") if l.startswith("VmHWM")).split()[1]
print(json.dumps({"code": code, "peak_rss_mb": int(hwm) / 1024}))
"""


def build(work: Path, n: int) -> None:
    work.mkdir(parents=True)
    with (work / "hr_bench_8k.tsv").open("w", newline="") as f:
        fields = ["index", "question", "A", "B", "C", "D", "answer", "category", "cycle_category", "image"]
        w = csv.DictWriter(f, fieldnames=fields, delimiter="\t")
        w.writeheader()
        for i in range(n):
            img = ((pyvips.Image.black(WIDTH, HEIGHT) + 40 + 20 * i).cast("uchar")
                   .draw_rect(255, 0, 0, WIDTH // 4, HEIGHT // 4, fill=True))
            data = base64.b64encode(img.write_to_buffer(".jpg[Q=80]")).decode()
            options = ["a", "b", "c", "d"]
            for c in range(4):
                rot = options[c:] + options[:c]
                w.writerow({"index": 4 * i + c, "question": f"Sign {i}?", **dict(zip("ABCD", rot, strict=True)),
                            "answer": "ABCD"[rot.index("b")], "category": "single", "cycle_category": f"c{c}",
                            "image": data})


def sweep(work: Path, concurrency: int, settings: list[str]) -> tuple[float, float]:
    cfg = {"name": "twi-8k", "seeds": 1,
           "run": {"max_concurrency": concurrency, "fsync": "never", "cache": {"path": str(work / "cache.sqlite")}},
           "models": [{"name": "sim-zoom", "provider": "sim", "policy": "tools", "tool_uses": 1, "default_reply": "B"}],
           "suites": [{"name": "hrbench", "options": {"path": str(work), "version": "8k"},
                       "settings": [{"name": s} for s in settings]}]}
    (work / "c.yaml").write_text(yaml.safe_dump(cfg))
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PROBE, str(work / "c.yaml"), str(work / "run")],
                          capture_output=True, text=True, timeout=1800, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1])["peak_rss_mb"]), time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", default="1,2,4,8")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--settings", default="direct,zoom")
    a = ap.parse_args()
    counts = [int(x) for x in a.images.split(",")]
    with tempfile.TemporaryDirectory(prefix="twi-8k-") as tmp:
        base: float | None = None
        print(f"{'images':>6} {'jobs':>5} {'peak RSS MB':>12} {'+MB/extra image':>16} {'vs decoded':>10} {'s':>6}")
        for n in counts:
            work = Path(tmp) / f"k{n}"
            build(work, n)
            peak, secs = sweep(work, a.concurrency, a.settings.split(","))
            jobs = 4 * n * len(a.settings.split(","))
            if base is None:
                base, first = peak, n
                print(f"{n:>6} {jobs:>5} {peak:>12.0f} {'-':>16} {'-':>10} {secs:>6.1f}")
                continue
            per = (peak - base) / (n - first)
            print(f"{n:>6} {jobs:>5} {peak:>12.0f} {per:>16.1f} {per / DECODED_MB:>9.2f}x {secs:>6.1f}")


if __name__ == "__main__":
    main()
