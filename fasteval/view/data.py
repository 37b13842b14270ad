"""Every read of a run folder the viewer, the HTML report and ``show`` make, in one place.

Pages never touch files: they render what these functions return (the same dicts the
``/api`` routes serve). Job lists page from the run index, one full record is read by its
offset, and the summary numbers come from ``fasteval.view.report.report`` itself, so the viewer
and ``fasteval report --format json`` cannot disagree. Nothing here holds every trajectory:
the plot statistics are folded one record at a time and cached until ``records.jsonl`` grows.
"""

from __future__ import annotations

import bisect
import os
import re
import sqlite3
import threading
from collections import Counter, OrderedDict, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.errors import UnsafeRunFolder
from fasteval.runfolder.blobs import open_blob
from fasteval.runfolder.control import read_trace
from fasteval.runfolder.index import RunIndex, open_index
from fasteval.runfolder.index_rows import JobRow
from fasteval.runfolder.names import BLOBS
from fasteval.runfolder.records import RECORDS, read_manifest
from fasteval.runfolder.safe_open import open_nofollow
from fasteval.view.report import report
from fasteval.view.shape import viewable

SORT_KEYS = ("task_id", "model", "suite", "setting", "seed", "status", "score", "error_kind", "termination",
             "rounds", "tool_calls", "latency_s")
DEEP_PAGE = 5000
"""Past this many jobs, /jobs pages from the cached match list instead of SQL OFFSET."""
FACETS = ("model", "suite", "setting", "seed", "status", "error_kind")
_REF_RE = re.compile(r"^[0-9a-f]{64}$")
_REFERENCE_KEYS = ("reference", "gold", "expected", "ground_truth", "answer_ref")


class NotFound(LookupError):
    """A run, job or image the caller asked for does not exist (HTTP 404, CLI exit 2)."""


@dataclass(slots=True)
class JobQuery:
    """The /jobs filters: equality on index columns, a score range, a text search; sort; page."""

    run: str | None = None
    model: str | None = None
    suite: str | None = None
    setting: str | None = None
    seed: int | None = None
    status: str | None = None
    error_kind: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    q: str | None = None
    sort: str = ""
    desc: bool = False
    page: int = 1
    per_page: int = 50

    def index_filters(self) -> dict[str, Any]:
        return {k: v for k, v in (("model", self.model), ("suite", self.suite), ("setting", self.setting),
                                  ("seed", self.seed), ("status", self.status),
                                  ("error_kind", self.error_kind)) if v not in (None, "")}


def sniff_image_type(head: bytes) -> str:
    """The content type of image bytes, from their magic number (blobs have no extension)."""
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head.startswith(b"BM"):
        return "image/bmp"
    if head.startswith((b"II*\x00", b"MM\x00*")):
        return "image/tiff"
    return "application/octet-stream"


EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp",
              "image/bmp": "bmp", "image/tiff": "tif", "application/octet-stream": "bin"}


@dataclass(slots=True)
class _Cached:
    key: tuple[int, int]
    value: dict[str, Any]


@dataclass(slots=True)
class Run:
    """One run folder the viewer shows, under a short unique name used in URLs."""

    name: str
    path: Path
    _cache: dict[str, _Cached] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _index: RunIndex | None = None
    _index_lock: threading.RLock = field(default_factory=threading.RLock)

    def records_key(self) -> tuple[int, int]:
        try:
            st = (self.path / RECORDS).stat()
        except FileNotFoundError:
            return (0, 0)
        return (st.st_size, st.st_mtime_ns)

    def cached(self, what: str, build: Any) -> dict[str, Any]:
        """``build()`` once per state of records.jsonl: reloading a page of a finished run is free."""
        key = self.records_key()
        with self._lock:
            hit = self._cache.get(what)
            if hit is not None and hit.key == key:
                return hit.value
        value: dict[str, Any] = build()
        with self._lock:
            self._cache[what] = _Cached(key, value)
        return value

    @contextmanager
    def index(self) -> Iterator[RunIndex]:
        """The run's index, caught up with records appended since the last use.

        One handle per run, kept open and used by one thread at a time: refreshing it is a few
        reads, while reopening would rebuild from scratch the in-memory index of a read-only folder.
        """
        with self._index_lock:
            if self._index is None:
                self._index = open_index(self.path)
            else:
                try:
                    self._index.refresh()
                except sqlite3.DatabaseError:  # the index file was replaced or damaged: start over
                    self._index.close()
                    self._index = open_index(self.path)
            yield self._index

    def close(self) -> None:
        with self._index_lock:
            if self._index is not None:
                self._index.close()
                self._index = None


