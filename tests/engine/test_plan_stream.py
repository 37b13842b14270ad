"""The plan keyed in blocks against the run index's resume array: the same jobs, in the same order,
as the plain walk against a set of ids; what is left counted without jobs; and lazily made."""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import pytest

from fasteval.config.load import SweepConfig, load_config
from fasteval.core.types import Job, Record
from fasteval.engine.plan import Selectors, SuiteRun, in_shard, load_suite, plan, plan_left, plan_totals
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index
from tests.runfolder.index_support import make_record, write


def _config(tmp: Path, n_tasks: int, models: int = 3, seeds: int = 2) -> SweepConfig:
    data = tmp / "tasks.jsonl"
    with data.open("w") as f:
        for i in range(n_tasks):
            f.write(json.dumps({"id": f"t{i:05d}", "prompt": f"what is {i} + 1?", "answer": str(i + 1)}) + "\n")
    path = tmp / "sweep.yaml"
    path.write_text(json.dumps({
        "seeds": seeds,
        "models": [{"name": f"m{i}", "provider": "sim", "policy": "direct"} for i in range(models)],
        "suites": [{"name": "jsonl", "options": {"path": str(data)},
                    "settings": [{"name": "default"}, {"name": "again", "extends": "default"}]}],
    }))
    return load_config(path)


def _runs(cfg: SweepConfig, tmp: Path) -> list[SuiteRun]:
    return [load_suite(entry, BlobStore(tmp / "blobs")) for entry in cfg.suites]


def _plain(cfg: SweepConfig, runs: list[SuiteRun], shard: tuple[int, int] | None, shard_by: str,
           sel: Selectors, done: set[str]) -> list[Job]:
    """The plan as it was walked before: every job built, its id hashed and looked up in a set."""
    models = [m.name for m in cfg.models if not sel.models or m.name in sel.models]
    slot = {m.name: i for i, m in enumerate(cfg.models)}
    seeds = [s for s in cfg.seeds if not sel.seeds or s in sel.seeds]
    out = []
    for job, _, _, _ in plan(cfg, runs, None, selectors=sel):
        assert job.model in models and job.seed in seeds
        if shard is not None and not in_shard(job.job_id, shard, slot[job.model] if shard_by == "model" else None):
            continue
        if job.job_id not in done:
            out.append(job)
    return out


async def _done_in_index(tmp: Path, jobs: list[Job], rng: random.Random) -> tuple[Any, set[str], set[str]]:
    """Records for some of ``jobs`` (ok and error, some rerun) through the real writer and index."""
    run = tmp / "run"
    run.mkdir(exist_ok=True)
    picked = rng.sample(jobs, len(jobs) // 2)
    records: list[Record] = [make_record(rng, j, size=20) for j in picked]
    records += [make_record(rng, j, ok=True, size=20) for j in rng.sample(picked, len(picked) // 4)]  # reruns
    index = open_index(run)
    await write(run, records, index)
    ok = {r.job_id for r in records if r.status == "ok"}
    return index, ok, {r.job_id for r in records}


@pytest.mark.parametrize("case", [
    {"shard": None, "shard_by": "job", "sel": Selectors()},
    {"shard": (1, 3), "shard_by": "job", "sel": Selectors()},
    {"shard": (0, 2), "shard_by": "model", "sel": Selectors()},
    {"shard": None, "shard_by": "job", "sel": Selectors(models=["m2", "m0"], seeds=[1], settings=["again"])},
    {"shard": (2, 3), "shard_by": "job", "sel": Selectors(limit=7, spread=True)},
])
async def test_keyed_blocks_give_the_plain_walks_jobs(tmp_path: Path, case: dict[str, Any]) -> None:
    rng = random.Random(str(case))
    cfg = _config(tmp_path, n_tasks=1500)  # 1,500 tasks x 2 settings x 3 models x 2 seeds: many blocks
    runs = _runs(cfg, tmp_path)
    everything = [job for job, _, _, _ in plan(cfg, runs, None)]
    index, ok, any_status = await _done_in_index(tmp_path, everything, rng)
    shard, shard_by, sel = case["shard"], case["shard_by"], case["sel"]
    try:
        for ok_only, done in ((True, ok), (False, any_status)):
            keys = index.done_keys(ok_only=ok_only)
            skipped: list[int] = []
            got = [job for job, _, _, _ in plan(cfg, runs, shard, shard_by, sel, done=keys, on_done=skipped.append)]
            want = _plain(cfg, runs, shard, shard_by, sel, done)
            assert got == want
            assert sum(skipped) == len(_plain(cfg, runs, shard, shard_by, sel, set())) - len(want)
            assert plan_left(cfg, runs, shard, shard_by, sel, keys) == \
                Counter((j.model, j.suite, j.setting, j.seed) for j in want)
            # a set of ids is still a resume set the plan takes
            assert [j for j, _, _, _ in plan(cfg, runs, shard, shard_by, sel, done=done)] == want
        total, by = plan_totals(cfg, runs, shard, shard_by, sel)
        assert total == len(_plain(cfg, runs, shard, shard_by, sel, set()))
        assert sum(by["model"].values()) == total
    finally:
        index.close()


class _Counted(list[Any]):
    """A suite's items that count how far the plan has read them."""

    read = 0

    def __iter__(self) -> Iterator[Any]:
        for item in super().__iter__():
            type(self).read += 1
            yield item


async def test_the_plan_is_made_a_block_at_a_time(tmp_path: Path) -> None:
    """Its first job comes after one block of tasks is keyed, not after the whole plan."""
    cfg = _config(tmp_path, n_tasks=6000, models=4, seeds=5)
    runs = _runs(cfg, tmp_path)
    everything = [job for job, _, _, _ in islice(plan(cfg, runs, None), 100)]
    index, _, _ = await _done_in_index(tmp_path, everything, random.Random(1))
    try:
        runs[0].items = _Counted(runs[0].items)
        first = next(plan(cfg, runs, None, done=index.done_keys()))
        assert first[0] in everything
        assert 0 < _Counted.read <= 4096 // (4 * 5) + 1  # one block: 4,096 jobs of 20 per task
    finally:
        index.close()


def test_a_blocks_raw_keys_are_the_job_ids() -> None:
    from fasteval.core.types import JOB_ID_BYTES, job_id_of, job_keys_of

    models, tids, seeds = ["m-b", "m/a é"], ["t1", "x\x1fy", ""], [0, 7]
    raw = job_keys_of(models, "s", "set", tids, seeds)
    ids = [job_id_of(m, "s", "set", t, sd) for t in tids for sd in seeds for m in models]
    assert [raw[i * JOB_ID_BYTES:(i + 1) * JOB_ID_BYTES].hex() for i in range(len(ids))] == ids
