"""Rescoring re-judges finished trajectories from the judge cache, with zero judge requests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.types import Task, Trajectory, Turn
from fasteval.engine.offline.rescore import rescore
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.runfolder.records import latest_by_job
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from providers.base import ChatRequest


@register_suite
class JudgedSuite(Suite):
    """A test suite whose score is a judge's YES/NO on the final answer."""

    name = "test-judged"

    def load(self) -> Iterator[Task | LoadError]:
        for i in range(4):
            yield Task(id=f"q{i}", turns=[Turn(text=f"question {i}", reference=f"gold {i}")])

    def default_settings(self) -> list[Setting]:
        return [Setting(name="plain", tools=[], max_rounds=1)]

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        judge = ctx.services["judge"]
        prompt = f"Gold: {task.turns[0].reference}\nAnswer: {trajectory.answers[-1]}\nTask {task.id}. Verdict?"
        reply = await judge.chat(ChatRequest(messages=[{"role": "user", "content": prompt}], params={"temperature": 0}))
        verdict = (reply.content or "").strip().upper()
        if verdict not in ("YES", "NO"):
            return Score(value=None, error=f"judge_error: unparseable verdict {reply.content!r}")
        return Score(value=1.0 if verdict == "YES" else 0.0, details={"verdict": verdict})


def config(tmp: Path, script: list[dict[str, str]], judge_id: str = "sim:judge") -> Path:
    p = tmp / "sweep.yaml"
    p.write_text(yaml.safe_dump({
        "seeds": 2,
        "models": [{"name": "m", "provider": "sim", "policy": "direct", "default_reply": "an answer"}],
        "roles": {"judge": {"provider": "sim", "policy": "scripted", "script": script, "default_reply": "NO",
                            "endpoint_id": judge_id}},
        "suites": [{"name": "test-judged"}],
        "run": {"cache": {"path": str(tmp / "cache.sqlite")}}}))
    return p


async def test_rescore_uses_the_judge_cache_and_a_new_judge_changes_scores(tmp_path: Path) -> None:
    cfg = load_config(config(tmp_path, [{"match": r"Task q[02]\.", "reply": "YES"}]))
    run_dir = tmp_path / "run"
    res = await run_sweep(cfg, RunOptions(run_dir=run_dir, progress=False))
    assert res.ok == 8
    first = {k: r["score"] for k, r in latest_by_job([run_dir / "records.jsonl"]).items()}
    assert sorted(first.values()) == [0.0] * 4 + [1.0] * 4
    assert (run_dir / "cache_keys.txt").read_text().count("judge") >= 4

    again = await rescore(cfg, run_dir)
    assert (again.rescored, again.judge_requests) == (8, 0)  # every verdict from the cache
    assert {k: r["score"] for k, r in latest_by_job([run_dir / "records.jsonl"]).items()} == first

    # another judge (another endpoint identity): new verdicts, the old ones stay cached for the old judge
    strict = load_config(config(tmp_path, [{"match": r"Task q0\.", "reply": "YES"}], judge_id="sim:strict"))
    changed = await rescore(strict, run_dir)
    assert changed.rescored == 8 and changed.judge_requests == 4  # one per distinct (task, answer) prompt
    latest = latest_by_job([run_dir / "records.jsonl"])
    assert sum(r["score"] for r in latest.values()) == 2.0
    assert len((run_dir / "records.jsonl").read_bytes().splitlines()) == 24  # appended, never rewritten


async def test_unparseable_judge_is_a_judge_error_not_a_zero(tmp_path: Path) -> None:
    cfg = load_config(config(tmp_path, [{"match": ".", "reply": "maybe?"}]))
    res = await run_sweep(cfg, RunOptions(run_dir=tmp_path / "run", progress=False))
    assert (res.ok, res.errors) == (0, 8)
    recs = [orjson.loads(x) for x in (tmp_path / "run" / "records.jsonl").read_bytes().splitlines()]
    assert {r["error_kind"] for r in recs} == {"judge_error"} and all(r["score"] is None for r in recs)


def test_rescore_cli_reports_zero_judge_requests_from_cache(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    from fasteval.cli.main import main

    cfg = config(tmp_path, [{"match": "q1", "reply": "YES"}])
    run_dir = tmp_path / "run"
    assert main(["run", str(cfg), "--run-dir", str(run_dir), "--no-progress"]) == 0
    assert main(["rescore", str(run_dir)]) == 0
    assert "judge requests 0, judge cache hits 8" in capsys.readouterr().err
