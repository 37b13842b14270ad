"""What the run index's triggers cost on its write path: the writer's batched upserts, with and without.

    .venv/bin/python benchmarks/index_writes.py [--rows 100000] [--reruns 0.05] [--repeats 5] [--json]

The sweep's record writer adds rows to the index in transactions of up to 2,000 rows
(``RunIndex.append``). Here the same rows (unique jobs of 10 models × 5 seeds, about ``--reruns``
of them a second time as an error rerun ok, so the update trigger fires too) go through that call
into a fresh index file twice per repeat, sides alternating: as shipped (the aggregates' and the
resume set's triggers in place) and with the triggers dropped (what the index cost before them).
The figure is CPU time per row of the appending process (``time.process_time``: the least
disturbed by a shared machine), medians over repeats; the ratio is within one run.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
BATCH = 2000


def rows(n: int, reruns: float) -> list[tuple[Any, ...]]:
    sys.path.insert(0, str(ROOT))
    from fasteval.core.types import Job
    from fasteval.runfolder.index_rows import row_of_record
    from tests.runfolder.index_support import make_record

    rng = random.Random(1)
    out, offset = [], 0
    for i in range(n):
        job = Job(model=f"m{i % 10}", suite="jsonl", setting="default", task_id=f"t{i // 50:07d}", seed=(i // 10) % 5)
        first = make_record(rng, job, size=10)
        rerun = first.status != "ok" and rng.random() < reruns / 0.3  # 30 % of records are errors
        for rec in ([first, make_record(rng, job, ok=True, size=10)] if rerun else [first]):
            out.append(row_of_record(rec, offset, 2000))
            offset += 2000
    return out


def run(batches: list[tuple[Any, ...]], folder: Path, triggers: bool) -> float:
    from fasteval.runfolder.index import open_index
    from fasteval.runfolder.index_schema import drop_triggers

    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    (folder / "records.jsonl").write_bytes(b"")
    index = open_index(folder)
    if not triggers:
        drop_triggers(index._db)
    t0 = time.process_time()
    for i in range(0, len(batches), BATCH):
        batch = batches[i:i + BATCH]
        index.append(batch, batch[-1][-2] + 2000, batch[-1][-2], b"{}\n")
    spent = time.process_time() - t0
    index.close()
    return spent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--reruns", type=float, default=0.05, help="share of jobs written again (error, then ok)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    batches = rows(a.rows, a.reruns)
    figures: dict[str, list[float]] = {"triggers": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="fasteval-index-writes-") as tmp:
        for rep in range(a.repeats):
            for side in (("triggers", "none") if rep % 2 == 0 else ("none", "triggers")):
                figures[side].append(run(batches, Path(tmp) / side, side == "triggers") / len(batches) * 1e6)
    med = {k: statistics.median(v) for k, v in figures.items()}
    out = {"rows": len(batches), "us_per_row": {k: round(v, 2) for k, v in med.items()},
           "extra_us_per_row": round(med["triggers"] - med["none"], 2), "ratio": round(med["triggers"] / med["none"], 2),
           "runs": {k: [round(x, 2) for x in v] for k, v in figures.items()}}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"{out['rows']} rows in transactions of {BATCH}: {med['triggers']:.1f} us CPU per row with the triggers, "
              f"{med['none']:.1f} without ({out['ratio']}x, +{out['extra_us_per_row']} us)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
