"""Joining shard run folders into one: records, blobs and a manifest.

Two records of one job that disagree (different status, score or answer) are refused with the
job named: silently picking one would hide a non-deterministic or mixed-config sweep.

Merging streams: each source's run index says which line is each job's latest record, the
output is written in (model, suite, setting, task, seed) order by a k-way merge of the sources'
sorted rows, and each chosen line is copied byte for byte. Only a small tuple per job is held.

A merge is atomic: everything is built in a hidden folder beside the target
(``.<name>.merge-<pid>``) and renamed into place at the end. A merge killed half-way leaves only
that folder, which the next merge into the same target removes once its process is gone.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.blobs import pid_alive
from fasteval.records import RECORDS, read_manifest, write_manifest
from fasteval.runindex import COLUMNS, RunIndex, open_index

_COMPARED = ("status", "score", "answer", "model", "suite", "setting", "task_id", "seed")
_TMP_TAG = ".merge-"


class MergeConflict(RuntimeError):
    pass


def _clean_stale(out: Path) -> None:
    """Remove what merges into ``out`` that were killed left behind (their process is gone)."""
    for p in out.parent.glob(f".{out.name}{_TMP_TAG}*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _choose(indexes: list[RunIndex], sources: list[Path]) -> dict[str, int]:
    """Each job's chosen line, packed as ``offset << 9 | ok << 8 | source`` (one int per job).

    Refuses two ok records of one job that disagree.
    """
    if len(indexes) > 256:
        raise MergeConflict(f"merge at most 256 run folders at once (got {len(indexes)}); merge in steps")
    chosen: dict[str, int] = {}
    for i, index in enumerate(indexes):
        for job_id, status, offset in index.select(("job_id", "status", "byte_offset")):
            ok = status == "ok"
            prev = chosen.get(job_id)
            if prev is not None:
                if not ok:
                    continue
                if prev & 256:
                    # Rare (overlapping shards): compare the two full records.
                    a = indexes[prev & 255].read_record(job_id) or {}
                    b = index.read_record(job_id) or {}
                    diff = [k for k in _COMPARED if a.get(k) != b.get(k)]
                    if diff:
                        raise MergeConflict(f"job {job_id} appears twice with different {', '.join(diff)} "
                                            f"(in {sources[i]}); refusing to pick one")
                    continue
            chosen[job_id] = offset << 9 | ok << 8 | i
    return chosen


def _sorted_rows(indexes: list[RunIndex]) -> Iterator[tuple[int, tuple[Any, ...]]]:
    """Every source's rows as (source, index row), merged in (model, suite, setting, task, seed) order."""
    def tagged(i: int, index: RunIndex) -> Iterator[tuple[int, tuple[Any, ...]]]:
        for row in index.select(COLUMNS, order="key"):
            yield i, row

    return heapq.merge(*(tagged(i, ix) for i, ix in enumerate(indexes)), key=lambda t: t[1][1:6])


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
    if out.exists() and any(out.iterdir()):
        raise MergeConflict(f"{out} already exists and is not empty; merge into a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(out)
    indexes = [open_index(src) for src in sources]
    tmp = out.parent / f".{out.name}{_TMP_TAG}{os.getpid()}"
    try:
        chosen = _choose(indexes, sources)  # conflicts surface before anything is written
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        written = _write_records(tmp, indexes, chosen)
        for index in indexes:
            index.close()
        blobs = _link_blobs(tmp, sources)
        write_manifest(tmp, _merged_manifest(manifests, sources))
        with contextlib.suppress(FileNotFoundError):
            out.rmdir()  # an empty target folder the user made
        os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        for index in indexes:
            index.close()
    _fsync_dir(out.parent)
    return {"records": written, "blobs_copied": blobs, "sources": len(sources)}


def _write_records(tmp: Path, indexes: list[RunIndex], chosen: dict[str, int]) -> int:
    """Copy each chosen line in key order, indexing the new file as it grows (no re-read)."""
    written = pos = 0
    with open_index(tmp) as out_index, (tmp / RECORDS).open("wb") as f:
        batch: list[tuple[Any, ...]] = []
        first: bytes | None = None
        line = b""
        for i, row in _sorted_rows(indexes):
            offset, length = row[-2], row[-1]
            if chosen.get(row[0], -1) & ~256 != (offset << 9 | i):
                continue
            line = indexes[i].read_line(offset, length)
            f.write(line)
            batch.append((*row[:-2], pos, length))
            first = line if pos == 0 else first
            pos += length
            written += 1
            if len(batch) >= 5000:
                f.flush()  # the index never points past what the file holds
                out_index.append(batch, pos, pos - len(line), line, first_line=first)
                batch, first = [], None
        f.flush()
        if batch:
            out_index.append(batch, pos, pos - len(line), line, first_line=first)
        os.fsync(f.fileno())
    return written


def _link_blobs(dst_run: Path, sources: list[Path]) -> int:
    blobs = 0
    for src in sources:
        for p in (src / "blobs").glob("*/*"):
            if ".tmp-" in p.name:
                continue  # a blob write that a killed sweep never finished
            dst = dst_run / "blobs" / p.parent.name / p.name
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(p, dst)
                except OSError:
                    shutil.copy2(p, dst)
                blobs += 1
    return blobs


def _merged_manifest(manifests: list[dict[str, Any]], sources: list[Path]) -> dict[str, Any]:
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
    return base


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
