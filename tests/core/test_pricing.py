"""Prices: table lookup, the cost arithmetic with cache reads and writes, and costs in the report."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.pricing import PRICES, Price, cost_usd, lookup, price_for
from fasteval.engine.plan import RunOptions
from fasteval.engine.run.sweep import run_sweep
from fasteval.view.report import report
from providers.registry import price_terms


def test_longest_prefix_wins_and_unknown_models_have_no_price() -> None:
    assert lookup("gpt-4o-mini-2024-07-18") == PRICES["gpt-4o-mini"]
    assert lookup("gpt-4o-2024-11-20") == PRICES["gpt-4o"]
    assert lookup("anthropic/claude-sonnet-4-5-20250929") == PRICES["claude-sonnet-4"]
    assert lookup("Qwen/Qwen2.5-VL-7B-Instruct") is None


def test_cost_bills_cached_tokens_at_their_own_prices() -> None:
    price = Price(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
    usage = {"prompt_tokens": 1_000_000, "cache_read_tokens": 600_000, "cache_write_tokens": 100_000,
             "completion_tokens": 10_000}
    assert cost_usd(usage, price) == pytest.approx(0.3 * 3.0 + 0.6 * 0.3 + 0.1 * 3.75 + 0.01 * 15.0)
    assert cost_usd({"prompt_tokens": 10, "cache_read_tokens": 10}, Price(1.0, 1.0)) == pytest.approx(10 / 1e6)


def test_config_prices_override_the_table_and_bad_ones_are_refused() -> None:
    assert price_for("m", {"model": "gpt-4o", "price": {"input": 1, "output": 2}}) == Price(1.0, 2.0)
    assert price_for("m", {"model": "gpt-4o"}, {"m": {"input": 5, "output": 6}}) == Price(5.0, 6.0)
    sim, openai = {"provider": "sim", "model": "gpt-4o"}, {"provider": "openai", "model": "gpt-4o"}
    assert price_for("m", sim, free=price_terms(sim).free) is None  # the embedded sim costs nothing
    assert price_for("m", openai, free=price_terms(openai).free) is not None
    with pytest.raises(ValueError, match="input and output"):
        price_for("m", {"price": {"inputs": 1}})


async def test_report_shows_tokens_and_cost_per_row_and_for_the_run(tmp_path: Path) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({
        "seeds": [0, 1],
        "models": [{"name": "priced", "provider": "sim", "policy": "tools", "price": {"input": 2.0, "output": 8.0}},
                   {"name": "free", "provider": "sim", "policy": "tools"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [200, 160]},
                    "settings": [{"name": "tools", "tools": ["image_zoom_in_tool", "calculator"]}]}]}))
    await run_sweep(load_config(path), RunOptions(run_dir=tmp_path / "run", progress=False))
    rep = report(tmp_path / "run")
    rows = {r["model"]: r for r in rep["rows"]}
    tokens = rows["priced"]["tokens"]
    assert tokens["prompt_tokens"] > 0 and tokens["completion_tokens"] > 0
    expected = (tokens["prompt_tokens"] * 2.0 + tokens["completion_tokens"] * 8.0) / 1e6
    assert rows["priced"]["cost_usd"] == pytest.approx(expected, rel=1e-4)
    assert rows["free"]["cost_usd"] is None and rows["free"]["tokens"]["prompt_tokens"] > 0
    assert rep["cost_usd"] == pytest.approx(expected, rel=1e-4)
