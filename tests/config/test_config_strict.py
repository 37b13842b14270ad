"""Strict configs: each mistake a new user made stops the run before it starts, says where, and
suggests the fix; no run folder is created or claimed; relative paths are read from the config's
folder; the JSON Schema and the catalog come from the same declarations."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from fasteval.cli.main import main
from fasteval.config.load import load_config
from fasteval.core.errors import ConfigError
from fasteval.suites.data_fetch import default_dest

CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def base_config() -> dict[str, Any]:
    return {
        "seeds": 1,
        "models": [{"name": "sim-tools", "provider": "sim", "policy": "tools"}],
        "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [64, 48]},
                    "settings": [{"name": "tools", "tools": ["calculator"], "max_rounds": 3}]}],
        "run": {"max_concurrency": 4, "fsync": "never"},
    }


def cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    before = list(logging.getLogger().handlers)
    try:
        code = main(list(args))
    finally:
        for h in logging.getLogger().handlers[:]:
            if h not in before:
                logging.getLogger().removeHandler(h)
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp: Path, cfg: dict[str, Any], name: str = "sweep.yaml") -> Path:
    path = tmp / name
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def line_of(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


MISTAKES = [
    # (what the user wrote, the key text on its line, expected key path, suggestion)
    ("tool", lambda c: c["suites"][0]["settings"][0].update(tools=["calculater"]), "calculater",
     "suites[0].settings[0].tools[0]", "'calculator'"),
    ("policy", lambda c: c["models"][0].update(policy="toolz"), "policy: toolz", "models[0].policy", "'tools'"),
    ("api_keyenv", lambda c: c["models"].append({"name": "gpt", "provider": "openai", "base_url": "http://x/v1",
                                                 "api_keyenv": "OPENAI_API_KEY"}),
     "api_keyenv", "models[1].api_keyenv", "'api_key_env'"),
    ("seed", lambda c: c.update(seed=3), "seed: 3", "seed", "'seeds'"),
    ("limt", lambda c: c.update(suites=[{"name": "tirbench", "options": {"path": ".", "limt": 2}}]), "limt",
     "suites[0].options.limt", "'limit'"),
    ("max_round", lambda c: c["suites"][0]["settings"][0].update(max_round=5), "max_round:",
     "suites[0].settings[0].max_round", "'max_rounds'"),
    ("run key", lambda c: c["run"].update(max_concurency=3), "max_concurency", "run.max_concurency",
     "'max_concurrency'"),
    ("sim option", lambda c: c["models"][0].update(latency=5), "latency: 5", "models[0].latency",
     "'latency_ms'"),
]


@pytest.mark.parametrize(("label", "mutate", "marker", "key_path", "suggestion"), MISTAKES,
                         ids=[m[0] for m in MISTAKES])
def test_a_config_mistake_exits_2_naming_file_line_key_and_fix_and_creates_no_run_folder(
        label: str, mutate: Any, marker: str, key_path: str, suggestion: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    cfg = base_config()
    mutate(cfg)
    path = write(tmp_path, cfg)
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")
    assert code == 2, err
    expected = f"{path}:{line_of(path, marker)}: {key_path}: "
    assert expected in err, err
    assert f"did you mean {suggestion}" in err, err
    assert "Traceback" not in err
    assert not run_dir.exists()


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    cfg = base_config()
    cfg["seed"] = 2
    cfg["suites"][0]["settings"][0]["tools"] = ["calculater"]
    cfg["models"][0]["policy"] = "toolz"
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, cfg))
    assert len(e.value.problems) == 3


def test_a_secret_in_the_config_is_refused_with_the_way_to_pass_it(tmp_path: Path) -> None:
    cfg = base_config()
    cfg["models"].append({"name": "gpt", "provider": "openai", "base_url": "http://x/v1", "api_key": "sk-1"})
    with pytest.raises(ConfigError, match="do not put secrets in configs .*api_key_env"):
        load_config(write(tmp_path, cfg))


def test_an_unknown_suite_and_provider_are_named_with_a_suggestion(tmp_path: Path) -> None:
    cfg = base_config()
    cfg["suites"][0]["name"] = "tirbnch"
    cfg["models"][0]["provider"] = "vlm"
    with pytest.raises(ConfigError) as e:
        load_config(write(tmp_path, cfg))
    text = str(e.value)
    assert "unknown suite 'tirbnch'; did you mean 'tirbench'?" in text
    assert "unknown provider 'vlm'; did you mean 'vllm'?" in text


def test_a_failed_start_does_not_claim_the_folder_so_the_fixed_config_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = base_config()
    cfg["suites"][0]["settings"][0]["max_round"] = 2
    path = write(tmp_path, cfg)
    run_dir = tmp_path / "run"
    assert cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")[0] == 2
    del cfg["suites"][0]["settings"][0]["max_round"]
    write(tmp_path, cfg)
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")
    assert code == 0, err


def test_data_paths_are_read_from_the_config_folder_not_the_working_directory(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "myeval"
    folder.mkdir()
    rows = [{"id": f"q{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1)} for i in range(3)]
    (folder / "questions.jsonl").write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in rows))
    cfg = {"seeds": 1, "models": [{"name": "sim", "provider": "sim", "policy": "direct"}],
           "suites": [{"name": "jsonl", "options": {"path": "questions.jsonl"}}],
           "run": {"fsync": "never"}}
    write(folder, cfg, "my.yaml")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli(capsys, "run", "myeval/my.yaml", "--run-dir", "runs/my", "--no-progress")
    assert code in (0, 1), err  # the direct policy may answer wrongly; what matters is that tasks loaded
    recs = [orjson.loads(x) for x in (tmp_path / "runs/my/records.jsonl").read_bytes().splitlines()]
    assert len(recs) == 3 and not any(r.get("error_kind") == "load_error" for r in recs)
    # rescore reads the tasks again from the config in the manifest: the same folder, wherever it runs
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    code, _, err = cli(capsys, "rescore", str(tmp_path / "runs/my"))
    assert code == 0 and "rescored 3 ok, 0 error" in err, err


def test_a_missing_data_file_is_named_before_anything_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = base_config()
    cfg["suites"] = [{"name": "jsonl", "options": {"path": "nowhere.jsonl"}}]
    path = write(tmp_path, cfg)
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(tmp_path / "run"))
    assert code == 2
    assert f"{path}:" in err and "suites[0].options.path: nowhere.jsonl does not exist" in err
    assert str(tmp_path / "nowhere.jsonl") in err
    assert not (tmp_path / "run").exists()


def test_smoke_on_a_fresh_clone_says_in_one_line_per_dataset_what_it_needs() -> None:
    with pytest.raises(ConfigError) as e:
        load_config(CONFIGS / "smoke.yaml")
    for name in ("tirbench", "visualtoolbench", "vistahop"):
        [line] = [p for p in e.value.problems if f"fasteval data fetch {name}`" in p]
        assert "does not exist" in line and "\n" not in line


@pytest.mark.parametrize("name", ["tirbench", "visualtoolbench", "vistahop"])
def test_data_fetch_puts_files_exactly_where_the_shipped_configs_read_them(name: str) -> None:
    dest = default_dest(name).resolve()
    read_from = set()
    for path in CONFIGS.glob("*.yaml"):
        cfg = load_config(path, check_paths=False)
        for entry in cfg.suites:
            if entry["name"] == name:
                p = Path(entry["options"]["path"]).resolve()
                read_from.add(p if not p.suffix else p.parent)
    assert read_from == {dest}


def test_config_schema_is_json_schema_built_from_the_declarations(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "config", "schema")
    assert code == 0
    schema = orjson.loads(out)
    assert schema["additionalProperties"] is False and {"models", "suites", "seeds", "run"} <= set(schema["properties"])
    suites = {s["title"]: s for s in schema["properties"]["suites"]["items"]["oneOf"]}
    assert {"tirbench", "visualtoolbench", "vistahop", "demo", "jsonl"} <= set(suites)
    assert "limit" in suites["tirbench"]["properties"]["options"]["properties"]
    run = schema["properties"]["run"]["properties"]
    assert run["fsync"]["enum"] == ["always", "batch", "never"] and "breaker" in run


def test_list_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli(capsys, "list", "suites")
    assert code == 0 and any(line.startswith("tirbench ") and "TIR-Bench" in line for line in out.splitlines())
    # every suite has a description, whole sentences (a docstring wrapped over lines is not cut mid-phrase)
    described = {line.split()[0]: line.split(None, 1)[1] for line in out.splitlines() if len(line.split()) > 1}
    assert {line.split()[0] for line in out.splitlines()} == set(described)
    assert all(d.endswith((".", ")")) for d in described.values()), described
    code, out, _ = cli(capsys, "list", "tools", "--format", "json")
    assert code == 0 and "calculator" in orjson.loads(out)
    code, out, _ = cli(capsys, "list", "policies")
    assert {"tools", "direct", "scripted", "oracle"} <= {line.split()[0] for line in out.splitlines()}
    code, out, _ = cli(capsys, "list", "providers")
    assert {"sim", "openai", "vllm"} <= {line.split()[0] for line in out.splitlines()}
    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0 and capsys.readouterr().out.startswith("fasteval 0.")


def test_a_setting_that_extends_an_unknown_default_exits_2_and_claims_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = base_config()
    cfg["suites"][0]["settings"] = [{"name": "mine", "extends": "tool"}]  # the demo's defaults: tools, no-tools
    path = write(tmp_path, cfg)
    run_dir = tmp_path / "run"
    code, _, err = cli(capsys, "run", str(path), "--run-dir", str(run_dir), "--no-progress")
    assert code == 2 and "extends 'tool', which is not one of its default settings (tools, no-tools)" in err, err
    assert not run_dir.exists()


def test_every_shipped_config_validates_against_the_published_schema_and_a_typo_does_not() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    from fasteval.config.schema import config_json_schema

    schema = config_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(CONFIGS.glob("*.yaml")):
        errors = [e.message for e in validator.iter_errors(yaml.safe_load(path.read_text()))]
        assert not errors, f"{path.name}: {errors[:3]}"
    endpoint = schema["properties"]["roles"]["additionalProperties"]
    for path in sorted((CONFIGS / "models").glob("*.yaml")):
        for entry in yaml.safe_load(path.read_text()):
            assert not list(jsonschema.Draft202012Validator(endpoint).iter_errors(entry)), f"{path.name}: {entry}"
    bad = yaml.safe_load((CONFIGS / "demo.yaml").read_text())
    bad["seed"] = 3
    assert not validator.is_valid(bad)
