"""Folder names a series must not misread: steps in other scripts' digits, and adapter paths that
look like more adapters once joined into ``name=path,...``.

Real folders, real YAML read by ``load_config``; the LoRA items are checked against the rule
vLLM's ``--lora-modules`` parser follows (``name=path`` when an item holds '=' and no ',', split
at every '='; JSON otherwise), the one fasteval's default ``vllm serve`` command line must meet.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fasteval.config.load import load_config
from fasteval.config.series import series_of, step_of
from fasteval.core.errors import ConfigError
from providers.local.spec import ServeSpec
from tests.config.test_series import adapter, config, hf_checkpoint


@pytest.mark.parametrize("folder", ["checkpoint-٣", "checkpoint-１２", "step_߃", "global_step_3\n", "iter_0003 "])
def test_a_step_in_digits_a_trainer_never_writes_is_no_step(tmp_path: Path, folder: str) -> None:
    hf_checkpoint(tmp_path / "ckpts" / folder)
    assert step_of(tmp_path / "ckpts" / folder) is None
    with pytest.raises(ConfigError, match="no step in the folder name"):
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "ckpts" / "*")}}))


def test_a_model_name_whose_step_is_not_ascii_digits_is_not_a_series_step() -> None:
    assert series_of("run7@٣") is None and series_of("run7@１２") is None and series_of("run7@3") == ("run7", 3)


def _vllm_reads(argv: list[str]) -> tuple[str, list[tuple[str, str]]]:
    """(served model name, [(adapter name, path)]) as vLLM's argument parser takes them from ``argv``."""
    served = next(a.split("=", 1)[1] for a in argv if a.startswith("--served-model-name="))
    items = argv[argv.index("--lora-modules") + 1:]
    items = items[:next((i for i, a in enumerate(items) if a.startswith("-")), len(items))]
    out = []
    for item in items:
        if "=" in item and "," not in item:
            name, path = item.split("=")  # vLLM's own unpacking: a second '=' raises
            out.append((name, path))
        else:
            doc = json.loads(item)
            out.append((doc["name"], doc["path"]))
    return served, out


def test_vllm_reads_each_adapter_back_whatever_its_folder_is_named() -> None:
    adapters = {"-2+3@100": "/ckpts/lr=1e-4,bs=32/checkpoint-100", "run9@200": "/ckpts/plain/checkpoint-200",
                "run9@300": "/ckpts/a=b/checkpoint-300", "run9@400": "/ckpts/x,y/checkpoint-400"}
    spec = ServeSpec(name="-2+3", model="/models/base", lora_modules=adapters)
    argv = spec.command_line(port=8000, host="127.0.0.1", replica=0)
    served, read = _vllm_reads(argv)
    assert served == "-2+3"  # as --served-model-name=NAME: a name starting with '-' is no option
    assert read == list(adapters.items())
    assert "run9@200=/ckpts/plain/checkpoint-200" in argv  # the plain form where it reads back exactly


def test_adapter_folders_that_name_path_lists_cannot_carry_are_refused_for_a_custom_command(tmp_path: Path) -> None:
    base = hf_checkpoint(tmp_path / "base")
    for step in (5, 10):
        adapter(tmp_path / "lr=1e-4,bs=32" / f"checkpoint-{step}")
    command = ["{python}", "-m", "providers.sim", "--port", "{port}", "--lora-modules", "{lora_modules}"]
    entry = {"serve": {"model": str(base), "command": command}, "checkpoints": {"glob": "lr=1e-4,bs=32/checkpoint-*"}}
    with pytest.raises(ConfigError, match=r"lr=1e-4,bs=32/checkpoint-5.*holds ',' or '='"):
        load_config(config(tmp_path, entry))
    del entry["serve"]["command"]  # vLLM's default command passes them as JSON: accepted
    cfg = load_config(config(tmp_path, entry))
    assert [m.name for m in cfg.models] == ["run7@5", "run7@10"]
