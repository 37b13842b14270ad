"""The batch discount: prices of batched models and roles, in the table and in the report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.pricing import Price, model_prices
from fasteval.engine.sweep import RunOptions, run_sweep
from fasteval.view.report import report


def test_batched_entries_pay_the_providers_factor_of_every_price() -> None:
    cfg = {"models": [{"name": "a", "provider": "openai", "model": "gpt-4o", "batch": True},
                      {"name": "b", "provider": "openai", "model": "gpt-4o"}],
           "roles": {"judge": {"provider": "anthropic", "model": "claude-sonnet-4-5", "batch": {"gather_s": 5}}}}
    prices = model_prices(cfg)
    assert prices["a"] == Price(1.25, 5.0, 0.625, 1.25)  # cache reads discounted too; writes at input price
    assert prices["b"] == Price(2.5, 10.0, 1.25)
    assert prices["judge"] == Price(1.5, 7.5, 0.15, 1.875)


def test_the_factor_is_overridden_per_entry_and_per_provider() -> None:
    own = {"models": [{"name": "a", "provider": "openai", "batch": True,
                       "price": {"input": 1, "output": 2, "batch": 0.25}}]}
    assert model_prices(own)["a"] == Price(0.25, 0.5, 0.25, 0.25)
    by_provider = {"prices": {"batch_factor": {"openai": 0.4}},
                   "models": [{"name": "a", "provider": "openai", "batch": True, "price": {"input": 10, "output": 10}}]}
    assert model_prices(by_provider)["a"] == Price(4.0, 4.0, 4.0, 4.0)


def write(tmp: Path, name: str, batch: bool) -> Path:
    model = {"name": "m", "provider": "sim", "policy": "tools", "price": {"input": 1.0, "output": 2.0},
             "batch_api": {"turnaround_s": 0.02}}
    if batch:
        model["batch"] = {"gather_s": 0.05, "poll_s": 0.05}
    cfg = {"seeds": 1, "models": [model], "prices": {"batch_factor": {"sim": 0.5}},
           "suites": [{"name": "demo", "options": {"n_tasks": 3, "image_size": [160, 120]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}]}
    p = tmp / f"{name}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


async def test_report_costs_a_batched_run_at_half_the_interactive_price(tmp_path: Path) -> None:
    await run_sweep(load_config(write(tmp_path, "i", False)), RunOptions(run_dir=tmp_path / "i", progress=False))
    await run_sweep(load_config(write(tmp_path, "b", True)), RunOptions(run_dir=tmp_path / "b", progress=False))
    inter, batched = report(tmp_path / "i"), report(tmp_path / "b")
    assert inter["rows"][0]["tokens"] == batched["rows"][0]["tokens"]
    assert batched["cost_usd"] == pytest.approx(inter["cost_usd"] * 0.5, abs=1e-6)  # rounded to 1e-6 $
