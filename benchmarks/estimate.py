"""How close ``fasteval run --dry-run --estimate`` comes to what a sweep then used, per suite.

    .venv/bin/python benchmarks/estimate.py [--pilot 3] [--seeds 3] [--json]

For two suites on the sim (``demo``: crops, the calculator and multi-turn tasks; ``tir-synth``:
Python in the sandbox, 6 rounds), each with a tool-calling and a direct model: a pilot of
``--pilot`` tasks spread over each suite (seed 0, as ``--pilot N`` runs it) runs first, then the whole sweep (``--seeds`` seeds), and the estimate
made from the pilot alone is compared with the sweep's records (requests, prompt and completion
tokens, and the wall time it predicted against the one measured). The baseline in the same run is
the estimate with no evidence: an upper bound, whose ratio to the truth says what evidence buys.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from fasteval.cli.estimate import run_pilot  # noqa: E402
from fasteval.cli.main import main  # noqa: E402
from fasteval.config.load import load_config  # noqa: E402
from fasteval.engine.forecast.estimate import estimate  # noqa: E402
from fasteval.engine.plan import RunOptions  # noqa: E402
from fasteval.runfolder.index import open_index  # noqa: E402

MODELS = [{"name": "sim-tools", "provider": "sim", "policy": "tools", "latency_ms": 20, "misread_rate": 0.2},
          {"name": "sim-direct", "provider": "sim", "policy": "direct", "latency_ms": 20}]
SUITES: dict[str, dict[str, Any]] = {
    "demo": {"name": "demo", "options": {"n_tasks": 24, "seed": 0},
             "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"], "max_rounds": 6},
                          {"name": "direct", "tools": []}]},
    "tir-synth": {"name": "tir-synth", "options": {"seed": 0, "n_per_type": 2},
                  "settings": [{"name": "tool"}, {"name": "no-tool"}]},
}


def _config(tmp: Path, suite: str, seeds: int) -> Path:
    models = MODELS if suite == "demo" else [{**MODELS[0], "name": "sim-oracle", "policy": "oracle"}, MODELS[1]]
    path = tmp / f"{suite}.yaml"
    path.write_text(yaml.safe_dump({"name": suite, "seeds": seeds, "models": models, "suites": [SUITES[suite]],
                                    "run": {"max_concurrency": 16, "sandbox": {"workers": 2}}}))
    return path


def _used(run_dir: Path) -> dict[tuple[str, str], tuple[int, ...]]:
    with open_index(run_dir) as index:
        return {(m, st): index.sums(["rounds", "prompt_tokens", "completion_tokens"], model=m, setting=st)[1:]
                for m, _, st in index.group_sizes()}


def _quiet(args: list[str]) -> int:
    return main([*args, "--no-progress"])


def one_suite(tmp: Path, suite: str, pilot: int, seeds: int) -> dict[str, Any]:
    config = _config(tmp, suite, seeds)
    cfg = load_config(config)
    opts = RunOptions(run_dir=tmp / suite, progress=False)
    pilot_dir = run_pilot(cfg, opts, pilot, yes=True, preflight=False)  # as --pilot N --yes runs it
    assert isinstance(pilot_dir, Path)
    est = estimate(cfg, opts, [pilot_dir])
    bound = estimate(cfg, opts)
    t0 = time.monotonic()
    assert _quiet(["run", str(config), "--run-dir", str(tmp / suite)]) == 0
    wall = time.monotonic() - t0
    used = _used(tmp / suite)
    rows = []
    for g, b in zip(est.groups, bound.groups, strict=True):
        truth = used[(g.model, g.setting)]
        rows.append({"model": g.model, "setting": g.setting, "jobs": g.jobs,
                     **{f"{k}_error_pct": round(100 * (e - t) / t, 1) if t else None
                        for k, e, t in zip(("requests", "prompt", "completion"),
                                           (g.requests, g.prompt_tokens, g.completion_tokens), truth, strict=True)},
                     "bound_prompt_ratio": round(b.prompt_tokens / truth[1], 1) if truth[1] else None})
    est_total = sum(g.prompt_tokens + g.completion_tokens for g in est.groups)
    true_total = sum(t[1] + t[2] for t in used.values())
    return {"suite": suite, "rows": rows, "tokens_error_pct": round(100 * (est_total - true_total) / true_total, 1),
            "wall_estimated_s": round(est.wall_s or 0, 1), "wall_measured_s": round(wall, 1)}


def main_() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pilot", type=int, default=3)
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="fasteval-bench-estimate-") as tmp:
        results = [one_suite(Path(tmp), s, a.pilot, a.seeds) for s in SUITES]
    if a.json:
        print(json.dumps(results, indent=1))
        return
    for r in results:
        print(f"\n{r['suite']}: all tokens {r['tokens_error_pct']:+.1f}% off; wall {r['wall_estimated_s']} s estimated, "
              f"{r['wall_measured_s']} s measured (start-up included)")
        print(f"  {'model':<11} {'setting':<8} {'jobs':>5} {'requests':>9} {'prompt':>8} {'completion':>11} "
              f"{'bound/true prompt':>18}")
        for x in r["rows"]:
            print(f"  {x['model']:<11} {x['setting']:<8} {x['jobs']:>5} {x['requests_error_pct']:>+8.1f}% "
                  f"{x['prompt_error_pct']:>+7.1f}% {x['completion_error_pct']:>+10.1f}% {x['bound_prompt_ratio']:>17}x")


if __name__ == "__main__":
    main_()
