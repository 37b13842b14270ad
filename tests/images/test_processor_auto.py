"""``image_resize: auto``: the rule read from a served checkpoint's own preprocessor_config.json."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.images.processor import longest_edge_size, processor_from_checkpoint, processor_resize


def checkpoint(tmp: Path, name: str, preprocessor: dict[str, Any]) -> Path:
    folder = tmp / name
    folder.mkdir()
    (folder / "preprocessor_config.json").write_text(json.dumps(preprocessor))
    return folder


def test_idefics3_longest_edge_is_read_and_a_resized_image_is_not_resized_again(tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path, "smolvlm", {"image_processor_type": "Idefics3ImageProcessor",
                                            "size": {"longest_edge": 1536}, "max_image_size": {"longest_edge": 384},
                                            "do_image_splitting": True})
    rule = processor_resize("auto", ckpt)
    assert rule is not None and rule.longest_edge == 1536 and rule.name == "Idefics3ImageProcessor"
    assert rule.target(8192, 4608) == (1536, 864)
    assert rule.target(4608, 8192) == (864, 1536)
    assert rule.target(1000, 700) is None  # the server enlarges it: sent as it is
    rng = random.Random(0)
    for _ in range(2000):  # what we send, the processor maps to itself: no second resize, the same tiles
        w, h = rng.randint(32, 9000), rng.randint(32, 9000)  # (a 5528x3 strip gains a row: 1 px is odd)
        th, tw = longest_edge_size(h, w, 1536)
        assert longest_edge_size(th, tw, 1536) == (th, tw), (w, h)
    single = checkpoint(tmp_path, "single", {"image_processor_type": "Idefics3ImageProcessorPil",
                                             "size": {"longest_edge": 1536}, "max_image_size": {"longest_edge": 384},
                                             "do_image_splitting": False})
    assert processor_from_checkpoint(single).longest_edge == 384  # one tile: the tile's edge
    nested = tmp_path / "transformers5"
    nested.mkdir()
    (nested / "processor_config.json").write_text(json.dumps({"image_seq_len": 16, "image_processor": {
        "image_processor_type": "Idefics3ImageProcessor", "size": {"longest_edge": 128},
        "max_image_size": {"longest_edge": 64}}}))
    assert processor_from_checkpoint(nested).longest_edge == 128  # transformers 5 nests it in the processor's


def test_qwen_vl_patch_merge_and_pixels_are_read_under_either_name(tmp_path: Path) -> None:
    old = checkpoint(tmp_path, "qwen25", {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14,
                                          "merge_size": 2, "min_pixels": 3136, "max_pixels": 12845056})
    new = checkpoint(tmp_path, "qwen3", {"image_processor_type": "Qwen2VLImageProcessorFast", "patch_size": 16,
                                         "merge_size": 2, "size": {"shortest_edge": 65536, "longest_edge": 16777216}})
    assert processor_from_checkpoint(old).as_dict() == {"name": "Qwen2VLImageProcessor", "factor": 28,
                                                        "min_pixels": 3136, "max_pixels": 12845056}
    rule = processor_from_checkpoint(new)
    assert (rule.factor, rule.min_pixels, rule.max_pixels) == (32, 65536, 16777216)


@pytest.mark.parametrize("content, reason", [
    (None, "cannot be read"),
    ({"image_processor_type": "CLIPImageProcessor"}, "does not know the image processor 'CLIPImageProcessor'"),
    ({"image_processor_type": "Qwen2VLImageProcessor", "merge_size": 2}, "has no 'patch_size'"),
    ({"image_processor_type": "Idefics3ImageProcessor", "size": {"longest_edge": "big"}}, "positive integer"),
])
def test_a_checkpoint_auto_cannot_read_says_why(tmp_path: Path, content: Any, reason: str) -> None:
    folder = tmp_path / "ckpt"
    folder.mkdir()
    if content is not None:
        (folder / "preprocessor_config.json").write_text(json.dumps(content))
    with pytest.raises(ValueError, match=reason):
        processor_resize("auto", folder)


def test_config_check_refuses_auto_without_a_local_checkpoint_and_accepts_it_with_one(tmp_path: Path) -> None:
    ckpt = checkpoint(tmp_path, "ckpt", {"image_processor_type": "Idefics3ImageProcessor",
                                         "size": {"longest_edge": 128}, "max_image_size": {"longest_edge": 64}})
    model: dict[str, Any] = {"name": "m", "provider": "vllm", "base_url": "http://127.0.0.1:9/v1",
                             "image_resize": "auto"}
    cfg = {"models": [model], "suites": [{"name": "demo", "options": {"n_tasks": 1}}]}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="image_resize: auto reads the checkpoint's preprocessor_config.json"):
        load_config(path)
    model["image_resize"] = "qwen9"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="unknown processor 'qwen9'; known: auto"):
        load_config(path)
    del model["base_url"]
    model.update(image_resize="auto", serve={"model": str(ckpt)})
    path.write_text(yaml.safe_dump(cfg))
    assert load_config(path).models[0].images.resize == "auto"
