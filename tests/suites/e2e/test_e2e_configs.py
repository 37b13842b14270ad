"""Every config in configs/ loads, and every suite, setting, tool, provider and sim policy it names exists.

Settings a config derives from a suite default under a new name (the prompt-strength ablation, the
VistaHop round sweep) must equal that default except for what the experiment varies, so a change
to a suite's defaults cannot silently leave an ablation behind. ``configs/smoke.yaml`` also runs
end to end here, on the three suites' official-format fixtures.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e_support import cli, latest, load_fixture_module, report_rows, run_summary

from fasteval.config.load import SweepConfig, load_config
from fasteval.engine.plan import build_settings
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import SUITES, Setting, make_suite
from fasteval.tools.base import TOOLS
from providers.local import ServeSpec
from providers.registry import providers
from providers.sim import POLICIES

CONFIGS = Path(__file__).resolve().parents[3] / "configs"
SWEEPS = sorted(CONFIGS.glob("*.yaml"))
MODEL_LISTS = sorted((CONFIGS / "models").glob("*.yaml"))
BENCHMARKS = {"tirbench", "visualtoolbench", "vistahop"}

PENDING_TOOLS: set[str] = set()
"""Tools a config may name before they exist: none, every tool a config names must be registered."""

DERIVED: dict[tuple[str, str], tuple[str, dict[str, Any], dict[str, Any]]] = {
    # (suite, setting): (default it derives from, option changes, field changes)
    ("visualtoolbench", "with-tool-mid"): ("with-tool", {"prompt_level": "mid"}, {}),
    ("visualtoolbench", "with-tool-low"): ("with-tool", {"prompt_level": "low"}, {}),
    ("visualtoolbench", "with-tool-no-vision"): ("with-tool", {}, {"tools": [
        "python_interpreter", "web_search", "calculator", "browser_get_page_text", "historical_weather"]}),
    **{("vistahop", f"search_crop-n{n}"): ("search_crop", {}, {"max_rounds": n}) for n in (6, 8, 12, 16)},
    ("vstar", "zoom-deepeyes"): ("zoom", {"protocol": "deepeyes-text"}, {"tools": []}),
    ("visualprobe", "grounding"): ("zoom", {"protocol": "mini-o3-grounding"}, {"tools": []}),
    ("hrbench", "direct-8k"): ("direct", {}, {}),  # full.yaml: 8K beside 4K under its own names
    ("hrbench", "zoom-8k"): ("zoom", {}, {}),
}


def test_there_is_a_config_per_paper_experiment() -> None:
    names = {p.stem for p in SWEEPS}
    assert {"tirbench-main", "tirbench-no-tool", "tirbench-rotation", "visualtoolbench-main",
            "visualtoolbench-no-tool", "visualtoolbench-prompt-levels", "vistahop-main", "vistahop-no-tool",
            "vistahop-settings", "vistahop-rounds", "smoke"} <= names
    assert {p.stem for p in MODEL_LISTS} >= {"sim", "api", "vllm-local"}


@pytest.mark.parametrize("path", MODEL_LISTS, ids=lambda p: p.name)
def test_model_lists_are_lists_of_models_used_by_some_config(path: Path) -> None:
    models = yaml.safe_load(path.read_text())
    assert isinstance(models, list) and models
    for m in models:
        assert m.get("name") and m.get("provider"), m
    assert any(f"include: models/{path.name}" in p.read_text() for p in SWEEPS), f"{path.name} is included nowhere"


def _check_endpoint(where: str, spec: dict[str, Any]) -> None:
    provider = spec["provider"]
    assert provider in providers(), f"{where}: unknown provider {provider}"
    if provider == "sim":
        assert spec.get("policy", "tools") in POLICIES, f"{where}: unknown sim policy {spec.get('policy')}"
    elif spec.get("serve") is not None:  # a local checkpoint fasteval serves itself
        ServeSpec.from_config(where, spec["serve"])
    else:
        assert spec.get("base_url"), f"{where}: needs base_url"
        if not spec["base_url"].startswith("http://127.0.0.1"):
            assert spec.get("api_key_env"), f"{where}: a hosted endpoint needs api_key_env"


def _settings(cfg: SweepConfig, entry: dict[str, Any], tmp: Path) -> tuple[list[Setting], dict[str, Setting]]:
    suite = make_suite(entry["name"], dict(entry.get("options") or {}), BlobStore(tmp / "blobs"))
    return build_settings(suite, entry.get("settings")), {s.name: s for s in suite.default_settings()}


@pytest.mark.parametrize("path", SWEEPS, ids=lambda p: p.name)
def test_config_loads_and_every_name_it_uses_exists(path: Path, tmp_path: Path) -> None:
    cfg = load_config(path, check_paths=False)  # the benchmark data is not in the repo
    assert cfg.raw.get("name") == path.stem  # the default run folder is runs/<name>
    for m in cfg.models:
        _check_endpoint(f"model {m.name}", dict(m.options))
    for role, spec in cfg.roles.items():
        _check_endpoint(f"role {role}", dict(spec.options))
    for written, entry in zip(cfg.raw["suites"], cfg.suites, strict=True):
        assert entry["name"] in SUITES, entry["name"]
        for e in entry.get("settings") or []:
            unknown = set(e.get("tools") or []) - set(TOOLS) - PENDING_TOOLS
            assert not unknown, f"{path.name}: {entry['name']}/{e['name']}: unknown tools {unknown}"
        settings, defaults = _settings(cfg, entry, tmp_path)
        assert len({s.name for s in settings}) == len(settings), "setting names must be unique"
        for s in settings:
            unknown = set(s.tools or []) - set(TOOLS) - PENDING_TOOLS
            assert not unknown, f"{path.name}: {entry['name']}/{s.name}: unknown tools {unknown}"
            if s.name in defaults:
                continue
            key = (entry["name"], s.name)
            assert key in DERIVED, f"{path.name}: {key} is neither a default setting nor a known derived one"
            base_name, options, fields = DERIVED[key]
            base = defaults[base_name]
            expected = replace(base, name=s.name, options={**base.options, **options}, **fields)
            assert s == expected, f"{path.name}: {s.name} drifted from {base_name}"
        if entry["name"] in BENCHMARKS:
            # relative to the config's folder: the checkout's data/, where `fasteval data fetch` puts it
            assert str(written["options"]["path"]).startswith("../data/")
            if not path.stem.startswith("smoke"):  # the smoke configs check a path, not a paper
                assert cfg.seeds == [0, 1, 2, 3, 4]  # mean ± std over 5 seeds
                assert entry["options"]["fidelity"] == "reference"  # reproduce the papers
        if "extraction" in (entry.get("options") or {}) and entry["options"]["extraction"] == "model":
            assert "extractor" in cfg.roles, f"{path.name}: extraction by model needs an extractor role"
    needs_judge = {"visualtoolbench", "vistahop"} & {e["name"] for e in cfg.suites}
    if needs_judge:
        assert "judge" in cfg.roles, f"{path.name}: {needs_judge} need a judge role"


def test_batched_model_list_is_the_api_list_with_batch_on() -> None:
    plain = yaml.safe_load((CONFIGS / "models" / "api.yaml").read_text())
    batched = yaml.safe_load((CONFIGS / "models" / "api-batch.yaml").read_text())
    assert all(m.get("batch") is True for m in batched)
    assert [{k: v for k, v in m.items() if k != "batch"} for m in batched] == plain


def test_full_config_covers_the_eight_suites_with_batched_api_models() -> None:
    cfg = load_config(CONFIGS / "full.yaml", check_paths=False)
    assert {e["name"] for e in cfg.suites} == {"tirbench", "visualtoolbench", "vistahop", "vstar", "hrbench",
                                               "mme-realworld", "treebench", "visualprobe"}
    assert {e["options"]["version"] for e in cfg.suites if e["name"] == "hrbench"} == {"4k", "8k"}
    assert cfg.seeds == [0, 1, 2, 3, 4]
    hosted = [m for m in cfg.models if not str(m.base_url or "http://127.0.0.1").startswith("http://127.0.0.1")
              and not m.serve]
    assert hosted and all(m.batch for m in hosted)
    assert any(m.serve for m in cfg.models)


def test_round_sweep_and_prompt_levels_cover_the_papers_values(tmp_path: Path) -> None:
    rounds = load_config(CONFIGS / "vistahop-rounds.yaml", check_paths=False)
    settings, _ = _settings(rounds, rounds.suites[0], tmp_path)
    assert sorted(s.max_rounds for s in settings) == [6, 8, 10, 12, 16]
    levels = load_config(CONFIGS / "visualtoolbench-prompt-levels.yaml", check_paths=False)
    settings, _ = _settings(levels, levels.suites[0], tmp_path)
    assert sorted(s.options["prompt_level"] for s in settings) == ["high", "low", "mid"]


@pytest.mark.slow
def test_smoke_config_runs_all_three_suites_on_official_format_fixtures(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tir = load_fixture_module("tirbench/conftest.py")
    vtb = load_fixture_module("visualtoolbench/vtb_fixtures.py")
    vh = load_fixture_module("vistahop/conftest.py")
    (tmp_path / "vh").mkdir()
    (tmp_path / "vh" / "a.png").write_bytes(vh.png_bytes((255, 0, 0)))
    paths = {
        "tirbench": str(tir.write_release(tmp_path / "TIR-Bench", tir.GOOD_ROWS)),
        "visualtoolbench": str(vtb.write_parquet(tmp_path / "test.parquet", vtb.sample_rows()[:2])),
        "vistahop": str(vh.write_jsonl(tmp_path / "vh" / "vistahop.jsonl", [
            vh.record("Who owns it?", ["ACME"], ["a.png"], evidence_steps=3),
            vh.record("When?", "1999", ["a.png"], evidence_steps=7)])),
    }
    raw = yaml.safe_load((CONFIGS / "smoke.yaml").read_text())
    raw["seeds"] = 1
    raw["models"] = [{"include": str(CONFIGS / "models" / "sim.yaml")}]
    raw["run"]["cache"] = {"path": str(tmp_path / "cache.sqlite")}
    for entry in raw["suites"]:
        entry["options"]["path"] = paths[entry["name"]]
    config = tmp_path / "smoke.yaml"
    config.write_text(yaml.safe_dump(raw))
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(config), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err
    bad = [(r["suite"], r["setting"], r.get("error")) for r in latest(run_dir) if r["status"] != "ok"]
    assert not bad, bad
    jobs = 2 * (5 * 2 + 2 + 2)  # models × (tirbench 5 tasks × 2 settings + vtb 2 + vistahop 2)
    assert run_summary(err) == (jobs, 0, 0, jobs)
    recs = latest(run_dir)
    assert all(r["status"] == "ok" for r in recs)
    tool_runs = [r for r in recs if (r["model"], r["setting"]) == ("sim-tools", "tool")]
    assert tool_runs and all(c["name"] == "python_image_processing" and c["status"] == "ok"
                             for r in tool_runs for c in r["trajectory"]["tool_calls"])
    rows = report_rows(capsys, run_dir)
    assert len(rows) == 2 * 4 and all(row.get("suite_metrics") for row in rows.values())
