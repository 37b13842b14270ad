"""Image and text token rules agree with the providers' published worked examples."""

from __future__ import annotations

import pytest

from fasteval.config.endpoint import EndpointSpec
from fasteval.engine.forecast.estimate_prompt import model_token_rule, processor_rule
from fasteval.images.processor import PROCESSOR_PRESETS
from providers.token_rules import (
    anthropic_image_tokens,
    gemini_image_tokens,
    openai_image_tokens,
    sim_image_tokens,
)


@pytest.mark.parametrize(("size", "tokens"), [
    ((1024, 1024), 765),    # OpenAI's example: 768 x 768 after scaling, 4 tiles
    ((2048, 4096), 1105),   # 768 x 1536, 6 tiles
    ((4096, 8192), 1105),   # first fit in 2048 x 2048: the same as above
    ((256, 256), 255),      # small images are not enlarged: one tile
])
def test_openai_tiles(size: tuple[int, int], tokens: int) -> None:
    assert openai_image_tokens(*size) == tokens


def test_anthropic_pixels_over_750_after_its_resize() -> None:
    assert anthropic_image_tokens(1000, 1000) == 1334          # 1e6 / 750, rounded up
    assert anthropic_image_tokens(200, 200) == 54
    assert 1500 <= anthropic_image_tokens(8000, 8000) <= 1540  # shrunk to ~1.15 MP first


def test_gemini_tiles() -> None:
    assert gemini_image_tokens(384, 384) == 258
    assert gemini_image_tokens(1000, 1000) == 4 * 258
    assert gemini_image_tokens(3000, 1000) == 4 * 2 * 258


def test_qwen_processor_grid() -> None:
    rule = processor_rule(PROCESSOR_PRESETS["qwen2_5_vl"])
    assert rule.image(1000, 1000) == 36 * 36  # smart_resize to 1008 x 1008, 28-pixel patches merged 2x2
    assert rule.image(8000, 8000) <= 12_845_056 // (28 * 28)


@pytest.mark.parametrize(("entry", "name"), [
    ({"provider": "sim"}, "sim"),
    ({"provider": "openai", "base_url": "https://api.openai.com/v1"}, "openai tiles"),
    ({"provider": "openai", "base_url": "https://api.anthropic.com/v1"}, "anthropic pixels/750"),
    ({"provider": "anthropic"}, "anthropic pixels/750"),
    ({"provider": "gemini"}, "gemini tiles"),
    ({"provider": "vllm", "serve": {"model": "Qwen/Qwen2.5-VL-7B-Instruct"}}, "processor qwen2_5_vl"),
    # an open-weights server the config points at (ProviderKind.open_weights): its model id names the processor
    ({"provider": "sglang", "base_url": "http://127.0.0.1:30000/v1", "model": "Qwen/Qwen2.5-VL-7B-Instruct"},
     "processor qwen2_5_vl"),
    ({"provider": "openai", "base_url": "http://127.0.0.1:8000/v1", "image_resize": "qwen3_vl"}, "processor qwen3_vl"),
])
def test_a_model_entry_picks_its_rule(entry: dict[str, object], name: str) -> None:
    assert model_token_rule(EndpointSpec.of("m", entry)).name == name


def test_the_sim_bills_images_by_the_rule_the_estimate_uses() -> None:
    assert sim_image_tokens(10, 10) == sim_image_tokens(5000, 5000) == 256


def test_max_image_pixels_shrinks_the_image_before_it_is_counted() -> None:
    entry = EndpointSpec.of("m", {"provider": "anthropic", "max_image_pixels": 250_000})
    assert model_token_rule(entry).image(2000, 2000) == anthropic_image_tokens(500, 500)
    assert model_token_rule(entry).image(100, 100) == anthropic_image_tokens(100, 100)
