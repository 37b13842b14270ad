"""What a checkpoint's fingerprint costs on multi-GB shards: content samples against a full hash.

    python benchmarks/fingerprint.py [--gb 4] [--shards 2] [--repeats 3] [--dir /tmp] [--json]

Writes a checkpoint of ``--gb`` GB of real (non-sparse) safetensors shards into a temporary
folder under ``--dir`` (removed at the end), then times, in the same run:

* **sampled** (``providers.local.fingerprint``, what the manifest records): the small files whole;
  of each shard its header and 64 KiB at 256 places plus the first and middle 4 KiB of every tensor;
* **names and sizes** (the fingerprint before content sampling: blind to same-size rewrites);
* **full sha256** of every byte (the baseline a content hash costs).

Each is timed cold (the shards' pages dropped from the page cache with ``posix_fadvise``
DONTNEED before each repeat) and warm. Prints medians and the ratios to the full hash.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from providers.local.fingerprint import checkpoint_identity  # noqa: E402

TENSOR_MB = 64


def write_checkpoint(folder: Path, gb: float, shards: int) -> None:
    """``shards`` safetensors files of ``gb`` GB together, tensors of 64 MB of pseudo-random bytes."""
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bench"}')
    per_shard = int(gb * 1e9 / shards) // (TENSOR_MB << 20)
    chunk = os.urandom(TENSOR_MB << 20)
    weight_map = {}
    for s in range(shards):
        name = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        header = {f"layers.{s}.{i}.weight": {"dtype": "BF16", "shape": [TENSOR_MB << 19],
                                               "data_offsets": [i * (TENSOR_MB << 20), (i + 1) * (TENSOR_MB << 20)]}
                  for i in range(per_shard)}
        weight_map.update(dict.fromkeys(header, name))
        raw = json.dumps(header).encode()
        with (folder / name).open("wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            for i in range(per_shard):
                f.write(chunk[i % 7:] + chunk[:i % 7])  # each tensor's bytes differ
            f.flush()
            os.fsync(f.fileno())
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))


def drop_cache(folder: Path) -> None:
    for p in folder.iterdir():
        fd = os.open(p, os.O_RDONLY)
        try:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def full_sha256(folder: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.iterdir()):
        with p.open("rb") as f:
            while block := f.read(8 << 20):
                h.update(block)
    return h.hexdigest()


def timed(fn: Callable[[], Any], folder: Path, repeats: int, cold: bool) -> float:
    runs = []
    for _ in range(repeats):
        if cold:
            drop_cache(folder)
        t0 = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gb", type=float, default=4.0)
    ap.add_argument("--shards", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=tempfile.gettempdir())
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="fasteval-fingerprint-", dir=a.dir))
    try:
        folder = tmp / "checkpoint-1"
        t0 = time.perf_counter()
        write_checkpoint(folder, a.gb, a.shards)
        size = sum(p.stat().st_size for p in folder.iterdir())
        written_s = time.perf_counter() - t0
        ways: dict[str, Callable[[], Any]] = {
            "sampled": lambda: checkpoint_identity(str(folder)),
            "names_and_sizes": lambda: checkpoint_identity(str(folder), legacy=True),
            "full_sha256": lambda: full_sha256(folder),
        }
        out: dict[str, Any] = {"bytes": size, "shards": a.shards, "repeats": a.repeats, "write_s": round(written_s, 2)}
        for name, fn in ways.items():
            out[name] = {"cold_s": timed(fn, folder, a.repeats, cold=True),
                         "warm_s": timed(fn, folder, a.repeats, cold=False)}
        full = out["full_sha256"]
        for name in ways:
            out[name]["cold_vs_full"] = out[name]["cold_s"] / full["cold_s"]
            out[name]["warm_vs_full"] = out[name]["warm_s"] / full["warm_s"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    print(f"{size / 1e9:.2f} GB in {a.shards} shards (written in {written_s:.1f} s); medians of {a.repeats}")
    print(f"{'fingerprint':<18} {'cold s':>8} {'warm s':>8} {'cold/full':>10} {'warm/full':>10}")
    for name in ways:
        r = out[name]
        print(f"{name:<18} {r['cold_s']:>8.3f} {r['warm_s']:>8.3f} {r['cold_vs_full']:>10.4f} {r['warm_vs_full']:>10.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
