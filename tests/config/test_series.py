"""A series entry expands at load time into one served model per checkpoint, named ``<entry>@<step>``.

Real folders in the layouts trainers write (HF Trainer, verl, Megatron, plain steps), real YAML
files read by ``load_config``; nothing is served here (tests/engine/test_series_serving.py
serves them with the sim).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.config.series import not_loadable, series_of, step_of
from fasteval.core.errors import ConfigError


def hf_checkpoint(folder: Path, *, shards: int = 1, written: int | None = None) -> Path:
    """An HF folder: config.json and ``shards`` weight files (an index when more than one);
    ``written`` of them actually on disk (a trainer still writing)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text('{"model_type": "tiny"}')
    if shards == 1:
        if written != 0:
            (folder / "model.safetensors").write_bytes(b"\0" * 32)
        return folder
    names = [f"model-{i:05d}-of-{shards:05d}.safetensors" for i in range(1, shards + 1)]
    (folder / "model.safetensors.index.json").write_bytes(
        orjson.dumps({"weight_map": {f"layer{i}": n for i, n in enumerate(names)}}))
    for n in names[: shards if written is None else written]:
        (folder / n).write_bytes(b"\0" * 32)
    return folder


def config(tmp: Path, entry: dict[str, Any]) -> Path:
    doc = {"seeds": 1, "models": [{"name": "run7", "provider": "vllm", **entry}],
           "suites": [{"name": "demo", "options": {"n_tasks": 1}, "settings": [{"name": "plain"}]}]}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def names(path: Path) -> list[str]:
    return [m.name for m in load_config(path).models]


def test_a_glob_in_serve_model_expands_in_step_order_not_name_order(tmp_path: Path) -> None:
    for step in (1000, 200, 30):
        hf_checkpoint(tmp_path / "ckpts" / f"checkpoint-{step}")
    path = config(tmp_path, {"serve": {"model": "ckpts/checkpoint-*"}})  # relative to the config file
    cfg = load_config(path)
    assert [m.name for m in cfg.models] == ["run7@30", "run7@200", "run7@1000"]
    assert cfg.models[0].serve["model"] == str((tmp_path / "ckpts" / "checkpoint-30").resolve())
    assert [c.step for c in cfg.series["run7"]] == [30, 200, 1000]
    # the manifest keeps the entry as written: a checkpoint landing later does not change the hash
    assert [m["name"] for m in cfg.raw["models"]] == ["run7"]
    before = cfg.hash()
    hf_checkpoint(tmp_path / "ckpts" / "checkpoint-2000")
    after = load_config(path)
    assert after.hash() == before and after.models[-1].name == "run7@2000"


def test_each_trainer_layout_gives_its_step_and_the_folder_vllm_loads(tmp_path: Path) -> None:
    # verl keeps the HF files in global_step_N/actor/huggingface (checkpoint.save_contents with hf_model)
    hf_checkpoint(tmp_path / "verl" / "global_step_40" / "actor" / "huggingface")
    (tmp_path / "verl" / "global_step_40" / "actor" / "fsdp_config.json").write_text("{}")
    cfg = load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "verl" / "global_step_*")}}))
    assert cfg.models[0].name == "run7@40"
    assert cfg.models[0].serve["model"].endswith("global_step_40/actor/huggingface")
    assert step_of(Path("/x/iter_0002000")) == 2000
    assert step_of(Path("/x/step-7")) == 7 and step_of(Path("/x/step_8")) == 8
    assert step_of(Path("/x/global_step_5/actor/huggingface")) == 5
    assert step_of(Path("/x/final")) is None


@pytest.mark.parametrize(("block", "steps"), [
    ({"every": 200}, [200, 400, 600]),
    ({"last": 2}, [500, 600]),
    ({"min_step": 250, "max_step": 500}, [300, 400, 500]),
    ({"every": 200, "last": 1}, [600]),
    ({"order": "newest_first", "min_step": 400}, [600, 500, 400]),
])
def test_a_checkpoints_block_selects_and_orders_steps(tmp_path: Path, block: dict[str, Any],
                                                      steps: list[int]) -> None:
    for step in range(100, 700, 100):
        hf_checkpoint(tmp_path / "run" / f"step_{step}")
    path = config(tmp_path, {"checkpoints": {"glob": "run/step_*", **block}, "serve": {"model": "ignored"}})
    assert names(path) == [f"run7@{s}" for s in steps]


def test_a_folder_that_is_not_loadable_is_refused_with_the_reason(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path / "run" / "checkpoint-100")
    hf_checkpoint(tmp_path / "run" / "checkpoint-200", shards=3, written=2)  # still being written
    (tmp_path / "run" / "checkpoint-300").mkdir()
    verl = tmp_path / "run" / "global_step_400" / "actor"
    (verl / "huggingface").mkdir(parents=True)
    (verl / "huggingface" / "config.json").write_text("{}")  # verl's default: config and tokenizer only
    (verl / "model_world_size_2_rank_0.pt").write_bytes(b"\0")
    megatron = tmp_path / "run" / "iter_0000500" / "mp_rank_00"
    megatron.mkdir(parents=True)
    with pytest.raises(ConfigError) as e:
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "*")}}))
    text = str(e.value)
    assert "checkpoint-100" not in text
    assert "checkpoint-200: 1 weight file(s) its index names are missing (first: model-00003-of-00003" in text
    assert "checkpoint-300: no config.json" in text
    assert "global_step_400: verl saved config and tokenizer only" in text and "hf_model" in text
    assert "iter_0000500: a Megatron/torch distributed checkpoint" in text
    assert "sweep.yaml:" in text and "models[0].serve.model" in text


