"""Image-heavy throughput: ``fasteval run`` against the raw client doing the same image work.

    .venv/bin/python benchmarks/images_throughput.py [--image photo|noise] [--image-kb 500] [--tool-image]
        [--local-media] [--n 2000] [--k 3] [--latency-ms 100] [--concurrency 512] [--repeats 3] [--json]

The workload of benchmarks/throughput.py (N trajectories, K tool rounds, the whole history
re-sent each round, sim in its own process) with real image sizes:

* ``--image photo --image-kb N``: a photo-like JPEG of about N KB in the first user message
  (``noise``: an incompressible PNG of about N KB); the ``calculator`` tool.
* ``--tool-image``: the ``image_zoom_in_tool`` instead; every round returns a crop of the
  original (the sim asks for the box [0, 0, 1000, 1000]), so each request carries the image plus
  every crop so far. The raw client cuts and encodes the same crop with pyvips in a thread and
  sends it the same way (tool message, then a user message with the image), so both sides do
  identical image work; ours also stores each crop in the run's blob store, as it must.
* ``--local-media``: the sim is started with ``--allowed-local-media-path``; ours sets the
  model's ``local_media: true`` and sends ``file://`` URLs of its blob store, the raw client
  sends ``file://`` URLs of the image and of the crops it writes.

Same ``--json`` shape as throughput.py: {ours, raw, params}, each side with traj_per_s,
efficiency, cpu_ms_per_traj, peak_rss_mb (medians over repeats, sides alternating). The
machine is shared: compare the ratios of one run, not figures across runs.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.append(str(Path(__file__).resolve().parent))  # when imported, not run as a script

from throughput import _median, run_ours, run_raw  # noqa: E402


def make_photo(path: Path, kb: int) -> int:
    """A JPEG with photo-like statistics (smooth shapes, texture, grain) of about ``kb`` KB."""
    import numpy as np
    from PIL import Image

    target = kb * 1024
    side = 512.0
    data = b""
    for _ in range(6):
        w, h = int(side * 4 / 3), int(side)
        rng = np.random.default_rng(1)
        y, x = np.mgrid[0:h, 0:w].astype(np.float32)
        base = np.stack([128 + 90 * np.sin(x / (w / 3.1) + c) * np.cos(y / (h / 2.3) - c) for c in (0.0, 1.1, 2.3)], -1)
        texture = 25 * np.sin(x / 7.0)[..., None] * np.cos(y / 11.0)[..., None]
        grain = rng.normal(0, 9, size=(h, w, 3))
        pixels = np.clip(base + texture + grain, 0, 255).astype(np.uint8)


        buf = io.BytesIO()
        Image.fromarray(pixels, "RGB").save(buf, "JPEG", quality=88)
        data = buf.getvalue()
        if abs(len(data) - target) < 0.05 * target:
            break
        side *= (target / len(data)) ** 0.5
    path.write_bytes(data)
    return len(data)


def make_noise(path: Path, kb: int) -> int:
    """Incompressible RGB noise as PNG: about 3 bytes per pixel."""
    import numpy as np
    from PIL import Image

    side = max(16, int((kb * 1024 / 3) ** 0.5))
    pixels = np.random.default_rng(0).integers(0, 256, size=(side, side, 3), dtype=np.uint8)
    Image.fromarray(pixels, "RGB").save(path, "PNG")
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--image", choices=("photo", "noise"), default="photo")
    ap.add_argument("--image-kb", type=int, default=500, help="approximate image size (default 500)")
    ap.add_argument("--tool-image", action="store_true", help="zoom tool: each round returns a crop")
    ap.add_argument("--local-media", action="store_true", help="file:// image URLs instead of data URLs")
    ap.add_argument("--n", type=int, default=2000, help="trajectories per side (default 2000)")
    ap.add_argument("--k", type=int, default=3, help="tool rounds per trajectory (default 3)")
    ap.add_argument("--latency-ms", type=float, default=100.0, help="sim latency per model call (default 100)")
    ap.add_argument("--concurrency", type=int, default=512, help="trajectories in flight (default 512)")
    ap.add_argument("--repeats", type=int, default=3, help="runs per side; medians are reported (default 3)")
    ap.add_argument("--sides", default="ours,raw", help="comma list of sides to run (default ours,raw)")
    ap.add_argument("--json", action="store_true", help="print one JSON object {ours, raw, params}")
    a = ap.parse_args(argv)
    sides = [s for s in a.sides.split(",") if s]

    with tempfile.TemporaryDirectory(prefix="fasteval-images-") as tmp:
        work = Path(tmp)
        image = work / ("image.jpg" if a.image == "photo" else "image.png")
        image_bytes = (make_photo if a.image == "photo" else make_noise)(image, a.image_kb)
        tools = ("image_zoom_in_tool",) if a.tool_image else ("calculator",)
        sim_args: tuple[str, ...] = ("--allowed-local-media-path", str(work)) if a.local_media else ()
        model_extra = {"local_media": True} if a.local_media else None
        raw_args: list[str] = ["--tool-image"] if a.tool_image else []
        runs: dict[str, list[dict[str, Any]]] = {s: [] for s in sides}
        for i in range(a.repeats):
            for side in sides if i % 2 == 0 else list(reversed(sides)):
                if side == "ours":
                    r = run_ours(work, image, a.n, a.k, a.latency_ms, a.concurrency, tools=tools,
                                 model_extra=model_extra, sim_args=sim_args)
                else:
                    extra = list(raw_args)
                    if a.local_media:
                        crops = Path(tempfile.mkdtemp(prefix="raw-crops-", dir=work))
                        extra += ["--local-media", str(crops)]
                    r = run_raw(image, a.n, a.k, a.latency_ms, a.concurrency, raw_args=tuple(extra),
                                sim_args=sim_args)
                runs[side].append(r)
                if not a.json:
                    print(f"  repeat {i + 1} {side:>4}: {r['traj_per_s']:7.1f} traj/s  "
                          f"{r['cpu_ms_per_traj']:6.2f} ms CPU/traj  {r['peak_rss_mb']:6.0f} MB", file=sys.stderr)
    med = {s: _median(runs[s]) for s in sides}
    params = {"n": a.n, "k": a.k, "latency_ms": a.latency_ms, "concurrency": a.concurrency, "repeats": a.repeats,
              "image": a.image, "image_bytes": image_bytes, "tool_image": a.tool_image, "local_media": a.local_media,
              "ideal_traj_per_s": a.concurrency / ((a.k + 1) * a.latency_ms / 1000), "cpus": os.cpu_count()}
    if a.json:
        print(json.dumps({**med, "params": params}))
        return 0
    mode = ("crop per round" if a.tool_image else "calculator") + (", file:// URLs" if a.local_media else "")
    print(f"N={a.n} K={a.k} L={a.latency_ms:g} ms C={a.concurrency} {a.image} {image_bytes / 1024:.0f} KB, {mode}; "
          f"ideal={params['ideal_traj_per_s']:.1f} traj/s, medians of {a.repeats} on {os.cpu_count()} CPUs")
    print(f"{'':6}{'traj/s':>9}{'effic.':>8}{'CPU ms/traj':>13}{'(steady)':>10}{'peak RSS MB':>13}"
          f"{'sim CPU ms/traj':>17}")
    for name, r in med.items():
        print(f"{name:6}{r['traj_per_s']:9.1f}{r['efficiency']:8.2f}{r['cpu_ms_per_traj']:13.2f}"
              f"{r['cpu_ms_per_traj_steady']:10.2f}{r['peak_rss_mb']:13.0f}{r['sim_cpu_ms_per_traj']:17.2f}")
    if "ours" in med and "raw" in med:
        ours, raw = med["ours"], med["raw"]
        print(f"ours/raw: throughput {ours['traj_per_s'] / raw['traj_per_s']:.2f}x, "
              f"CPU/traj {ours['cpu_ms_per_traj'] / raw['cpu_ms_per_traj']:.2f}x, "
              f"peak RSS {ours['peak_rss_mb'] / raw['peak_rss_mb']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
