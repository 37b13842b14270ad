"""``report`` read off the index's aggregates gives, byte for byte, what a full read of the records gives.

The reference below is the report's arithmetic done the plain way: every job's latest record,
read from records.jsonl, each mean of scores the exact mean rounded once (``Fraction``), latencies
summed in whole microseconds, with the same seeded bootstrap over tasks in id order. The index
sums scores in integer limbs in whatever order rows arrive; these figures cannot depend on it.
"""

from __future__ import annotations

import random
import statistics
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import orjson
import pytest

from fasteval.core.types import Job, Record
from fasteval.runfolder.index import INDEX, open_index
from fasteval.runfolder.records import RECORDS
from fasteval.view.report import TOKEN_FIELDS, bootstrap_ci, report
from tests.runfolder.index_support import make_record, manifest, write


def _latest_in_file_order(run_dir: Path) -> list[dict[str, Any]]:
    """Each job's latest ok record (else latest record), in the order of the chosen lines."""
    chosen: dict[str, tuple[int, dict[str, Any]]] = {}
    with (run_dir / RECORDS).open("rb") as f:
        for n, line in enumerate(f):
            rec = orjson.loads(line)
            prev = chosen.get(rec["job_id"])
            if prev is None or rec["status"] == "ok" or prev[1]["status"] != "ok":
                chosen[rec["job_id"]] = (n, rec)
    return [rec for _, rec in sorted(chosen.values(), key=lambda v: v[0])]


def _mean(values: list[float]) -> float:
    return float(sum(map(Fraction, values), Fraction(0)) / len(values))


def _reference_row(records: list[dict[str, Any]]) -> dict[str, Any]:
    by_seed: dict[int, list[float]] = defaultdict(list)
    by_task: dict[str, list[float]] = defaultdict(list)
    by_type: dict[str, list[float]] = defaultdict(list)
    terminations: dict[str, int] = defaultdict(int)
    errors: dict[str, int] = defaultdict(int)
    tokens = dict.fromkeys(TOKEN_FIELDS, 0)
    n_ok = n_err = calls = images = 0
    latency = 0
    for r in records:
        images += int(r["usage"].get("image_tokens", 0))
        terminations[str(r["termination"])] += 1
        calls += r["tool_calls"]
        latency += int(r["latency_s"] * 1_000_000 + 0.5)
        for key in TOKEN_FIELDS:
            tokens[key] += int(r["usage"].get(key, 0))
        if r["status"] == "ok" and r["score"] is not None:
            n_ok += 1
            by_seed[r["seed"]].append(r["score"])
            by_task[r["task_id"]].append(r["score"])
            by_type[r["metadata"]["task_type"]].append(r["score"])
        else:
            n_err += 1
            errors[str(r["error_kind"])] += 1
    seed_means = [_mean(v) for _, v in sorted(by_seed.items())]
    ci = bootstrap_ci([_mean(v) for _, v in sorted(by_task.items())])
    k = len(by_seed)
    n = len(records)
    return {
        "mean": statistics.fmean(seed_means) if seed_means else None,
        "std": statistics.stdev(seed_means) if len(seed_means) > 1 else 0.0 if seed_means else None,
        "n_seeds": k, "seed_means": seed_means, "ci95": list(ci) if ci else None,
        "n_ok": n_ok, "n_error": n_err, "n_tasks": len(by_task),
        "pass_at_k": sum(max(v) >= 1.0 for v in by_task.values()) / len(by_task) if by_task else None,
        "pass_pow_k": sum(min(v) >= 1.0 and len(v) == k for v in by_task.values()) / len(by_task)
        if by_task else None,
        "terminations": dict(terminations), "errors": dict(errors), "tokens": tokens,
        "prefix_cache_hit_rate": round(tokens["cache_read_tokens"] / tokens["prompt_tokens"], 4)
        if tokens["prompt_tokens"] and tokens["cache_read_tokens"] else None,
        "mean_latency_s": latency / (n * 1_000_000), "tool_calls_per_trajectory": calls / n,
        "image_tokens_per_trajectory": images / n if images else None,
        "by_task_type": {t: _mean(v) for t, v in sorted(by_type.items())},
    }


