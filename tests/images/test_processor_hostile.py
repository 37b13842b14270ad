"""``image_resize: auto`` reading a checkpoint's hostile ``preprocessor_config.json``.

Absurd sizes (a min_pixels of 10**400, a patch of 10**30, an edge of 10**12, min above max), a
config nested 100,000 deep, one of 5 MB, a FIFO and a link to /dev/zero in its place: ``fasteval
run`` (the real CLI, the sim as the served model) refuses each with one config error naming the
file, exit 2, before anything runs; never an internal error, a hang or a traceback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

FASTEVAL = [sys.executable, "-m", "fasteval.cli.main"]
QWEN = {"image_processor_type": "Qwen2VLImageProcessor", "patch_size": 14, "merge_size": 2,
        "min_pixels": 3136, "max_pixels": 1003520}


def _json(doc: object) -> Callable[[Path], None]:
    return lambda p: p.write_text(json.dumps(doc))


def _fifo(p: Path) -> None:
    os.mkfifo(p)


def _zero(p: Path) -> None:
    p.symlink_to("/dev/zero")


CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "min_pixels 10**400": (_json({**QWEN, "min_pixels": 10**400, "max_pixels": 10**401}), "min_pixels"),
    "patch_size 10**30": (_json({**QWEN, "patch_size": 10**30}), "patch_size"),
    "max_pixels 10**20": (_json({**QWEN, "max_pixels": 10**20}), "max_pixels"),
    "min above max": (_json({**QWEN, "min_pixels": 10**9, "max_pixels": 10**6}), "above max_pixels"),
    "longest_edge 10**12": (_json({"image_processor_type": "Idefics3ImageProcessor",
                                   "size": {"longest_edge": 10**12}}), "longest_edge"),
    "nested 100,000 deep": (lambda p: p.write_text("[" * 100_000 + "]" * 100_000), "cannot be read"),
    "5 MB": (_json({**QWEN, "pad": "x" * 5_000_000}), "cannot be read"),
    "a FIFO": (_fifo, "not a regular file"),
    "a link to /dev/zero": (_zero, "not a regular file"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(CASES))
def test_a_hostile_preprocessor_config_is_one_config_error(tmp_path: Path, case: str) -> None:
    make, reason = CASES[case]
    ckpt = tmp_path / "ck"
    ckpt.mkdir()
    (ckpt / "config.json").write_text("{}")
    (ckpt / "model.safetensors").write_bytes(b"\0" * 16)
    make(ckpt / "preprocessor_config.json")
    command = ["{python}", "-m", "providers.sim", "--port", "{port}", "--model", "{served_model_name}:tools"]
    cfg = {"seeds": 1,
           "models": [{"name": "ck", "provider": "vllm", "image_resize": "auto",
                       "serve": {"model": str(ckpt), "command": command, "startup_timeout_s": 60}}],
           "suites": [{"name": "demo", "options": {"n_tasks": 2, "image_size": [640, 480]},
                       "settings": [{"name": "tools", "tools": ["image_zoom_in_tool"]}]}],
           "run": {"gpus": [0], "fsync": "never"}}
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(cfg))
    proc = subprocess.run([*FASTEVAL, "run", str(tmp_path / "sweep.yaml"), "--run-dir", str(tmp_path / "run"),
                           "--no-progress"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr, proc.stderr
    assert "preprocessor_config.json" in proc.stderr and reason in proc.stderr, proc.stderr
    assert len(proc.stderr) < 2000  # one problem, said once (no 10**400 spelt out)
    assert not (tmp_path / "run" / "records.jsonl").exists()
