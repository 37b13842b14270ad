"""An HR-Bench 8K sweep's peak RSS stays flat as the release grows.

Each 7680×4320 image is ~100 MB decoded. The loader streams the TSV into the blob store and
the image layer decodes lazily (the crop of the zoom tool, the encoder's bounded cache), so a
release with 4 distinct 8K images may cost only a little more than one with 1 image. Each sweep
runs in its own interpreter, which reports its peak RSS (VmHWM) when done.
"""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
import releases as rel
import yaml

# The benchmark's sweep child and image size, read from its file (benchmarks/ is not a package).
_BENCH = runpy.run_path(str(Path(__file__).parents[3] / "benchmarks" / "twi_8k_memory.py"))
PROBE: str = _BENCH["PROBE"]
DECODED_MB: float = _BENCH["DECODED_MB"]


def _sweep_peak_mb(work: Path, n_images: int) -> float:
    work.mkdir(parents=True)
    rows: list[dict[str, object]] = []
    for i in range(n_images):
        question = (f"What is written on sign {i}?", ["a", "b", "c", "d"], 1, "single" if i % 2 else "cross")
        for row in rel.hrbench_rows(rel.jpeg(7680, 4320, 40 + 30 * i), [question]):
            rows.append({**row, "index": len(rows)})
    rel.write_tsv(work / "hr_bench_8k.tsv", rows)
    cfg = {"name": "twi-8k", "seeds": 1,
           "run": {"max_concurrency": 2, "fsync": "never", "cache": {"path": str(work / "cache.sqlite")}},
           "models": [{"name": "sim-zoom", "provider": "sim", "policy": "tools", "tool_uses": 1,
                       "default_reply": "B"}],
           "suites": [{"name": "hrbench", "options": {"path": str(work), "version": "8k"},
                       "settings": [{"name": "zoom"}]}]}
    (work / "c.yaml").write_text(yaml.safe_dump(cfg))
    done = subprocess.run([sys.executable, "-c", PROBE, str(work / "c.yaml"), str(work / "run")],
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    return float(result["peak_rss_mb"])


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmHWM from /proc")
def test_8k_sweep_peak_rss_is_flat_in_the_number_of_images(tmp_path: Path) -> None:
    one = _sweep_peak_mb(tmp_path / "one", 1)
    four = _sweep_peak_mb(tmp_path / "four", 4)
    print(f"peak RSS: 1 image {one:.0f} MB, 4 images {four:.0f} MB (one decoded image: {DECODED_MB:.0f} MB)")
    # Three more 8K images (16 zoom jobs instead of 4) must cost less than half their decoded size.
    assert four - one < 0.5 * 3 * DECODED_MB
    assert four < 4 * DECODED_MB + 250
