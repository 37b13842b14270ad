"""Image pipeline benchmark: decode -> crop -> resize -> JPEG q85, pyvips vs Pillow.

Two inputs are generated in a temp dir: a 4000x3000 JPEG (a typical photo) and a 6944x9280 PNG
(the largest TIR-Bench image). Each (library, input) runs in its own subprocess so its peak RSS
(ru_maxrss) is its own; tracemalloc would not see libvips' native buffers. Times are medians.

    .venv/bin/python benchmarks/images.py [--json] [--repeats N]
"""

from __future__ import annotations

import argparse
import io
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

INPUTS = {"jpeg_4000x3000": (4000, 3000, "jpg"), "png_6944x9280": (6944, 9280, "png")}
LONG_SIDE = 1024  # resized crop fits in 1024x1024


def _make_inputs(folder: Path) -> dict[str, Path]:
    """Photo-like content: smooth gradients plus noise, so codecs do real work."""
    import pyvips

    paths = {}
    for name, (w, h, ext) in INPUTS.items():
        xyz = pyvips.Image.xyz(w, h)
        x, y = xyz[0], xyz[1]
        base = (x * (255 / w)).bandjoin([y * (255 / h), (x + y) * (255 / (w + h))])
        img = (base + pyvips.Image.gaussnoise(w, h, sigma=12)).cast("uchar").copy(interpretation="srgb")
        path = folder / f"{name}.{ext}"
        if ext == "jpg":
            img.jpegsave(str(path), Q=92)
        else:
            img.pngsave(str(path), compression=1)
        paths[name] = path
    return paths


def _crop_box(w: int, h: int) -> tuple[int, int, int, int]:
    """The central half of each side, as a zoom would ask for."""
    return w // 4, h // 4, w // 4 + w // 2, h // 4 + h // 2


def _fit(w: int, h: int) -> tuple[int, int]:
    s = min(1.0, LONG_SIDE / max(w, h))
    return max(1, round(w * s)), max(1, round(h * s))


def run_pyvips(data: bytes) -> bytes:
    from fasteval.images import crop, decode, jpeg_bytes, resize

    img = decode(data)
    left, top, right, bottom = _crop_box(img.width, img.height)
    region = crop(img, (left, top, right, bottom))
    return jpeg_bytes(resize(region, *_fit(region.width, region.height)), 85)


def run_pillow(data: bytes) -> bytes:
    from PIL import Image

    Image.MAX_IMAGE_PIXELS = None
    with Image.open(io.BytesIO(data)) as im:
        img = im.convert("RGB")
    region = img.crop(_crop_box(img.width, img.height))
    out = region.resize(_fit(region.width, region.height), Image.Resampling.LANCZOS)
    buf = io.BytesIO()
    out.save(buf, "JPEG", quality=85)
    return buf.getvalue()


def _worker(lib: str, path: str, repeats: int) -> dict[str, Any]:
    """One library on one input, in this (fresh) process."""
    fn = run_pyvips if lib == "pyvips" else run_pillow
    if lib == "pyvips":
        import pyvips

        import fasteval.images  # noqa: F401  (import cost stays in the baseline)

        pyvips.cache_set_max(0)  # no operation cache: every repeat decodes again
    else:
        import PIL.Image  # noqa: F401

    data = Path(path).read_bytes()
    base_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    times = []
    out = b""
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn(data)
        times.append(time.perf_counter() - t0)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"s": statistics.median(times), "peak_mb": peak_mb, "base_mb": base_mb, "out_bytes": len(out)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--worker", nargs=2, metavar=("LIB", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        print(json.dumps(_worker(args.worker[0], args.worker[1], args.repeats)))
        return

    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = _make_inputs(Path(tmp))
        for name, path in paths.items():
            row: dict[str, float] = {"input_mb": round(path.stat().st_size / 1e6, 2)}
            for lib in ("pyvips", "pillow"):
                cmd = [sys.executable, __file__, "--worker", lib, str(path), "--repeats", str(args.repeats)]
                r = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
                row[f"{lib}_s"] = round(r["s"], 3)
                row[f"{lib}_peak_mb"] = round(r["peak_mb"], 1)
                row[f"{lib}_base_mb"] = round(r["base_mb"], 1)
                row[f"{lib}_delta_mb"] = round(r["peak_mb"] - r["base_mb"], 1)
            results[name] = row

    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"decode -> crop central half -> resize to fit {LONG_SIDE} -> JPEG q85; median of {args.repeats}")
    print("peak = subprocess peak RSS; +work = peak minus RSS after imports and reading the file")
    head = f"{'input':<16}{'pyvips s':>10}{'pillow s':>10}{'speedup':>9}"
    print(head + f"{'pyvips MB (+work)':>20}{'pillow MB (+work)':>20}")
    for name, r in results.items():
        vips_mb = f"{r['pyvips_peak_mb']:.0f} (+{r['pyvips_delta_mb']:.0f})"
        pil_mb = f"{r['pillow_peak_mb']:.0f} (+{r['pillow_delta_mb']:.0f})"
        speedup = r["pillow_s"] / r["pyvips_s"]
        print(
            f"{name:<16}{r['pyvips_s']:>10.3f}{r['pillow_s']:>10.3f}{speedup:>8.1f}x{vips_mb:>20}{pil_mb:>20}"
        )


if __name__ == "__main__":
    main()