def test_no_match_and_a_folder_without_a_step_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no checkpoint folder matches"):
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "none" / "checkpoint-*")}}))
    hf_checkpoint(tmp_path / "run" / "best")
    with pytest.raises(ConfigError, match="no step in the folder name"):
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "*")}}))


def test_a_series_needs_serve_and_a_known_checkpoints_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="a series needs serve"):
        load_config(config(tmp_path, {"base_url": "http://127.0.0.1:1/v1", "checkpoints": {"glob": "x/*"}}))
    with pytest.raises(ConfigError, match="evry"):
        load_config(config(tmp_path, {"checkpoints": {"evry": 2}, "serve": {"model": "x/*"}}))


def test_watch_readiness_leaves_an_incomplete_folder_pending_instead_of_refusing(tmp_path: Path) -> None:
    hf_checkpoint(tmp_path / "run" / "checkpoint-1")
    hf_checkpoint(tmp_path / "run" / "checkpoint-2", shards=2, written=1)
    cfg = load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "checkpoint-*")}}),
                      ready=not_loadable)
    assert [m.name for m in cfg.models] == ["run7@1"]
    assert len(cfg.pending["run7"]) == 1 and "checkpoint-2" in cfg.pending["run7"][0]


def test_each_step_gets_its_own_cache_identity(tmp_path: Path) -> None:
    for step in (1, 2):
        hf_checkpoint(tmp_path / "run" / f"checkpoint-{step}")
    path = config(tmp_path, {"endpoint_id": "lab-run7", "serve": {"model": str(tmp_path / "run" / "checkpoint-*")}})
    assert [m.endpoint_id for m in load_config(path).models] == ["lab-run7@1", "lab-run7@2"]
    assert series_of("run7@2000") == ("run7", 2000) and series_of("gpt-4o") is None


def adapter(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text('{"peft_type": "LORA", "r": 8}')
    (folder / "adapter_model.safetensors").write_bytes(b"\0" * 16)
    return folder


def test_a_lora_series_keeps_its_base_and_serves_each_adapter_by_its_step_name(tmp_path: Path) -> None:
    base = hf_checkpoint(tmp_path / "base")
    for step in (5, 10):
        adapter(tmp_path / "lora" / f"checkpoint-{step}")
    cfg = load_config(config(tmp_path, {"serve": {"model": str(base)}, "checkpoints": {"glob": "lora/checkpoint-*"}}))
    assert [m.serve["model"] for m in cfg.models] == [str(base)] * 2
    assert cfg.models[1].serve["lora_modules"] == {"run7@10": str((tmp_path / "lora" / "checkpoint-10").resolve())}
    assert all(c.adapter for c in cfg.series["run7"])
    with pytest.raises(ConfigError, match="name the base model in serve.model"):
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "lora" / "checkpoint-*")}}))
    hf_checkpoint(tmp_path / "lora" / "checkpoint-15")
    with pytest.raises(ConfigError, match="LoRA adapters and full checkpoints in one series"):
        load_config(config(tmp_path, {"serve": {"model": str(base)}, "checkpoints": {"glob": "lora/checkpoint-*"}}))


def test_a_plain_load_skips_a_step_still_being_written_instead_of_refusing_the_config(tmp_path: Path) -> None:
    """#39 item 5: ``run`` and ``config check`` refused the whole config (exit 2) for one step mid-save."""
    hf_checkpoint(tmp_path / "run" / "checkpoint-100")
    (tmp_path / "run" / "checkpoint-200").mkdir()  # the trainer has made the folder, no config.json yet
    cfg = load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "checkpoint-*")}}))
    assert [m.name for m in cfg.models] == ["run7@100"]
    assert cfg.pending["run7"] == [f"{tmp_path / 'run' / 'checkpoint-200'}: no config.json (not an HF checkpoint "
                                   "folder): taken for a step still being written"]
    # an older step that is incomplete is not being written (trainers save in step order): still refused
    hf_checkpoint(tmp_path / "run" / "checkpoint-300")
    with pytest.raises(ConfigError, match="checkpoint-200: no config.json"):
        load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "checkpoint-*")}}))


def test_with_a_marker_a_plain_load_takes_only_the_steps_their_trainer_marked_done(tmp_path: Path) -> None:
    for step in (1, 2, 3):
        hf_checkpoint(tmp_path / "run" / f"checkpoint-{step}", written=0 if step == 2 else None)
        if step != 2:
            (tmp_path / "run" / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
    hf_checkpoint(tmp_path / "run" / "checkpoint-4")  # loadable, but not marked done: not served yet
    cfg = load_config(config(tmp_path, {"serve": {"model": str(tmp_path / "run" / "checkpoint-*")},
                                        "checkpoints": {"marker": "trainer_state.json"}}))
    assert [m.name for m in cfg.models] == ["run7@1", "run7@3"]
    assert [line.split(": ", 1)[1] for line in cfg.pending["run7"]] == [
        "no trainer_state.json yet (its trainer has not marked it done)"] * 2