class RunSet:
    """The run folders given on the command line."""

    def __init__(self, paths: list[Path]) -> None:
        self.runs: dict[str, Run] = {}
        for p in paths:
            if read_manifest(p) is None:
                raise NotFound(f"{p} is not a run folder (no manifest.json)")
            name = p.resolve().name or "run"
            base, n = name, 2
            while name in self.runs:
                name, n = f"{base}-{n}", n + 1
            self.runs[name] = Run(name, p)
        self._matches: OrderedDict[tuple[Any, ...], list[tuple[Any, str, str]]] = OrderedDict()
        self._lock = threading.Lock()

    def close(self) -> None:
        for run in self.runs.values():
            run.close()

    def run(self, name: str) -> Run:
        try:
            return self.runs[name]
        except KeyError:
            raise NotFound(f"no run named {name!r}; known: {sorted(self.runs)}") from None

    # ---- summary (/ and /api/summary) ------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        return {"runs": [self.run_summary(r) for r in self.runs.values()]}

    def run_summary(self, run: Run) -> dict[str, Any]:
        from fasteval.view.leaderboard import leaderboard  # loads the suites' published numbers

        manifest = read_manifest(run.path) or {}
        rep = run.cached("report", lambda: report(run.path))
        stats = run.cached("stats", lambda: _trajectory_stats(run))
        with run.index() as idx:
            by_status = {str(k[0]): sum(v.values()) for k, v in idx.counts(by=("status",)).items()}
        plan = manifest.get("plan") or {}
        return {"name": run.name, "path": str(run.path), "config_name": (manifest.get("config") or {}).get("name"),
                "config_hash": manifest.get("config_hash"), "created": manifest.get("created"),
                "planned": plan.get("total"), "by_status": by_status, "completion": rep.get("completion"),
                "rows": rep["rows"],
                "cost_usd": rep.get("cost_usd"), "stats": stats, "control": read_trace(run.path),
                "leaderboard": leaderboard(rep, manifest.get("config") or {}), "curves": rep.get("curves") or {}}

    # ---- jobs (/jobs and /api/jobs) --------------------------------------------------------

    def facets(self, run_name: str | None = None) -> dict[str, list[Any]]:
        """The values each filter can take (for the dropdowns), from the index's grouped counts."""
        values: dict[str, set[Any]] = defaultdict(set)
        for run in self._selected(run_name):
            got = run.cached("facets", lambda run=run: _facets(run))
            for dim in FACETS:
                values[dim].update(got[dim])
        return {dim: sorted(values[dim], key=str) for dim in FACETS}

    def _selected(self, run_name: str | None) -> list[Run]:
        return [self.run(run_name)] if run_name else list(self.runs.values())

    def jobs(self, query: JobQuery) -> dict[str, Any]:
        """One page of matching jobs and how many match in all.

        Plain filtered paging (file order) is done by the index itself. A score range, a text
        search or a sort walks the filtered index rows once and keeps only (sort value, run,
        job id) of the matches, cached until a run grows, so the next pages are point lookups.
        """
        per_page = max(1, min(query.per_page, 500))
        page = max(1, query.page)
        skip = (page - 1) * per_page
        runs = self._selected(query.run)
        filters = query.index_filters()
        # Deep pages too go through the cached match list: SQL OFFSET re-sorts the whole table.
        simple = (query.score_min is None and query.score_max is None and not query.q
                  and query.sort not in SORT_KEYS and skip <= DEEP_PAGE)
        rows: list[dict[str, Any]] = []
        total = 0
        if simple:
            for run in runs:
                with run.index() as idx:
                    n = idx.count(**filters)
                    if skip < total + n and len(rows) < per_page:
                        start = max(0, skip - total)
                        rows += [_row_dict(run.name, r) for r in
                                 idx.rows(limit=per_page - len(rows), skip=start, **filters)]
                    total += n
        else:
            matched = self._matched(runs, query, filters)
            total = len(matched)
            wanted = matched[skip:skip + per_page]
            found: dict[tuple[str, str], dict[str, Any]] = {}
            for run in runs:
                ids = [job_id for _, name, job_id in wanted if name == run.name]
                if ids:
                    with run.index() as idx:
                        found.update(((run.name, r.job_id), _row_dict(run.name, r)) for r in idx.rows(job_id=ids))
            rows = [found[(name, job_id)] for _, name, job_id in wanted if (name, job_id) in found]
        return {"total": total, "page": page, "per_page": per_page,
                "pages": max(1, -(-total // per_page)), "rows": rows}

    def _matched(self, runs: list[Run], query: JobQuery, filters: dict[str, Any]) -> list[tuple[Any, str, str]]:
        key = (tuple((r.name, r.records_key()) for r in runs), tuple(sorted(filters.items())), query.score_min,
               query.score_max, query.q, query.sort, query.desc)
        with self._lock:
            hit = self._matches.get(key)
            if hit is not None:
                self._matches.move_to_end(key)
                return hit
        sort = query.sort if query.sort in SORT_KEYS else None
        present: list[tuple[Any, str, str]] = []
        absent: list[tuple[Any, str, str]] = []
        for run in runs:
            with run.index() as idx:
                for r in _filtered(idx, query, filters):
                    value = getattr(r, sort) if sort else None
                    (absent if sort and value is None else present).append((value, run.name, r.job_id))
        if sort:
            present.sort(key=lambda t: t[0], reverse=query.desc)
        matched = present + absent  # jobs without a value (no score) last, whatever the direction
        with self._lock:
            self._matches[key] = matched
            while len(self._matches) > 8:
                self._matches.popitem(last=False)
        return matched

    # ---- one job (/job/<id> and /api/job/<id>) ---------------------------------------------

    def job(self, job_id: str, run_name: str | None = None) -> dict[str, Any]:
        """The full latest record of a job, with the run it came from and its reference answer."""
        for run in self._selected(run_name):
            with run.index() as idx:
                rec = idx.read_record(job_id)
            if rec is not None:
                return {"run": run.name, "record": rec, "reference": reference_of(rec)}
        raise NotFound(f"no job {job_id!r} in {run_name or 'any run'}")

    def compare(self, task_id: str) -> dict[str, Any]:
        """Every model × setting × seed's latest record of one task, across all runs."""
        out: list[dict[str, Any]] = []
        for run in self.runs.values():
            with run.index() as idx:
                for row in idx.rows(task_id=task_id, order="key"):
                    rec = idx.read_row(row)
                    out.append({"run": run.name, "record": rec, "reference": reference_of(rec)})
        if not out:
            raise NotFound(f"no task {task_id!r} in any run")
        return {"task_id": task_id, "jobs": out}

    def blob_path(self, run_name: str, ref: str) -> tuple[Path, str]:
        """The file of an image reference and its sniffed content type."""
        if not _REF_RE.match(ref):
            raise NotFound(f"{ref!r} is not an image reference (64 hex digits)")
        root = self.run(run_name).path / BLOBS
        try:
            with os.fdopen(open_blob(root, ref), "rb") as f:
                head = f.read(16)
        except FileNotFoundError:
            raise NotFound(f"image {ref} is not in {run_name}'s blob store") from None
        except UnsafeRunFolder:
            raise NotFound(f"image {ref} of {run_name} is a symbolic link: not served") from None
        return root / ref[:2] / ref, sniff_image_type(head)

    def find_jobs(self, run_name: str, task_id: str, model: str | None = None, seed: int | None = None,
                  limit: int = 50) -> list[dict[str, Any]]:
        """Compact rows of one task's jobs (``fasteval show --task``)."""
        filters: dict[str, Any] = {"task_id": task_id}
        if model:
            filters["model"] = model
        if seed is not None:
            filters["seed"] = seed
        with self.run(run_name).index() as idx:
            return [_row_dict(run_name, r) for r in idx.rows(order="key", limit=limit, **filters)]

    def example_jobs(self, run_name: str, per_model: int) -> Iterator[dict[str, Any]]:
        """A few trajectories per model for the HTML report: one solved, then failures (they teach most)."""
        run = self.run(run_name)
        with run.index() as idx:
            for model in sorted(str(k[0]) for k in idx.counts(by=("model",))):
                # Each example a different task: the key order walks one task's seeds and settings
                # in a row, and two seeds of one task teach nothing the first did not.
                errors = _distinct(idx.rows(model=model, status="error", order="key"), per_model)
                solved: list[JobRow] = []
                wrong: list[JobRow] = []
                tasks: set[tuple[str, str]] = set()
                for r in idx.rows(model=model, status="ok", order="key"):
                    if (r.suite, r.task_id) in tasks:
                        continue
                    if (r.score or 0.0) >= 1.0 and not solved:
                        solved = [r]
                        tasks.add((r.suite, r.task_id))
                    elif (r.score or 0.0) < 1.0 and len(wrong) < per_model:
                        wrong.append(r)
                        tasks.add((r.suite, r.task_id))
                    if solved and len(wrong) >= per_model:
                        break
                for r in _distinct(iter(solved + errors + wrong), per_model):
                    rec = idx.read_row(r)
                    yield {"run": run.name, "record": rec, "reference": reference_of(rec)}


def _distinct(rows: Iterator[JobRow], n: int) -> list[JobRow]:
    """The first ``n`` rows of different tasks (suite and task id)."""
    out: list[JobRow] = []
    seen: set[tuple[str, str]] = set()
    for r in rows:
        if (r.suite, r.task_id) not in seen:
            seen.add((r.suite, r.task_id))
            out.append(r)
            if len(out) >= n:
                break
    return out


def read_blob(path: Path) -> bytes:
    """A blob's bytes (``path`` from ``blob_path``), never through a link planted since."""
    try:
        with os.fdopen(open_nofollow(path, os.O_RDONLY, "a blob"), "rb") as f:
            return f.read()
    except (FileNotFoundError, UnsafeRunFolder):
        raise NotFound(f"image {path.name} is not in the blob store") from None


def reference_of(rec: dict[str, Any]) -> Any:
    """The reference answer where the suite recorded one (score details or metadata)."""
    for holder in (rec.get("score_details") or {}, rec.get("metadata") or {}):
        if isinstance(holder, dict):
            for key in _REFERENCE_KEYS:
                if holder.get(key) is not None:
                    return holder[key]
    return None


def _facets(run: Run) -> dict[str, Any]:
    # One grouped scan over all the dimensions (a few hundred groups at most), not one per dimension.
    with run.index() as idx:
        groups = list(idx.counts(by=FACETS))
    return {dim: sorted({g[i] for g in groups if g[i] is not None}, key=str) for i, dim in enumerate(FACETS)}


def _row_dict(run: str, r: JobRow) -> dict[str, Any]:
    return {"run": run, "job_id": r.job_id, "model": r.model, "suite": r.suite, "setting": r.setting,
            "task_id": r.task_id, "seed": r.seed, "status": r.status, "score": r.score,
            "error_kind": r.error_kind, "error": r.error, "termination": r.termination, "rounds": r.rounds,
            "tool_calls": r.tool_calls, "latency_s": r.latency_s, "task_type": r.task_type}


def _filtered(idx: RunIndex, query: JobQuery, filters: dict[str, Any]) -> Iterator[JobRow]:
    needle = (query.q or "").strip().lower()
    search = _TextSearch(idx, needle) if needle else None
    for r in idx.rows(**filters):
        if query.score_min is not None and (r.score is None or r.score < query.score_min):
            continue
        if query.score_max is not None and (r.score is None or r.score > query.score_max):
            continue
        if search is not None and needle not in r.task_id.lower() and not search.matches(r):
            continue
        yield r


class _TextSearch:
    """Whether a job's question or answer contains the words (case-insensitive).

    One pass over the records file in 8 MB chunks (``bytes.lower`` and ``find``, both C speed,
    one chunk in memory) finds every byte position holding the words; a line is parsed to check
    its question and answer fields only when a hit falls inside it.
    """

    CHUNK = 8 << 20

    def __init__(self, idx: RunIndex, needle: str) -> None:
        self.idx, self.needle = idx, needle
        # JSON escapes quotes and backslashes, and only ASCII folds case byte-wise.
        raw = needle.isascii() and '"' not in needle and "\\" not in needle
        self.hits: list[int] | None = self._scan(needle.encode()) if raw else None

    def _scan(self, word: bytes) -> list[int]:
        hits: list[int] = []
        overlap = len(word) - 1
        try:
            f = self.idx.records_path.open("rb")
        except FileNotFoundError:
            return hits
        with f:
            base, tail = 0, b""
            while chunk := f.read(self.CHUNK):
                data = tail + chunk.lower()
                start = base - len(tail)
                i = data.find(word)
                while i >= 0:
                    hits.append(start + i)
                    i = data.find(word, i + 1)
                tail = data[-overlap:] if overlap else b""
                base += len(chunk)
        return sorted(set(hits))

    def matches(self, row: JobRow) -> bool:
        if self.hits is not None:
            i = bisect.bisect_left(self.hits, row.offset)
            if i == len(self.hits) or self.hits[i] >= row.offset + row.length:
                return False
        rec = viewable(orjson.loads(self.idx.read_line(row.offset, row.length)))
        if self.needle in str(rec.get("answer") or "").lower():
            return True
        return self.needle in question_text(rec).lower()


def question_text(rec: dict[str, Any]) -> str:
    """The text of the task's user turns (what the model was asked)."""
    parts: list[str] = []
    for m in viewable(rec)["trajectory"]["messages"]:
        if m.get("role") != "user" or m.get("tool_call_id"):
            continue
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text"]
    return "\n".join(parts)


def _trajectory_stats(run: Run) -> dict[str, Any]:
    """Per model × suite × setting: tool calls per trajectory, tool mix, rounds (for the plots)."""
    calls: dict[str, Counter[int]] = defaultdict(Counter)
    rounds: dict[str, Counter[int]] = defaultdict(Counter)
    mix: dict[str, Counter[str]] = defaultdict(Counter)
    tool_errors: dict[str, Counter[str]] = defaultdict(Counter)
    with run.index() as idx:
        for row in idx.rows():
            key = f"{row.model} / {row.suite} / {row.setting}"
            calls[key][row.tool_calls] += 1
            rounds[key][row.rounds] += 1
            if row.tool_calls == 0:
                continue  # no trajectory to read for the tool mix
            rec = idx.read_row(row)
            for tc in ((rec.get("trajectory") or {}).get("tool_calls") or []):
                mix[key][str(tc.get("name"))] += 1
                if tc.get("status") != "ok":
                    tool_errors[key][str(tc.get("name"))] += 1

    def plain(d: dict[str, Counter[Any]]) -> dict[str, dict[str, int]]:
        return {k: {str(x): n for x, n in sorted(c.items())} for k, c in sorted(d.items())}

    return {"tool_calls": plain(calls), "rounds": plain(rounds), "tool_mix": plain(mix),
            "tool_errors": plain(tool_errors)}

