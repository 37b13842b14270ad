"""Serve specs, command lines, hints, GPU detection, checkpoint fingerprints and metrics parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from fasteval.config.load import config_hash
from providers.local import (
    GpuPool,
    ServeConfigError,
    ServeSpec,
    checkpoint_identity,
    detect_gpus,
    parse_metrics,
)
from providers.local.spec import hints_for
from tests.providers.local.conftest import make_checkpoint


def test_default_command_is_vllm_serve_with_the_fields() -> None:
    spec = ServeSpec.from_config("ck", {"model": "/ckpts/step-2000", "tensor_parallel_size": 2, "replicas": 2,
                                        "max_model_len": 32768, "gpu_memory_utilization": 0.9,
                                        "lora_modules": {"ad": "/lora/ad"},
                                        "args": ["--enable-auto-tool-choice", "--tool-call-parser", "hermes"]})
    cmd = spec.command_line(port=8123, host="127.0.0.1", replica=1)
    assert cmd[0].rsplit("/", 1)[-1] == "vllm" and cmd[1:3] == ["serve", "/ckpts/step-2000"]  # PATH's or .venv-vllm's
    joined = " ".join(cmd)
    for part in ("--port 8123", "--served-model-name=ck", "--tensor-parallel-size 2", "--max-model-len 32768",
                 "--gpu-memory-utilization 0.9", "--enable-lora --lora-modules ad=/lora/ad",
                 "--tool-call-parser hermes"):
        assert part in joined
    assert spec.gpus_needed == 4


def test_api_server_count_becomes_the_vllm_flag_once() -> None:
    cmd = ServeSpec.from_config("ck", {"model": "/m", "api_server_count": 4, "args": ["--enforce-eager"]}).command_line(
        port=1, host="127.0.0.1", replica=0)
    assert cmd.count("--api-server-count") == 1 and cmd[cmd.index("--api-server-count") + 1] == "4"
    assert "--api-server-count" not in ServeSpec.from_config("ck", {"model": "/m"}).command_line(
        port=1, host="127.0.0.1", replica=0)
    with pytest.raises(ServeConfigError, match="keep one of them"):
        ServeSpec.from_config("ck", {"model": "/m", "api_server_count": 2, "args": ["-asc", "2"]})


@pytest.mark.parametrize("args, limit", [
    ([], None), (["--limit-mm-per-prompt", '{"image": 4}'], 4), (['--limit-mm-per-prompt={"image": 0}'], 0),
    (["--limit-mm-per-prompt", '{"image": {"count": 2, "width": 512}}'], 2),
    (["--limit-mm-per-prompt", '{"video": 1}'], None),
    (["--limit-mm-per-prompt", '{"image": 9}', "--limit-mm-per-prompt", '{"image": 3}'], 3),  # the last wins
])
def test_the_image_limit_is_read_from_serve_args(args: list[str], limit: int | None) -> None:
    assert ServeSpec.from_config("ck", {"model": "/m", "args": args}).images_per_prompt == limit


@pytest.mark.parametrize("value, reason", [("image=4", "must be a JSON object"), ('{"image": -1}', ">= 0"),
                                           ('{"image": "4"}', ">= 0")])
def test_an_image_limit_vllm_would_refuse_is_a_config_error(value: str, reason: str) -> None:
    with pytest.raises(ServeConfigError, match=reason):
        ServeSpec.from_config("ck", {"model": "/m", "args": ["--limit-mm-per-prompt", value]})


def test_command_template_placeholders_and_unknown_fields() -> None:
    spec = ServeSpec.from_config("ck", {"model": "m", "command": ["srv", "--p={port}", "{served_model_name}",
                                                                  "{replica}", "{tensor_parallel_size}"]})
    assert spec.command_line(port=1, host="h", replica=3) == ["srv", "--p=1", "ck", "3", "1"]
    with pytest.raises(ServeConfigError, match="unknown serve field"):
        ServeSpec.from_config("ck", {"model": "m", "replica": 2})
    with pytest.raises(ServeConfigError, match="serve.model"):
        ServeSpec.from_config("ck", {"replicas": 2})
    with pytest.raises(ServeConfigError, match="unknown placeholder"):
        ServeSpec.from_config("ck", {"model": "m", "command": ["x", "{nope}"]}).command_line(port=1, host="h", replica=0)


@pytest.mark.parametrize(("line", "hint"), [
    ("torch.OutOfMemoryError: CUDA out of memory", "CUDA OOM"),
    ("OSError: [Errno 98] Address already in use", "port in use"),
    ("KeyError: 'invalid tool call parser: foo'", "unknown tool parser"),
    ("huggingface_hub.errors.RepositoryNotFoundError: 404 Repository Not Found", "model not found"),
    ("launcher: server binary not found or not runnable", "server binary is missing"),
])
def test_hints_for_known_startup_failures(line: str, hint: str) -> None:
    assert any(hint in h for h in hints_for(f"INFO starting\n{line}\n"))


def test_gpu_detection_and_pool(monkeypatch: pytest.MonkeyPatch) -> None:
    assert detect_gpus([0, 3]) == ["0", "3"]
    assert detect_gpus(2) == ["0", "1"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5")
    assert detect_gpus("auto") == ["2", "5"]
    pool = GpuPool(["0", "1", "2"])
    a = pool.take(2)
    assert a == ["0", "1"] and pool.take(2) is None
    pool.give(a)
    assert pool.free == ["0", "1", "2"]


def test_checkpoint_fingerprint_follows_configs_and_weights(tmp_path: Path) -> None:
    ckpt = make_checkpoint(tmp_path / "ck")
    first = checkpoint_identity(str(ckpt))
    assert first["kind"] == "local" and first == checkpoint_identity(str(ckpt))
    (ckpt / "model.safetensors").write_bytes(b"\1" * 64)  # same size, other weights: another checkpoint
    assert checkpoint_identity(str(ckpt))["fingerprint"] != first["fingerprint"]
    (ckpt / "model.safetensors").write_bytes(b"\1" * 65)
    assert checkpoint_identity(str(ckpt))["fingerprint"] != first["fingerprint"]
    make_checkpoint(ckpt, marker="2")
    assert checkpoint_identity(str(ckpt))["fingerprint"] != first["fingerprint"]


def test_hub_ids_are_identified_by_the_cached_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    hub = checkpoint_identity("Qwen/Qwen2.5-VL-7B-Instruct")
    assert hub["kind"] == "hub" and hub["path"] == "Qwen/Qwen2.5-VL-7B-Instruct" and hub["revision"] is None
    refs = tmp_path / "models--Qwen--Qwen2.5-VL-7B-Instruct" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("abc123\n")
    cached = checkpoint_identity("Qwen/Qwen2.5-VL-7B-Instruct")
    assert cached["revision"] == "abc123" and cached["fingerprint"] != hub["fingerprint"]
    (refs / "main").write_text("def456\n")
    assert checkpoint_identity("Qwen/Qwen2.5-VL-7B-Instruct")["fingerprint"] != cached["fingerprint"]


def test_parse_metrics_reads_vllm_names() -> None:
    text = ('# HELP vllm:num_requests_waiting x\nvllm:num_requests_waiting{model_name="m"} 3.0\n'
            'vllm:kv_cache_usage_perc{model_name="m"} 0.42\nvllm:prefix_cache_hits_total{model_name="m"} 1.5e3\n'
            'other_metric 7\n')
    m = parse_metrics(text)
    assert m == {"vllm:num_requests_waiting": 3.0, "vllm:kv_cache_usage_perc": 0.42,
                 "vllm:prefix_cache_hits_total": 1500.0}


def test_operational_serve_fields_do_not_change_the_config_identity() -> None:
    def raw(**serve: object) -> dict[str, object]:
        return {"models": [{"name": "ck", "provider": "vllm", "serve": {"model": "/c", **serve}}], "suites": []}

    base = config_hash(raw(max_restarts=3, replicas=1))
    assert config_hash(raw(max_restarts=9, replicas=4, startup_timeout_s=60, admission="kv")) == base
    assert config_hash(raw(max_restarts=3, replicas=1, args=["--tool-call-parser", "hermes"])) != base
    assert config_hash(raw(model="/other")) != base
