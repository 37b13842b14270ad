"""The batch discount: prices of batched models and roles, in the table and in the report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.pricing import Price, cost_usd, model_prices
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.view.report import report


def batched(usage: dict[str, int]) -> dict[str, int]:
    """Usage every token of which a batch API served."""
    return {**usage, **{f"batch_{k}": v for k, v in usage.items()}}


USAGE = {"prompt_tokens": 3_000_000, "completion_tokens": 1_000_000, "cache_read_tokens": 1_000_000,
         "cache_write_tokens": 1_000_000}


def test_batched_entries_pay_the_providers_factor_of_every_price() -> None:
    cfg = {"models": [{"name": "a", "provider": "openai", "model": "gpt-4o", "batch": True},
                      {"name": "b", "provider": "openai", "model": "gpt-4o"}],
           "roles": {"judge": {"provider": "anthropic", "model": "claude-sonnet-4-5", "batch": {"gather_s": 5}}}}
    prices = model_prices(cfg)
    assert prices["a"] == Price(2.5, 10.0, 1.25, batch=0.5)
    assert prices["b"] == Price(2.5, 10.0, 1.25)
    assert prices["judge"] == Price(3.0, 15.0, 0.30, 3.75, batch=0.5)
    full = 2.5 + 10.0 + 1.25 + 2.5  # uncached input, output, cache read, cache write at the input price
    assert cost_usd(batched(USAGE), prices["a"]) == pytest.approx(full * 0.5)  # cache reads and writes too
    assert cost_usd(USAGE, prices["a"]) == pytest.approx(full)  # nothing rode in a batch: full price


def test_only_the_batched_part_of_a_record_is_discounted() -> None:
    price = Price(1.0, 2.0, batch=0.5)
    half = {"prompt_tokens": 2_000_000, "completion_tokens": 2_000_000, "batch_prompt_tokens": 1_000_000,
            "batch_completion_tokens": 1_000_000}
    assert cost_usd(half, price) == pytest.approx((1.0 + 2.0) * 0.5 + (1.0 + 2.0))


def test_the_factor_is_overridden_per_entry_and_per_provider() -> None:
    own = {"models": [{"name": "a", "provider": "openai", "batch": True,
                       "price": {"input": 1, "output": 2, "batch": 0.25}}]}
    assert cost_usd(batched({"prompt_tokens": 10**6, "completion_tokens": 10**6}), model_prices(own)["a"]) == \
        pytest.approx(0.75)
    by_provider = {"prices": {"batch_factor": {"openai": 0.4}},
                   "models": [{"name": "a", "provider": "openai", "batch": True, "price": {"input": 10, "output": 10}}]}
    assert model_prices(by_provider)["a"] == Price(10.0, 10.0, batch=0.4)
    assert cost_usd(batched({"prompt_tokens": 10**6}), model_prices(by_provider)["a"]) == pytest.approx(4.0)


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
    inter, batch = report(tmp_path / "i"), report(tmp_path / "b")
    tokens = batch["rows"][0]["tokens"]
    assert inter["rows"][0]["tokens"] == {k: v for k, v in tokens.items() if not k.startswith("batch_")}
    assert all(tokens[f"batch_{k}"] == v for k, v in inter["rows"][0]["tokens"].items() if v)  # all rode in batches
    assert batch["cost_usd"] == pytest.approx(inter["cost_usd"] * 0.5, abs=1e-6)  # rounded to 1e-6 $
