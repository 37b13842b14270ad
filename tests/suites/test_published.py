"""Published numbers: a config's own ``published:`` is checked at load like every other key."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.suites.published import config_scores


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
