"""A Slurm sweep's folder: ``RUN/slurm/jobs.json`` (what was submitted), the shards' run
folders under ``RUN/shards/<i>``, and the merge of those shards into ``RUN`` itself.

The merge builds a complete run folder beside the target (fasteval.runfolder.merge is atomic), then moves
its entries into ``RUN`` with ``manifest.json`` last: a reader sees a run folder only once every
record is in place, and a merge killed half-way is simply done again.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import DamagedRunFolder
from fasteval.runfolder.merge import merge_runs
from fasteval.runfolder.records import MANIFEST, read_manifest
from fasteval.view.report import status

JOBS = "jobs.json"


def slurm_dir(run_dir: Path) -> Path:
    return run_dir / "slurm"


def jobs_file(run_dir: Path) -> Path:
    return slurm_dir(run_dir) / JOBS


def read_jobs(run_dir: Path) -> dict[str, Any] | None:
    """What was submitted, or None; DamagedRunFolder (exit 2) for a file fasteval did not write."""
    p = jobs_file(run_dir)
    if not p.exists():
        return None
    try:
        data = orjson.loads(p.read_bytes())
    except orjson.JSONDecodeError as e:
        raise DamagedRunFolder(f"{p} is not valid JSON ({e})") from None
    if not isinstance(data, dict) or not isinstance(data.get("options"), dict):
        raise DamagedRunFolder(f"{p} is not a Slurm submission fasteval wrote (no options)")
    return data


def write_jobs(run_dir: Path, data: dict[str, Any]) -> None:
    p = slurm_dir(run_dir) / JOBS
    tmp = p.with_suffix(".tmp")
    tmp.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
    tmp.chmod(0o600)  # resume runs what this file names: it is the user's alone (fasteval.slurm.recorded)
    os.replace(tmp, p)


def shard_dirs(run_dir: Path, shards: int) -> list[Path]:
    return [run_dir / "shards" / str(i) for i in range(shards)]


def shard_progress(shard: Path) -> dict[str, Any]:
    """done / error / total / remaining from the shard's run index (zeros before it started)."""
    if read_manifest(shard) is None:
        return {"started": False, "total": None, "done": 0, "error": 0, "remaining": None}
    st = status(shard)
    return {"started": True, **{k: st[k] for k in ("total", "done", "error", "remaining")}}


def last_log_line(path: Path, limit: int = 64 * 1024) -> str | None:
    if not path.exists():
        return None
    with path.open("rb") as f:
        f.seek(max(0, path.stat().st_size - limit))
        lines = [ln for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1][:300] if lines else None


def merge_shards(run_dir: Path, shards: int) -> dict[str, Any]:
    """Merge every shard into ``run_dir`` (which also holds slurm/ and shards/)."""
    sources = shard_dirs(run_dir, shards)
    missing = [str(s) for s in sources if read_manifest(s) is None]
    if missing:
        raise FileNotFoundError(f"shards never started: {', '.join(missing)}")
    staging = run_dir / ".slurm-merge"
    shutil.rmtree(staging, ignore_errors=True)
    counts = merge_runs(staging, sources)
    # Drop what an earlier merge left (manifest first, so the folder stops looking finished).
    (run_dir / MANIFEST).unlink(missing_ok=True)
    for entry in staging.iterdir():
        if entry.name == MANIFEST:
            continue
        target = run_dir / entry.name
        if target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        os.replace(entry, target)
    os.replace(staging / MANIFEST, run_dir / MANIFEST)
    staging.rmdir()
    return counts
