"""The sweep's plan totals (the manifest's counts) agree with its plan when settings skip tasks."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from fasteval.config.load import load_config
from fasteval.engine.plan import Selectors, load_suite, plan, plan_totals
from fasteval.runfolder.blobs import BlobStore


def test_plan_totals_count_exactly_the_planned_jobs(release: Path, tmp_path: Path) -> None:
    cfg_path = tmp_path / "sweep.yaml"
    cfg_path.write_text(json.dumps({
        "seeds": 3,
        "models": [{"name": "m1", "provider": "sim"}, {"name": "m2", "provider": "sim"}],
        "suites": [{"name": "tirbench", "options": {"path": str(release)}}],
    }))
    cfg = load_config(cfg_path)
    runs = [load_suite(e, BlobStore(tmp_path / "blobs")) for e in cfg.suites]
    selections = [None, Selectors(models=["m2"], seeds=[0, 2]), Selectors(settings=["rotation-fn-p1", "tool"], limit=3)]
    for sel in selections:
        for shard in (None, (1, 3)):
            jobs = [job for job, _, _, _ in plan(cfg, runs, shard, selectors=sel)]
            total, by = plan_totals(cfg, runs, shard, selectors=sel)
            assert total == len(jobs) > 0
            for dim in ("model", "suite", "setting", "seed"):  # a setting is its suite's: suite/setting
                assert by[dim] == dict(Counter(f"{j.suite}/{j.setting}" if dim == "setting" else str(getattr(j, dim))
                                               for j in jobs))
    # some setting does not apply to some task: the totals had something to get wrong
    n_settings = len(runs[0].settings)
    assert plan_totals(cfg, runs, None)[0] < len(runs[0].items) * n_settings * 2 * 3


def test_plan_leaves_out_finished_jobs_of_its_own_shard_only(release: Path, tmp_path: Path) -> None:
    cfg_path = tmp_path / "sweep.yaml"
    cfg_path.write_text(json.dumps({"seeds": 2, "models": [{"name": "m1", "provider": "sim"}],
                                    "suites": [{"name": "tirbench", "options": {"path": str(release)}}]}))
    cfg = load_config(cfg_path)
    runs = [load_suite(e, BlobStore(tmp_path / "blobs")) for e in cfg.suites]
    everything = [job.job_id for job, _, _, _ in plan(cfg, runs, None)]
    done = set(everything[::3]) | {"not-a-planned-job"}
    for shard in (None, (0, 2), (1, 2)):
        mine = [job.job_id for job, _, _, _ in plan(cfg, runs, shard)]
        resumed: list[int] = []  # on_done is told how many of a block were done
        left = [job.job_id for job, _, _, _ in plan(cfg, runs, shard, done=done, on_done=resumed.append)]
        assert left == [j for j in mine if j not in done]
        assert sum(resumed) == len(set(mine) & done) > 0
