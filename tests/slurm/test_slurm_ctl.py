"""``fasteval slurm ctl``: one command fanned out to each running shard's socket, the answers gathered.

The shards are real sweeps (sim models behind a real server) in ``RUN/shards/<i>``, run in this
process; Slurm is not needed to reach a shard whose socket is on this machine, so no cluster starts.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from fasteval.engine.run.sweep import SweepIncomplete
from fasteval.runfolder.control import read_trace
from fasteval.runfolder.merge import merge_runs
from fasteval.slurm.scripts import SubmitOptions
from fasteval.slurm.state import write_jobs
from providers.sim import SimModel, SimServer
from providers.sim.spec import Faults
from tests.engine.control_support import socket_up, start, write_config

ROOT = Path(__file__).resolve().parents[2]


async def _cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "fasteval.cli.main", *args, cwd=ROOT,
                                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


@pytest.mark.slow
async def test_slurm_ctl_reaches_every_running_shard_and_says_which_is_not(tmp_path: Path) -> None:
    server = SimServer([SimModel("m", policy="direct", faults=Faults(schedule=["hang", "hang"], hang_s=3600))])
    await server.start()
    try:
        run_dir = tmp_path / "run"
        # 8 tasks: shards 0 and 1 each get jobs (job ids hash the group fingerprint; 4 left shard 0 none)
        cfg = write_config(tmp_path, [{"name": "m", "provider": "openai", "base_url": server.base_url, "model": "m"}],
                           n_tasks=8, tools=False, run={"max_concurrency": 1})
        (run_dir / "slurm").mkdir(parents=True)
        write_jobs(run_dir, {"options": SubmitOptions(config=cfg, run_dir=run_dir, shards=3).to_json()})
        shards = [start(cfg, run_dir / "shards" / str(i), shard=(i, 3)) for i in range(2)]  # shard 2 never started
        for i, task in enumerate(shards):
            await socket_up(run_dir / "shards" / str(i), task)
        code, out, _ = await _cli("slurm", "ctl", str(run_dir), "set", "--model", "m", "rpm=120", "--json")
        rows = orjson.loads(out)["shards"]
        assert code == 0 and [r["running"] for r in rows] == [True, True, False]
        assert all(r["answer"]["changes"] == [{"what": "m.rpm", "old": None, "new": 120.0}] for r in rows[:2])
        assert "no such run folder" in rows[2]["error"]
        code, out, _ = await _cli("slurm", "ctl", str(run_dir), "status")
        assert code == 0 and "shard 0:" in out and "shard 1:" in out and "shard 2: not running" in out
        code, out, _ = await _cli("slurm", "ctl", str(run_dir), "cancel", "--model", "m", "--json")
        assert code == 0 and [r["answer"]["cancelled"] for r in orjson.loads(out)["shards"][:2]] == [1, 1]
        for task in shards:
            with pytest.raises(SweepIncomplete):
                await task
        code, _, err = await _cli("slurm", "ctl", str(run_dir), "status")
        assert code == 2 and "no shard" in err
        merged = merge_runs(tmp_path / "merged", [run_dir / "shards" / "0", run_dir / "shards" / "1"])
        assert merged["sources"] == 2
        trace = read_trace(tmp_path / "merged")  # the merged report still says what was changed, and where
        assert [e["command"] for e in trace] == ["set --model m rpm=120"] * 2 + ["cancel --model m"] * 2
        assert {e["source"] for e in trace} == {str(run_dir / "shards" / "0"), str(run_dir / "shards" / "1")}
    finally:
        await server.stop()
