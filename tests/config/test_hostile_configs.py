"""Configs from people we do not know are read with bounds (issue 21, items 9 and 12).

Aliases of aliases (billion laughs), an ``include:`` cycle, a key given twice, a config of
megabytes, and a ``serve.command`` whose JSON argument reads as a placeholder are each a config
error: exit 2, file:line, one line per problem, and nothing expanded or started first.
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import yaml

from fasteval.cli.main import main

BASE = """\
seeds: 1
models:
  - name: sim-tools
    provider: sim
    policy: tools
suites:
  - name: demo
    options: {n_tasks: 2, image_size: [64, 48]}
    settings:
      - {name: tools, tools: [calculator], max_rounds: 3}
"""


def check(capsys: pytest.CaptureFixture[str], path: Path) -> tuple[int, str]:
    capsys.readouterr()
    before = list(logging.getLogger().handlers)
    try:
        code = main(["config", "check", str(path)])
    finally:
        for h in logging.getLogger().handlers[:]:
            if h not in before:
                logging.getLogger().removeHandler(h)
    return code, capsys.readouterr().err


def test_the_base_config_is_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE)
    assert check(capsys, path)[0] == 0


def test_billion_laughs_is_refused_before_anything_expands_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # 10**6 strings once expanded, from 600 bytes (the real attack has 10**9: same refusal)
    levels = ["l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for i in range(1, 6):
        levels.append(f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * 10) + "]")
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE.replace("    policy: tools\n", "    policy: tools\n    metadata_laughs: *l5\n")
                    .replace("seeds: 1\n", "seeds: 1\nx-anchors:\n" + "".join(f"  {ln}\n" for ln in levels)))
    code, err = check(capsys, path)
    assert code == 2, err
    assert "expands to more than" in err and f"{path}:" in err


def test_an_include_cycle_is_a_config_error_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "a.yaml").write_text("- include: b.yaml\n")
    (tmp_path / "b.yaml").write_text("- name: m\n  provider: sim\n- include: a.yaml\n")
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE.replace("models:\n", "models:\n  - include: a.yaml\n"))
    code, err = check(capsys, path)
    assert code == 2, err
    assert "include cycle: sweep.yaml -> a.yaml -> b.yaml -> a.yaml" in err
    assert f"{tmp_path / 'b.yaml'}:3:" in err
    assert "RecursionError" not in err and "Traceback" not in err


def test_a_key_given_twice_is_a_config_error_with_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + "seeds: 5\n")
    code, err = check(capsys, path)
    assert code == 2, err
    assert f"{path}:{len(BASE.splitlines()) + 1}: key 'seeds' is given twice" in err


def test_a_config_of_megabytes_is_refused_at_once(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "sweep.yaml"
    path.write_text(BASE + "".join(f"# padding line {i:07d} " + "x" * 60 + "\n" for i in range(40_000)))
    code, err = check(capsys, path)
    assert code == 2, err
    assert "too large for a config" in err


def _served(tmp_path: Path, serve: dict[str, object]) -> Path:
    cfg = yaml.safe_load(BASE)
    cfg["models"].append({"name": "local", "provider": "openai", "serve": {"model": str(tmp_path), **serve}})
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_a_json_literal_in_serve_command_is_caught_by_config_check(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = _served(tmp_path, {"command": ["{python}", "-m", "srv", "--port", "{port}", "--override",
                                          '{"temperature": 0}']})
    code, err = check(capsys, path)
    assert code == 2, err
    assert "models[1].serve.command[6]" in err and "{{" in err and "unknown placeholder" in err
    ok = _served(tmp_path, {"command": ["{python}", "-m", "srv", "--port", "{port}", "--override",
                                        '{{"temperature": 0}}']})
    assert check(capsys, ok)[0] == 0


@pytest.mark.parametrize("key,value", [("args", ["--enforce-eager"]), ("max_model_len", 4096),
                                       ("lora_modules", {"a": "/lora/a"}), ("api_server_count", 4)])
def test_vllm_options_a_custom_command_would_drop_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                              key: str, value: object) -> None:
    path = _served(tmp_path, {"command": ["srv", "--port", "{port}"], key: value})
    code, err = check(capsys, path)
    assert code == 2, err
    assert f"serve.{key} is not applied when serve.command is set" in err


def test_a_command_that_only_names_the_vllm_binary_keeps_its_options(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """``command: [/opt/venv/bin/vllm]`` replaces the binary, not ``vllm serve``: args still apply."""
    path = _served(tmp_path, {"command": ["/opt/venv/bin/vllm"], "args": ["--enforce-eager"], "max_model_len": 4096})
    code, err = check(capsys, path)
    assert "is not applied when serve.command is set" not in err, err


@pytest.mark.parametrize("serve, says", [
    ({"api_server_count": 0}, "must be a whole number of processes >= 1"),
    ({"api_server_count": True}, "must be a whole number of processes >= 1"),
    ({"api_server_count": 2, "args": ["--api-server-count", "4"]}, "passes '--api-server-count' too"),
    ({"api_server_count": 2, "args": ["-asc=4"]}, "passes '-asc=4' too"),
    ({"api_server_count": 2, "args": ["--headless"]}, "cannot go with --headless"),
])
def test_api_server_count_nonsense_or_given_twice_is_refused_on_its_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], serve: dict[str, object], says: str) -> None:
    path = _served(tmp_path, serve)
    code, err = check(capsys, path)
    assert code == 2, err
    line = next(i for i, text in enumerate(path.read_text().splitlines(), 1)
                if text.strip().startswith("api_server_count:"))
    assert f"{path}:{line}: models[1].serve.api_server_count" in err and says in err, err


def test_api_server_count_alone_passes_config_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The key alone is valid. Loaded, not `config check`ed: placement would also need a vllm binary,
    which `make test` does not have (it runs before `make vllm`)."""
    from fasteval.config.load import load_config

    cfg = load_config(_served(tmp_path, {"api_server_count": 4}))
    assert cfg.endpoint("local").serve["api_server_count"] == 4


def test_one_long_string_aliased_many_times_is_refused_by_its_text(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """1,000 values, under the node bound, but 400 MB of text once the manifest's JSON expands it."""
    path = tmp_path / "sweep.yaml"
    big = "description: &big " + "y" * 400_000 + "\n"
    path.write_text(big + BASE.replace("    policy: tools\n", "    policy: tools\n    params: {metadata: ["
                                       + ", ".join(["*big"] * 1_000) + "]}\n"))
    code, err = check(capsys, path)
    assert code == 2, err
    assert f"{path}:1: the document expands to more than 4,194,304 characters of text" in err
