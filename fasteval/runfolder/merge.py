"""Joining shard run folders into one: records, blobs and a manifest.

Two records of one job that disagree (different status, score or answer) are refused with the
job named: silently picking one would hide a non-deterministic or mixed-config sweep.

Merging costs what copying the bytes costs: each source's run index says which line is each
job's latest record, the merged ``records.jsonl`` is those lines, source after source in file
order, copied in contiguous byte ranges by the kernel, and the merged index is computed from
the sources' indexes in SQL (``fasteval.runfolder.merged_index``). No line is parsed, except the
records of a job that several sources hold, which are compared.

A merge is atomic: everything is built in a hidden folder beside the target
(``.<name>.merge-<pid>``) and renamed into place at the end. A merge killed half-way leaves only
that folder, which the next merge into the same target removes once its process is gone.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import UsageError
from fasteval.runfolder.blobs import pid_alive
from fasteval.runfolder.control import append_trace, read_trace
from fasteval.runfolder.index import RunIndex, RunIndexError, open_index
from fasteval.runfolder.merged_index import Candidate, Chooser, write_merged
from fasteval.runfolder.names import BLOBS
from fasteval.runfolder.records import read_manifest, write_manifest

_COMPARED = ("status", "score", "answer", "model", "suite", "setting", "task_id", "seed")
_TMP_TAG = ".merge-"


class MergeConflict(RuntimeError, UsageError):
    """Sources that cannot merge (a job that differs between them, a missing folder): one line, exit 2."""


def _clean_stale(out: Path) -> None:
    """Remove what merges into ``out`` that were killed left behind (their process is gone)."""
    for p in out.parent.glob(f".{out.name}{_TMP_TAG}*"):
        pid = p.name.rsplit("-", 1)[-1]
        if pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(p, ignore_errors=True)


def _chooser(indexes: list[RunIndex], sources: list[Path]) -> Chooser:
    """A job in several sources keeps the first source's ok record, else the first source's record;
    two ok records that disagree refuse the merge."""
    def record(c: Candidate) -> dict[str, Any]:
        rec = orjson.loads(indexes[c.source].read_line(c.offset, c.length))
        if not isinstance(rec, dict):
            raise RunIndexError(f"{sources[c.source]}: byte {c.offset} is not a record; run `fasteval index rebuild`")
        return rec

    def choose(job_id: str, candidates: list[Candidate]) -> int:
        oks = [c for c in candidates if c.ok]
        if not oks:
            return candidates[0].source
        first = record(oks[0])
        for c in oks[1:]:
            other = record(c)
            diff = [k for k in _COMPARED if first.get(k) != other.get(k)]
            if diff:
                raise MergeConflict(f"job {job_id} appears twice with different {', '.join(diff)} "
                                    f"(in {sources[c.source]}); refusing to pick one")
        return oks[0].source

    return choose


ConfigDiff = Callable[[dict[str, Any], dict[str, Any]], list[str]]
"""What differs between two configs, a line each (``fasteval.config.load.config_diff``, given from above)."""


def merge_runs(out: Path, sources: list[Path], config_diff: ConfigDiff | None = None) -> dict[str, Any]:
    """Write ``out`` from ``sources``; returns counts. Refuses mixed configs (saying what differs,
    given ``config_diff``) and disagreeing duplicates."""
    manifests = []
    for src in sources:
        m = read_manifest(src)
        if m is None:
            raise MergeConflict(f"{src} is not a run folder (no manifest.json)")
        manifests.append(m)
    if len({m.get("config_hash") for m in manifests}) > 1:
        raise MergeConflict(_mixed_configs(manifests, sources, config_diff))
    if out.exists() and any(out.iterdir()):
        raise MergeConflict(f"{out} already exists and is not empty; merge into a new or empty folder")
    out.parent.mkdir(parents=True, exist_ok=True)
    _clean_stale(out)
    indexes = [open_index(src) for src in sources]
    recorded = [index.count() for index in indexes]  # before the merge: how far each source got
    tmp = out.parent / f".{out.name}{_TMP_TAG}{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
        written = write_merged(tmp, indexes, _chooser(indexes, sources))
        for index in indexes:
            index.close()
        blobs = _link_blobs(tmp, sources)
        _merge_traces(tmp, sources)
        write_manifest(tmp, _merged_manifest(manifests, sources, recorded))
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


def _mixed_configs(manifests: list[dict[str, Any]], sources: list[Path], config_diff: ConfigDiff | None) -> str:
    """Each source whose config differs from the first source's, with what differs (20 lines at most)."""
    lines = [f"the sources were run with different configs (against {sources[0]}):"]
    first = manifests[0]
    for m, src in zip(manifests[1:], sources[1:], strict=True):
        if m.get("config_hash") == first.get("config_hash"):
            continue
        changes = config_diff(first.get("config") or {}, m.get("config") or {}) if config_diff else []
        lines.append(f"  {src}:" + ("" if changes else f" config hash {m.get('config_hash')} vs "
                                                       f"{first.get('config_hash')}"))
        lines += [f"    {c}" for c in changes[:20]] + ([f"    and {len(changes) - 20} more"] if len(changes) > 20 else [])
    return "\n".join(lines)


def _merge_traces(dst_run: Path, sources: list[Path]) -> None:
    """Every source's ``fasteval ctl`` changes, in time order, each naming its source: the merged
    report must still say which figures were measured under changed limits."""
    entries = [{**e, "source": str(src)} for src in sources for e in read_trace(src)]
    for entry in sorted(entries, key=lambda e: str(e.get("at", ""))):
        append_trace(dst_run, entry)


def _link_blobs(dst_run: Path, sources: list[Path]) -> int:
    blobs = 0
    for src in sources:
        for p in (src / BLOBS).glob("*/*"):
            if ".tmp-" in p.name:
                continue  # a blob write that a killed sweep never finished
            dst = dst_run / BLOBS / p.parent.name / p.name
            if not dst.exists():
                dst.parent.mkdir(parents=True, exist_ok=True)
                try:
                    os.link(p, dst)
                except OSError:
                    shutil.copy2(p, dst)
                blobs += 1
    return blobs


def _merged_manifest(manifests: list[dict[str, Any]], sources: list[Path], recorded: list[int]) -> dict[str, Any]:
    plan_total = sum(int((m.get("plan") or {}).get("total", 0)) for m in manifests)
    base = dict(manifests[0])
    base.update({"shard": None, "merged_from": [str(s) for s in sources]})
    # The merged folder's one history entry says how the merge went: sources with jobs of their plan
    # left make a merged run that is partial, and readers name them (fasteval.view.completion).
    partial = [f"{src}: {n} of {total}{f', {how}' if how else ''}" for m, src, n in zip(manifests, sources, recorded,
                                                                                         strict=True)
               if (total := int((m.get("plan") or {}).get("total", 0))) > n
               for how in [_last_ending(m)]]
    ended: dict[str, Any] = {"at": datetime.now(UTC).isoformat(), "how": "merged"}
    if partial:
        ended["why"] = "; ".join(partial)
    base["history"] = [{"merged": ended["at"], "ended": ended}]
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


def _last_ending(manifest: dict[str, Any]) -> str | None:
    """How a source's last sweep ended, as its manifest's history says (None: it never said)."""
    history = manifest.get("history")
    last = history[-1] if isinstance(history, list) and history and isinstance(history[-1], dict) else {}
    ended = last.get("ended")
    return str(ended.get("how")) if isinstance(ended, dict) and ended.get("how") else None


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
