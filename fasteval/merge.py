"""Joining shard run folders into one: records, blobs and a manifest.

Two records of one job that disagree (different status, score or answer) are refused with the
job named: silently picking one would hide a non-deterministic or mixed-config sweep.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson

from fasteval.records import RECORDS, latest_by_job, read_manifest, write_manifest

_COMPARED = ("status", "score", "answer", "model", "suite", "setting", "task_id", "seed")


class MergeConflict(RuntimeError):
    pass


def merge_runs(out: Path, sources: list[Path]) -> dict[str, Any]:
    """Write ``out`` from ``sources``; returns counts. Refuses mixed configs and disagreeing duplicates."""
    manifests = []
    for src in sources:
        m = read_manifest(src)
        if m is None:
            raise MergeConflict(f"{src} is not a run folder (no manifest.json)")
        manifests.append(m)
    hashes = {m.get("config_hash") for m in manifests}
    if len(hashes) > 1:
        raise MergeConflict(f"the sources were run with different configs: {sorted(h or '' for h in hashes)}")
    merged: dict[str, dict[str, Any]] = {}
    for src in sources:
        for job_id, rec in latest_by_job([src / RECORDS]).items():
            prev = merged.get(job_id)
            if prev is None:
                merged[job_id] = rec
                continue
            if prev.get("status") == "ok" and rec.get("status") == "ok":
                diff = [k for k in _COMPARED if prev.get(k) != rec.get(k)]
                if diff:
                    raise MergeConflict(f"job {job_id} appears twice with different {', '.join(diff)} "
                                        f"(in {src}); refusing to pick one")
            elif rec.get("status") == "ok":
                merged[job_id] = rec
    out.mkdir(parents=True, exist_ok=True)
    if (out / RECORDS).exists() and (out / RECORDS).stat().st_size:
        raise MergeConflict(f"{out / RECORDS} already exists; merge into an empty folder")
    with (out / RECORDS).open("wb") as f:
        for rec in sorted(merged.values(), key=lambda r: (r["model"], r["suite"], r["setting"], r["task_id"], r["seed"])):
            f.write(orjson.dumps(rec) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    blobs = 0
    for src in sources:
        for p in (src / "blobs").glob("*/*"):
            dst = out / "blobs" / p.parent.name / p.name
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(p, dst)
                except OSError:
                    shutil.copy2(p, dst)
                blobs += 1
    plan_total = sum(int((m.get("plan") or {}).get("total", 0)) for m in manifests)
    base = dict(manifests[0])
    base.update({"shard": None, "merged_from": [str(s) for s in sources]})
    plan = dict(base.get("plan") or {})
    plan["total"] = plan_total
    for dim in ("model", "suite", "setting", "seed"):
        agg: dict[str, int] = {}
        for m in manifests:
            for k, v in ((m.get("plan") or {}).get(f"by_{dim}") or {}).items():
                agg[k] = agg.get(k, 0) + int(v)
        plan[f"by_{dim}"] = agg
    base["plan"] = plan
    write_manifest(out, base)
    return {"records": len(merged), "blobs_copied": blobs, "sources": len(sources)}