def _without_completion(rep: dict[str, Any], planned: int) -> dict[str, Any]:
    """The report less its ``completion`` (how far the run got: its own tests), checked for its total."""
    assert rep.pop("completion")["total"] == planned
    return rep


def _reference(run_dir: Path) -> dict[str, Any]:
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for rec in _latest_in_file_order(run_dir):
        groups[(rec["model"], rec["suite"], rec["setting"])].append(rec)
    rows = [{"model": m, "suite": s, "setting": st, **_reference_row(recs), "cost_usd": None}
            for (m, s, st), recs in sorted(groups.items())]
    return {"run_dir": str(run_dir), "rows": rows, "cost_usd": None, "texts": {}}


def _scored(rng: random.Random, job: Job, ok_rate: float) -> Record:
    rec = make_record(rng, job, ok=rng.random() < ok_rate, size=100)
    if rec.status == "ok" and rng.random() < 0.3:
        rec.score = rng.choice((0.0, 1.0))  # some tasks pass on every seed: pass^k is not always 0
    return rec


@pytest.mark.parametrize("seed", range(4))
async def test_report_from_one_index_scan_is_byte_identical_to_a_full_read(tmp_path: Path, seed: int) -> None:
    """Fractional scores and latencies (sums that round by order), reruns in later sessions,
    interleaved groups, a group of one task (no CI) and a group with no ok record."""
    rng = random.Random(seed)
    run_dir = tmp_path / "run"
    jobs = [Job(model=m, suite=s, setting=st, task_id=f"t{t:03d}", seed=sd)
            for m in ("m-b", "m-a") for s in ("jsonl", "demo") for st in ("default", "no_tools")
            for t in range(rng.randrange(5, 30)) for sd in range(3)]
    jobs += [Job(model="m-c", suite="jsonl", setting="default", task_id="only", seed=sd) for sd in range(2)]
    failing = [Job(model="m-d", suite="jsonl", setting="default", task_id=f"f{t}", seed=0) for t in range(3)]
    manifest(run_dir, jobs + failing)
    for session in range(3):
        batch = [_scored(rng, j, ok_rate=0.6) for j in rng.sample(jobs, len(jobs) // (session + 1))]
        batch += [_scored(rng, j, ok_rate=0.0) for j in failing]
        rng.shuffle(batch)
        with open_index(run_dir) as index:
            await write(run_dir, batch, index)
    expected = orjson.dumps(_reference(run_dir), option=orjson.OPT_SORT_KEYS)
    assert orjson.dumps(_without_completion(report(run_dir), len(jobs + failing)),
                        option=orjson.OPT_SORT_KEYS) == expected
    rows = {(r["model"], r["suite"], r["setting"]): r for r in report(run_dir)["rows"]}
    assert rows[("m-c", "jsonl", "default")]["ci95"] is None
    assert rows[("m-d", "jsonl", "default")]["mean"] is None
    assert any(r["ci95"] is not None and r["ci95"][0] < r["ci95"][1] for r in rows.values())
    # The index's physical order (a rebuild inserts in file order) changes nothing.
    (run_dir / INDEX).unlink()
    assert orjson.dumps(_without_completion(report(run_dir), len(jobs + failing)),
                        option=orjson.OPT_SORT_KEYS) == expected


def test_bootstrap_ci_is_the_seeded_percentile_bootstrap() -> None:
    """Blocks of resamples draw the same indices as one (n, k) matrix: the CI is that matrix's."""
    import numpy as np

    rng = random.Random(3)
    per_task = [rng.random() for _ in range(5000)]  # 5,000 tasks: three blocks of 400, 400, 200
    draws = np.random.default_rng(0).integers(0, len(per_task), size=(1000, len(per_task)))
    means = np.sort(np.asarray(per_task)[draws].mean(axis=1))
    assert bootstrap_ci(per_task) == (float(means[25]), float(means[974]))
