"""Random run folders for the index tests: real records written by the real RecordWriter."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.types import Job, Record
from fasteval.runfolder.index import RunIndex
from fasteval.runfolder.index_rows import row_of_dict
from fasteval.runfolder.records import RECORDS, RecordWriter, latest_by_job, write_manifest

MODELS = ("m-a", "m-b")
SUITES = ("jsonl", "demo")
KINDS = ("timeout", "server_error", "judge_error", "load_error")


def random_jobs(rng: random.Random, n_tasks: int, seeds: int = 2) -> list[Job]:
    return [Job(model=m, suite=s, setting="default", task_id=f"t{t}", seed=seed)
            for m in MODELS for s in SUITES for t in range(n_tasks) for seed in range(seeds)]


def make_record(rng: random.Random, job: Job, *, ok: bool | None = None, size: int = 600,
                rescored: bool = False) -> Record:
    ok = rng.random() < 0.7 if ok is None else ok
    kind = None if ok else rng.choice(KINDS)
    pad = "".join(rng.choice("abcdefghij \"\\é\n{}") for _ in range(min(size, 4096)))
    pad = (pad * (size // max(1, len(pad)) + 1))[:size]
    score = round(rng.random(), 3) if ok else None
    return Record(job_id=job.job_id, model=job.model, suite=job.suite, setting=job.setting, task_id=job.task_id,
                  seed=job.seed, status="ok" if ok else "error", score=score, answer=f"a{rng.randrange(5)}",
                  error=None if ok else f"{kind}: " + "x" * rng.randrange(0, 900), error_kind=kind,
                  termination="answered" if ok else "error", rounds=rng.randrange(5), tool_calls=rng.randrange(4),
                  usage={"prompt_tokens": rng.randrange(1000), "completion_tokens": rng.randrange(100),
                         "cache_read_tokens": rng.randrange(500), "image_tokens": rng.choice((0, 259, 518))},
                  latency_s=rng.random(), retries=rng.randrange(3),
                  score_details={"rescored_at": 1.0} if rescored else {},
                  metadata={"task_type": rng.choice(("count", "ocr"))},
                  trajectory={"messages": [{"role": "assistant", "content": pad}],
                              "tool_calls": [{"name": "calculator", "status": "ok", "args": {"e": "1+1"}}],
                              "rounds": 1, "termination": "answered"})


async def write(run_dir: Path, records: list[Record], index: RunIndex | None) -> None:
    writer = RecordWriter(run_dir / RECORDS, fsync="never", index=index)
    await writer.start()
    for rec in records:
        writer.write(rec)
    await writer.close()


def manifest(run_dir: Path, jobs: list[Job], config_hash: str = "h") -> None:
    by: dict[str, dict[str, int]] = {d: {} for d in ("model", "suite", "setting", "seed")}
    for j in jobs:
        for d in by:
            v = f"{j.suite}/{j.setting}" if d == "setting" else str(getattr(j, d))  # as the sweep writes it
            by[d][v] = by[d].get(v, 0) + 1
    run_dir.mkdir(parents=True, exist_ok=True)
    write_manifest(run_dir, {"config_hash": config_hash, "config": {},
                             "plan": {"total": len(jobs), **{f"by_{d}": v for d, v in by.items()}}})


def full_scan_rows(run_dir: Path) -> dict[str, tuple[Any, ...]]:
    """Each job's row by reading every line: the reference the index must agree with."""
    latest = latest_by_job([run_dir / RECORDS])
    out: dict[str, tuple[Any, ...]] = {}
    pos = 0
    path = run_dir / RECORDS
    if not path.exists():
        return out
    with path.open("rb") as f:
        for line in f:
            if not line.endswith(b"\n"):
                break
            try:
                rec = orjson.loads(line)
            except orjson.JSONDecodeError:
                rec = None
            if isinstance(rec, dict) and rec == latest.get(rec.get("job_id")):
                out[rec["job_id"]] = row_of_dict(rec, pos, len(line))
            pos += len(line)
    return out


def index_rows(index: RunIndex) -> dict[str, tuple[Any, ...]]:
    return {r.job_id: r.at(r.offset, r.length) for r in index.rows()}


