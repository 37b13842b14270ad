"""Keys change exactly when the answer could change (lm-eval #2715: a key without the model)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cache import cache_key, chat_key
from providers.base import ChatRequest

ROOT = Path(__file__).resolve().parents[2]
IMG_A = "a" * 64
IMG_B = "b" * 64


def _request(**over: object) -> ChatRequest:
    base: dict[str, object] = {
        "messages": [{"role": "user", "content": [{"type": "text", "text": "What is shown?"},
                                                  {"type": "image", "image": IMG_A}]}],
        "tools": [{"type": "function", "function": {"name": "zoom", "parameters": {"type": "object"}}}],
        "params": {"temperature": 0.7, "max_tokens": 512},
        "seed": 3,
    }
    base.update(over)
    return ChatRequest(**base)  # type: ignore[arg-type]


def _key(**over: object) -> str:
    return chat_key("model", "OpenAIProvider@https://api.example", "gpt-4o", _request(**over))


def test_same_request_gives_same_key_in_another_process() -> None:
    code = (
        "from tests.cache.test_cache_keys import _key; print(_key())"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert out.stdout.strip() == _key()
    assert len(_key()) == 64


def test_key_changes_with_model_endpoint_and_namespace() -> None:
    req = _request()
    base = chat_key("model", "ep", "gpt-4o", req)
    assert chat_key("model", "ep", "gpt-4o-mini", req) != base
    assert chat_key("model", "other-ep", "gpt-4o", req) != base
    assert chat_key("judge", "ep", "gpt-4o", req) != base


def test_key_changes_with_seed_params_tools_images_and_repeat() -> None:
    base = _key()
    assert _key(seed=4) != base
    assert _key(params={"temperature": 0.8, "max_tokens": 512}) != base
    assert _key(params={"temperature": 0.7, "max_tokens": 512, "tool_choice": "required"}) != base
    assert _key(tools=None) != base
    img_b = [{"role": "user", "content": [{"type": "text", "text": "What is shown?"},
                                          {"type": "image", "image": IMG_B}]}]
    assert _key(messages=img_b) != base
    req = _request(seed=None)
    assert chat_key("model", "ep", "m", req, repeat=0) != chat_key("model", "ep", "m", req, repeat=1)


def test_transport_fields_and_spelling_do_not_change_key() -> None:
    base = _key()
    noisy = {"temperature": 0.7, "max_tokens": 512, "timeout": 30, "api_key": "sk-secret",
             "request_id": "r-1", "extra_headers": {"x": "y"}, "top_p": None}
    assert _key(params=noisy) == base
    assert _key(params={"max_tokens": 512, "temperature": 0.7}) == base  # order
    assert _key(params={"temperature": 0.7, "max_tokens": 512.0}) == base  # 512 vs 512.0


def test_cache_key_is_order_independent_and_namespaced() -> None:
    assert cache_key("search", query="cats", top_k=10) == cache_key("search", top_k=10, query="cats")
    assert cache_key("search", query="cats", top_k=10) != cache_key("page", query="cats", top_k=10)
    assert cache_key("search", query="cats", top_k=10) != cache_key("search", query="cats", top_k=5)
