"""The tir-synth demo suite end to end through each native wire: the oracle solves every task
only if code, tool results and images cross the Anthropic and Gemini translations intact."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.providers.native.native_support import sweep


@pytest.mark.slow
@pytest.mark.parametrize("wire", ["anthropic", "gemini"])
async def test_tir_synth_oracle_scores_full_marks_with_tools(wire: str, tmp_path: Path) -> None:
    res, records = await sweep(tmp_path, {
        "seeds": 1,
        "models": [{"name": f"oracle-{wire}", "provider": "sim", "wire": wire, "policy": "oracle"},
                   {"name": f"guess-{wire}", "provider": "sim", "wire": wire, "policy": "guess"}],
        "suites": [{"name": "tir-synth", "options": {"seed": 0, "n_per_type": 1},
                    "settings": [{"name": "tool"}, {"name": "no-tool"}]}],
        "run": {"sandbox": {"workers": 2}}})
    assert res.errors == 0, [r["error"] for r in records if r["status"] != "ok"]
    scores: dict[tuple[str, str], list[float]] = defaultdict(list)
    for r in records:
        scores[(r["model"], r["setting"])].append(r["score"])
    mean = {k: sum(v) / len(v) for k, v in scores.items()}
    assert mean[(f"oracle-{wire}", "tool")] == 1.0
    assert mean[(f"guess-{wire}", "tool")] < 0.6 and mean[(f"oracle-{wire}", "no-tool")] < 0.6
