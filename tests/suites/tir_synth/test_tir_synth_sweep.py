"""configs/tir-synth.yaml end to end: the sweep's sandbox pool lets the oracle score 1.0; guess does not."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep

CONFIG = Path(__file__).resolve().parents[3] / "configs" / "tir-synth.yaml"


@pytest.mark.slow
async def test_config_sweep_gives_oracle_full_marks_with_the_tool_only(tmp_path: Path) -> None:
    cfg = yaml.safe_load(CONFIG.read_text())
    cfg["seeds"] = 2
    cfg["suites"][0]["options"]["n_per_type"] = 1
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    res = await run_sweep(load_config(path), RunOptions(run_dir=tmp_path / "run", progress=False))
    assert res.ok > 0
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for line in (tmp_path / "run" / "records.jsonl").read_bytes().splitlines():
        rec = orjson.loads(line)
        assert rec["status"] == "ok", rec["error"]
        scores[(rec["model"], rec["setting"])].append(rec["score"])
        if rec["model"] == "sim-oracle" and rec["setting"] == "tool":
            calls = rec["trajectory"]["tool_calls"]
            assert calls and all(c["name"] == "python_image_processing" and c["status"] == "ok" for c in calls)
    mean = {key: sum(v) / len(v) for key, v in scores.items()}
    assert mean[("sim-oracle", "tool")] == 1.0
    assert mean[("sim-guess", "tool")] < 0.6 and mean[("sim-oracle", "no-tool")] < 0.6