def merged_reference(sources: list[Path]) -> list[bytes]:
    """What ``merge`` must write, by a full scan: each job's record from the first source holding
    an ok one (else the first source holding it), sources in order, each in its file order."""
    latest: list[dict[str, tuple[int, bytes, bool]]] = []
    for src in sources:
        mine: dict[str, tuple[int, bytes, bool]] = {}
        with (src / RECORDS).open("rb") as f:
            for n, line in enumerate(f):
                if not line.endswith(b"\n"):
                    break
                try:
                    rec = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not (isinstance(rec, dict) and "job_id" in rec):
                    continue
                ok = rec.get("status") == "ok"
                prev = mine.get(rec["job_id"])
                if prev is None or not prev[2] or ok:
                    mine[rec["job_id"]] = (n, line, ok)
        latest.append(mine)
    winner: dict[str, int] = {}
    for i, mine in enumerate(latest):
        for job_id, (_, _, ok) in mine.items():
            if job_id not in winner or (ok and not latest[winner[job_id]][job_id][2]):
                winner[job_id] = i
    out: list[bytes] = []
    for i, mine in enumerate(latest):
        out += [line for _, line, _ in sorted(v for j, v in mine.items() if winner[j] == i)]
    return out


def _limbs(score: float) -> tuple[int, int, bool]:
    """A score's limbs as the index's SQL splits them (the same IEEE operations, in Python)."""
    p = score * 2147483648.0
    a = int(p)
    rest = (p - a) * 2147483648.0
    b = int(rest)
    odd = rest != b or abs(score) >= 512.0
    return (0, 0, True) if odd else (a, b, False)


def rescan_aggregates(run_dir: Path) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The aggregates by a full read of records.jsonl (each job's latest row, as a rebuild makes it)."""
    from fasteval.runfolder.index_aggregates import INT_SUMS
    from fasteval.runfolder.index_rows import COLUMNS

    col = {c: i for i, c in enumerate(COLUMNS)}
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in full_scan_rows(run_dir).values():
        key = tuple(row[col[k]] for k in ("model", "suite", "setting", "seed", "status", "error_kind", "termination",
                                          "task_type"))
        g = out.setdefault(key, {"n": 0, "scored": 0, "score_a": 0, "score_b": 0, "score_odd": 0, "score_frac": 0,
                                 "latency_us": 0, **dict.fromkeys(INT_SUMS, 0)})
        g["n"] += 1
        g["latency_us"] += int(min(max(row[col["latency_s"]], 0.0), 1e9) * 1_000_000 + 0.5)
        for c in INT_SUMS:
            g[c] += row[col[c]]
        score = row[col["score"]]
        if row[col["ok"]] == 1 and score is not None:
            g["scored"] += 1
            a, b, odd = _limbs(score)
            g["score_a"] += a
            g["score_b"] += b
            g["score_odd"] += odd
            g["score_frac"] += score != int(score) if abs(score) < 2**63 else 1
    from fasteval.runfolder.index_aggregates import saturated

    return {k: {c: saturated(v) for c, v in g.items()} for k, g in out.items()}


def index_aggregates(index: RunIndex) -> dict[tuple[Any, ...], dict[str, Any]]:
    """The index's aggregates in the shape of ``rescan_aggregates`` (score_sq left out: a float sum)."""
    from fasteval.runfolder.index_aggregates import INT_SUMS, KEY, saturated

    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in index.aggregates():
        key = tuple(r[k] for k in KEY)
        out[key] = {k: saturated(v) for k, v in r.items() if k not in KEY and k != "score_sq"}
        for c in INT_SUMS:  # a sum past 64 bits is REAL: readers sum that group's rows (exactly)
            if not isinstance(r[c], int):
                one = dict(zip(KEY, key, strict=True))
                out[key][c] = index.sums([c], scan=True, **{k: v for k, v in one.items()})[1]
    return out


def assert_derived_agree(run_dir: Path, index: RunIndex) -> None:
    """Aggregates and the resume set agree with a full read of the records."""
    assert index_aggregates(index) == rescan_aggregates(run_dir)
    rows = full_scan_rows(run_dir)
    oks = [j for j, r in rows.items() if r[-3] == 1]
    for ok_only, members in ((True, oks), (False, list(rows))):
        keys = index.done_keys(ok_only=ok_only)
        assert len(keys) == len(members)
        others = [j for j in rows if j not in set(members)] + ["0" * 20, "f" * 20]
        assert keys.contains_many(members).all() if members else True
        assert not keys.contains_many(others).any()
