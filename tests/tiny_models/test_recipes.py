"""A tiny checkpoint's cache key follows what its recipe trains; its modules import without torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.tiny_models import calculator, zoom
from tests.tiny_models.recipe import Recipe

REVIEWED = {"qwen2-calculator": "fc4ab86c5f089215", "idefics3-zoom": "18f189895f40bcdf"}
"""Each recipe's source digest when its key was last checked against what it trains.

Both keys are the file hashes the recipes had in providers/local/ (tiny_checkpoint.py, tiny_vlm.py),
so the builds cached then are still used: the move shared the tokenizer, the template and the build
steps, and every training dialogue renders to the same text (checked with jinja2 on all 18,080
prompts of the calculator's corpus, training set and check; the VLM's template is unchanged)."""


@pytest.mark.parametrize("recipe", [calculator.RECIPE, zoom.RECIPE], ids=lambda r: r.name)
def test_a_changed_recipe_is_reviewed_before_its_cached_build_is_reused(recipe: Recipe) -> None:
    """The cache is keyed by ``Recipe.key``, not by the file's bytes: a source change must be looked at."""
    found = recipe.source_digest()
    assert found == REVIEWED[recipe.name], (
        f"{recipe.source.name} or recipe.py changed (source digest {found}, reviewed {REVIEWED[recipe.name]}). "
        f"If what {recipe.name} trains changed, give its Recipe a new key (the next `make test-vllm` trains it "
        f"anew); either way record {found!r} in REVIEWED.")


@pytest.mark.parametrize("recipe", [calculator.RECIPE, zoom.RECIPE], ids=lambda r: r.name)
def test_a_recipe_runs_as_a_script_beside_its_shared_module(recipe: Recipe, tmp_path: Path) -> None:
    """The vLLM venv's Python runs the file by its path, with neither fasteval nor the repository on its path."""
    script = recipe.source
    # -S: no site-packages (no fasteval, no editable install); the script's folder is on the path
    proc = subprocess.run([sys.executable, "-S", str(script), "--help"], capture_output=True, text=True,
                          timeout=60, cwd=tmp_path, env={"HOME": str(tmp_path), "COLUMNS": "300"})
    assert proc.returncode == 0, proc.stderr
    assert f"{tmp_path}/.cache/fasteval/tiny-models/{recipe.name}-{recipe.key})" in proc.stdout  # the default --out
