"""``fasteval run --dry-run --estimate`` against what a sim sweep then used.

The sim bills by the rule the estimate uses for it (four characters a token, 256 per image), so
what is left to be wrong is the estimator's own arithmetic: prompts laid out as the agent loop
lays them, rounds and growth read from evidence, and the bound really bounding.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.cli.main import main
from fasteval.config.load import load_config
from fasteval.engine.forecast.estimate import estimate
from fasteval.engine.plan import RunOptions, Selectors, load_suite, plan, spread
from fasteval.runfolder.blobs import BlobStore
from fasteval.runfolder.index import open_index

SIM = [{"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": 1, "misread_rate": 0.2},
       {"name": "sim-direct", "provider": "sim", "policy": "direct", "latency_ms": 1}]
DEMO = {"name": "demo", "options": {"n_tasks": 12, "seed": 0},
        "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6},
                     {"name": "direct", "tools": []}]}


def write_config(tmp: Path, models: list[dict[str, Any]] | None = None, **extra: Any) -> Path:
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump({"name": "est", "seeds": [0, 1, 2], "models": models or SIM, "suites": [DEMO],
                                    "run": {"max_concurrency": 16}, **extra}))
    return path


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def used(run_dir: Path) -> dict[tuple[str, str], tuple[int, int, int]]:
    """(model, setting) -> requests, prompt and completion tokens the sweep's records say it used."""
    with open_index(run_dir) as index:
        return {(m, st): index.sums(["rounds", "prompt_tokens", "completion_tokens"], model=m, setting=st)[1:]
                for m, _, st in index.group_sizes()}


def estimated(capsys: pytest.CaptureFixture[str], config: Path, *args: str) -> dict[tuple[str, str], dict[str, Any]]:
    code, out, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--estimate-json", *args)
    assert code == 0, err
    return {(g["model"], g["setting"]): g for g in json.loads(out)["groups"]}


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """A pilot (seed 0, 4 tasks) and then the whole sweep, both on the sim."""
    tmp = tmp_path_factory.mktemp("estimate")
    config = write_config(tmp)
    pilot = tmp / "run-pilot"
    assert main(["run", str(config), "--run-dir", str(pilot), "--seeds", "0", "--limit", "4", "--no-progress"]) == 0
    full = tmp / "run"
    assert main(["run", str(config), "--run-dir", str(full), "--no-progress"]) == 0
    return config, pilot, full


