"""Published numbers: a config's own ``published:`` is checked at load like every other key, and the
shipped ones each sit beside a suite and setting our configs run, with the source they were read in."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import pyvips
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.suites.base import SUITES
from fasteval.suites.published import config_scores, shipped_scores
from fasteval.view.leaderboard import short_paper

_SUPPORT = Path(__file__).resolve().parent / "e2e" / "e2e_support.py"
_spec = importlib.util.spec_from_file_location("twi_e2e_support", _SUPPORT)
assert _spec is not None and _spec.loader is not None
support = sys.modules.get("twi_e2e_support") or importlib.util.module_from_spec(_spec)
if "twi_e2e_support" not in sys.modules:
    sys.modules["twi_e2e_support"] = support
    _spec.loader.exec_module(support)


def _config(published: Any) -> dict[str, Any]:
    return {"seeds": 1, "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools"}],
            "suites": [{"name": "demo", "options": {"n_tasks": 2}}], "published": published}


def _write(tmp_path: Path, cfg: dict[str, Any]) -> Path:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


GOOD = {"suite": "vistahop", "setting": "search_crop", "model": "Ours-7B", "match": ["sim-tools"], "value": 21.5,
        "paper": "Our report", "table": "Table 2"}


def test_a_valid_entry_loads_and_is_typed(tmp_path: Path) -> None:
    cfg = load_config(_write(tmp_path, _config([GOOD])))
    [score] = config_scores(cfg.raw)
    assert (score.suite, score.fraction, score.origin, score.match) == ("vistahop", 0.215, "config", ("sim-tools",))


def test_bad_entries_are_each_named_with_their_line(tmp_path: Path) -> None:
    bad = [{**GOOD, "suite": "vistahopp"}, {**GOOD, "value": 2150}, {k: v for k, v in GOOD.items() if k != "table"},
           {**GOOD, "tabel": "Table 2"}, "VistaHop 21.5"]
    with pytest.raises(ConfigError) as e:
        load_config(_write(tmp_path, _config(bad)))
    text = "\n".join(e.value.problems)
    assert "published[0].suite: unknown suite 'vistahopp'; did you mean 'vistahop'?" in text
    assert "published[1].value: 2150 is not a percentage" in text
    assert "published[2]: missing required key 'table'" in text
    assert "published[3].tabel: unknown key; did you mean 'table'?" in text
    assert "published[4]: expected a mapping" in text
    assert all(p.startswith(f"{tmp_path / 'sweep.yaml'}:") for p in e.value.problems)


# --- the shipped numbers ------------------------------------------------------------------------------

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def _settings_configs_run() -> dict[str, set[str]]:
    """Suite -> the setting names some sweep config in configs/ runs it under."""
    out: dict[str, set[str]] = {}
    for path in CONFIGS.glob("*.yaml"):
        for entry in yaml.safe_load(path.read_text()).get("suites") or []:
            names = {s["name"] for s in entry.get("settings") or []}
            out.setdefault(entry["name"], set()).update(names)
    return out


def test_every_shipped_number_is_beside_a_suite_and_setting_a_config_runs() -> None:
    """A number under a setting no config runs would never reach a leaderboard: a typo, said here."""
    runs = _settings_configs_run()
    scores = shipped_scores()
    assert {"vistahop", "tirbench", "visualtoolbench", "vstar", "hrbench"} <= {s.suite for s in scores}
    for s in scores:
        assert s.suite in SUITES, s
        assert s.setting in runs.get(s.suite, set()), f"{s.suite}/{s.setting} ({s.model}): no config runs it"
        assert 0 < s.value < 100 and s.value == round(s.value, 2), s  # percent as printed, not a fraction
        assert s.metric and s.match and all(m.strip() == m and m for m in s.match), s


def test_numbers_read_in_a_readme_carry_the_repository_they_were_read_in() -> None:
    readme = [s for s in shipped_scores() if s.table.startswith("README")]
    assert readme
    for s in readme:
        assert s.note.startswith("source: github.com/") and "README.md" in s.note, s


def test_hrbench_8k_numbers_sit_under_the_8k_settings_and_4k_ones_do_not() -> None:
    """One suite, two versions told apart only by the setting's name (configs/full.yaml's -8k)."""
    hr = [s for s in shipped_scores() if s.suite == "hrbench"]
    assert {s.setting for s in hr} >= {"direct", "direct-8k"}
    for s in hr:
        version = "8K" if "8K" in s.metric else "4K" if "4K" in s.metric else None
        assert version is not None, s
        assert s.setting.endswith("-8k") == (version == "8K"), s


def test_a_sim_vstar_sweep_shows_the_shipped_number_beside_ours(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """A real sweep of a model named like a paper's (gpt-4o): its V* cell carries that paper's number."""
    papers = [s for s in shipped_scores() if s.suite == "vstar" and s.setting == "direct" and s.matches(["gpt-4o"])]
    assert papers
    folder = tmp_path / "vstar"
    for category, options in (("direct_attributes", ["red", "blue", "green", "white"]),
                              ("relative_position", ["left", "right"])):
        (folder / category).mkdir(parents=True)
        pyvips.Image.black(64, 48, bands=3).write_to_file(str(folder / category / "sa_1.jpg"))
        (folder / category / "sa_1.json").write_text(json.dumps(
            {"target_object": ["x"], "bbox": [[1, 2, 3, 4]], "question": "Which one?", "options": options}))
    cfg = {"name": "board", "seeds": 1,
           "models": [{"name": "gpt-4o", "provider": "sim", "policy": "scripted", "script": [],
                       "default_reply": "A"}],
           "suites": [{"name": "vstar", "options": {"path": str(folder)}, "settings": [{"name": "direct"}]}]}
    run_dir = tmp_path / "run"
    code, _, err = support.cli(capsys, "run", str(support.write_config(tmp_path, cfg)), "--run-dir", str(run_dir),
                               "--no-progress")
    assert code == 0, err
    code, out, err = support.cli(capsys, "report", str(run_dir), "--leaderboard", "--format", "json")
    assert code == 0, err
    [row] = json.loads(out)["rows"]
    cell = row["cells"]["vstar/direct"]
    assert 0 <= cell["mean"] <= 1
    assert [(p["model"], p["value"], p["paper"], p["table"], p["origin"]) for p in cell["published"]] == [
        (s.model, s.fraction, s.paper, s.table, "shipped") for s in papers]
    code, out, _ = support.cli(capsys, "report", str(run_dir), "--leaderboard", "--format", "markdown")
    assert code == 0
    for s in papers:
        assert f"paper {s.value:g} ({short_paper(s.paper)} {s.table}, as {s.model})" in out
