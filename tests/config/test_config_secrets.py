"""A secret anywhere in a config is refused before anything is written (the config is copied into
manifest.json): nested in extra_body, params, serve.env or serve.args, in a role, or pasted into
api_key_env instead of the variable's name. Ordinary values (model ids, URLs, commit hashes) pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from fasteval.config.load import load_config
from fasteval.config.secrets import looks_like_key
from fasteval.core.errors import ConfigError

KEY = "sk-proj-" + "Ab3" * 12


def _cfg(model: dict[str, Any], **top: Any) -> dict[str, Any]:
    return {"seeds": 1, "models": [{"name": "m", "provider": "sim", **model}],
            "suites": [{"name": "demo", "options": {"n_tasks": 1}}], **top}


@pytest.mark.parametrize(("model", "where"), [
    ({"extra_body": {"api_key": "abc"}}, "models[0].extra_body.api_key"),
    ({"params": {"token": "abc"}}, "models[0].params.token"),
    ({"params": {"metadata": {"user": KEY}}}, "models[0].params.metadata.user"),
    ({"api_key_env": KEY}, "models[0].api_key_env"),
    ({"api_key_env": "my key"}, "models[0].api_key_env"),
])
def test_a_secret_nested_in_a_model_entry_is_refused_where_it_is(tmp_path: Path, model: dict[str, Any],
                                                                  where: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_cfg(model)))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert any(where in p for p in info.value.problems), info.value.problems
    assert KEY not in str(info.value)  # the message names where, never echoes the key


def test_serve_secrets_are_refused(tmp_path: Path) -> None:
    model = {"serve": {"model": "org/ckpt", "env": {"HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz"},
                       "args": ["--api-key", "letmein", "--max-num-seqs", "8"]}}
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(_cfg(model)))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    text = "\n".join(info.value.problems)
    assert "serve.env.HF_TOKEN" in text and "serve.args[0]" in text


def test_a_secret_in_a_role_or_the_run_section_is_refused(tmp_path: Path) -> None:
    cfg = _cfg({}, roles={"judge": {"provider": "sim", "headers": {"Authorization": "Bearer " + KEY}}})
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(cfg))
    with pytest.raises(ConfigError, match="roles.judge.headers.Authorization"):
        load_config(path)


@pytest.mark.parametrize("value", ["Qwen/Qwen2.5-VL-7B-Instruct", "http://127.0.0.1:8000/v1", "OPENAI_API_KEY",
                                   "0123456789abcdef0123456789abcdef01234567", "gpt-4o-2024-08-06",
                                   "claude-sonnet-4-20250514"])
def test_ordinary_values_are_not_taken_for_keys(value: str) -> None:
    assert not looks_like_key(value)


@pytest.mark.parametrize("value", [KEY, "sk-ant-api03-" + "x" * 40, "AIza" + "B" * 35, "hf_" + "a1B" * 12])
def test_key_shapes_are_recognised(value: str) -> None:
    assert looks_like_key(value)


@pytest.mark.parametrize("url", [
    "https://generativelanguage.googleapis.com?key=AIzaSyD" + "x1Y2z3" * 6,
    "https://gateway.example/v1?api_key=letmein",
    "https://gateway.example/v1?foo=bar&access_token=abc",
    "https://gateway.example/v1?x=" + KEY,
    "https://user:hunter2@gateway.example/v1",
])
def test_a_secret_in_a_base_url_is_refused_before_it_reaches_the_manifest(tmp_path: Path, url: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"seeds": 1, "models": [{"name": "m", "provider": "openai", "model": "x",
                                                            "base_url": url}],
                                    "suites": [{"name": "demo", "options": {"n_tasks": 1}}]}))
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert any("models[0].base_url" in p and "this URL carries a secret" in p for p in info.value.problems), \
        info.value.problems
    assert "letmein" not in str(info.value) and "hunter2" not in str(info.value) and KEY not in str(info.value)


@pytest.mark.parametrize("url", ["https://api.openai.com/v1", "http://127.0.0.1:8000/v1?api-version=2024-06-01",
                                 "https://host.example/v1?deployment=gpt-4o&key="])
def test_ordinary_base_urls_pass(tmp_path: Path, url: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"seeds": 1, "models": [{"name": "m", "provider": "openai", "model": "x",
                                                            "base_url": url}],
                                    "suites": [{"name": "demo", "options": {"n_tasks": 1}}]}))
    load_config(path)