@pytest.mark.slow
def test_estimate_from_a_pilot_is_close_to_what_the_sweep_used(
        sweep: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config, pilot, full = sweep
    est = estimated(capsys, config, "--estimate-from", str(pilot), "--run-dir", str(tmp_path / "new"))
    actual = used(full)
    assert set(est) == set(actual)
    for key, (requests, prompt, completion) in actual.items():
        g = est[key]
        assert not g["upper_bound"] and g["basis"].startswith("run ")
        assert g["requests"] == pytest.approx(requests, rel=0.15), key
        assert g["prompt_tokens"] == pytest.approx(prompt, rel=0.15), key
        assert g["completion_tokens"] == pytest.approx(completion, rel=0.15), key


def test_without_evidence_every_row_is_an_upper_bound_that_holds(
        sweep: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config, _, full = sweep
    est = estimated(capsys, config, "--run-dir", str(tmp_path / "new"))
    for key, (requests, prompt, completion) in used(full).items():
        g = est[key]
        assert g["upper_bound"] and g["basis"].startswith("upper bound")
        assert g["requests"] >= requests and g["prompt_tokens"] >= prompt and g["completion_tokens"] >= completion
        assert g["job_seconds"] is None
    # a setting without tools is one request a turn (the demo's multi-turn tasks have two)
    assert est[("sim-direct", "direct")]["requests"] == used(full)[("sim-direct", "direct")][0]


def test_a_finished_run_has_nothing_left_to_estimate(
        sweep: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    config, pilot, full = sweep
    code, out, _ = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--estimate-json", "--run-dir", str(full))
    assert code == 0 and json.loads(out)["total"]["jobs"] == 0


def test_api_models_are_priced_at_list_and_batch_price_without_a_key(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    gpt = {"name": "gpt-4o", "provider": "openai", "base_url": "https://api.openai.com/v1", "model": "gpt-4o-2024-11-20",
           "api_key_env": "OPENAI_API_KEY", "params": {"max_tokens": 100}, "batch": True,
           "limits": {"concurrency": 8, "rpm": 60}}
    local = {"name": "local", "provider": "vllm", "base_url": "http://127.0.0.1:9/v1", "model": "Qwen/Qwen2.5-VL-7B"}
    config = write_config(tmp_path, [gpt, local])
    cfg = load_config(config)
    est = estimate(cfg, RunOptions(run_dir=tmp_path / "run", selectors=Selectors(settings=["direct"])))
    g = next(g for g in est.groups if g.model == "gpt-4o")
    assert g.completion_tokens == g.requests * 100  # the bound: every request at max_tokens
    assert g.cost_usd == pytest.approx((g.prompt_tokens * 2.5 + g.completion_tokens * 10.0) / 1e6)
    assert g.batch_cost_usd == pytest.approx(g.cost_usd / 2)
    wall = est.walls["gpt-4o"]
    assert wall.limited_by == "rpm 60" and wall.seconds == pytest.approx(g.requests) and wall.batched
    served = next(g for g in est.groups if g.model == "local")
    assert served.cost_usd is None and served.batch_cost_usd is None
    # OpenAI's tiles and Qwen's grid price the same 512 x 512 demo image differently
    assert served.prompt_tokens != g.prompt_tokens
    code, out, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--run-dir", str(tmp_path / "run"))
    assert code == 0, err
    assert "gpt-4o" in out and "≤ $" in out and "batched" in out
    assert "wall time: at least" in out  # the RPM floor alone: no seconds per request without evidence


def test_pilot_asks_first_and_refuses_without_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--pilot", "2", "--run-dir", str(run_dir))
    assert code == 2 and "--yes" in err
    assert not (tmp_path / "run-pilot").exists()  # nothing ran


def test_pilot_with_yes_runs_n_tasks_of_each_group_and_estimates_from_them(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path)
    run_dir = tmp_path / "run"
    code, out, err = cli(capsys, "run", str(config), "--dry-run", "--estimate", "--estimate-json", "--pilot", "2",
                         "--yes", "--no-preflight", "--run-dir", str(run_dir))
    assert code == 0, err
    assert "pilot: 8 real jobs" in err
    with open_index(tmp_path / "run-pilot") as index:
        assert index.count() == 8  # 2 tasks x 2 settings x 2 models, seed 0
        tasks = sorted({r.task_id for r in index.rows()})
    cfg = load_config(config)
    all_tasks = [j.task_id for j in _plan_of(cfg) if j.model == "sim-tools" and j.setting == "direct" and j.seed == 0]
    assert tasks == sorted([all_tasks[0], all_tasks[6]])  # spread over the suite, not its first two
    groups = json.loads(out)["groups"]
    assert groups and all(g["basis"] == f"run {tmp_path / 'run-pilot'} (2 jobs)" for g in groups)
    assert not run_dir.exists()  # the sweep itself did not start


def _plan_of(cfg: Any) -> list[Any]:
    with tempfile.TemporaryDirectory() as tmp:
        runs = [load_suite(e, BlobStore(Path(tmp))) for e in cfg.suites]
        return [job for job, _, _, _ in plan(cfg, runs, None)]


def test_spread_takes_even_steps_through_the_items() -> None:
    assert spread(list(range(10)), 3) == [0, 3, 6]
    assert spread(list(range(3)), 5) == [0, 1, 2]


def test_estimate_from_a_folder_that_is_not_a_run_is_a_usage_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "run", str(write_config(tmp_path)), "--dry-run", "--estimate",
                       "--estimate-from", str(tmp_path))
    assert code == 2 and "not a run folder" in err
