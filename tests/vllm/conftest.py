"""Real vLLM (the CPU build from ``make vllm``) serving the tiny calculator checkpoint.

They run under ``make test-vllm`` (``FASTEVAL_REQUIRE_VLLM=1``: a missing vllm is then a failure),
or with ``FASTEVAL_VLLM_TESTS=1``; a plain ``make test`` skips them (minutes of CPU vLLM each), and
without a vllm binary (PATH, then ``.venv-vllm``) they skip saying why. The checkpoint is
built and trained by tests/tiny_models/calculator.py once and cached between runs.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from providers.local.spec import find_vllm
from tests.tiny_models.calculator import ensure_checkpoint

VLLM_ARGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-model-len", "2048",
             "--max-num-seqs", "16", "--dtype", "float32"]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if os.environ.get("FASTEVAL_REQUIRE_VLLM") or os.environ.get("FASTEVAL_VLLM_TESTS"):
        return
    skip = pytest.mark.skip(reason="real-vLLM tests run with `make test-vllm` (or FASTEVAL_VLLM_TESTS=1)")
    for item in items:
        if "tests/vllm/" in str(item.fspath):
            item.add_marker(skip)


def vllm_binary() -> str:
    found = find_vllm()
    if found is None:
        why = "no vllm binary (not on PATH, no .venv-vllm/bin/vllm): run `make vllm`"
        if os.environ.get("FASTEVAL_REQUIRE_VLLM"):
            pytest.fail(why)
        pytest.skip(why)
    return found


@pytest.fixture(scope="session")
def vllm() -> str:
    return vllm_binary()


@pytest.fixture(scope="session")
def checkpoint(vllm: str) -> Path:
    """The tiny calculator checkpoint, built with the vLLM venv's Python (it has torch)."""
    return ensure_checkpoint(str(Path(vllm).with_name("python")))


def serve_block(checkpoint: Path, vllm: str, **fields: Any) -> dict[str, Any]:
    return {"model": str(checkpoint), "command": [vllm], "args": VLLM_ARGS, "startup_timeout_s": 400,
            "kv_cache_gib": 1, "restart_backoff_s": 0.5, "stop_timeout_s": 10, **fields}


def write_sweep(tmp: Path, serve: dict[str, Any], tasks: list[dict[str, Any]], *, max_rounds: int = 3,
                **model: Any) -> Path:
    data = tmp / "tasks.jsonl"
    data.write_text("".join(orjson.dumps(t).decode() + "\n" for t in tasks))
    cfg = {"seeds": 1, "models": [{"name": "tiny", "provider": "vllm", "serve": serve,
                                   "params": {"temperature": 0.0, "max_tokens": 48}, **model}],
           "suites": [{"name": "jsonl", "options": {"path": str(data), "max_rounds": max_rounds}}],
           "run": {"max_concurrency": 8}}
    path = tmp / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def calculator_tasks(n: int, *, turns: int = 1) -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        exprs = [(f"{10 + i + 7 * t} + {3 + t}", 13 + i + 8 * t) for t in range(turns)]
        if turns == 1:
            out.append({"id": f"c{i:03d}", "prompt": f"What is {exprs[0][0]}?", "answer": str(exprs[0][1]),
                        "tools": ["calculator"]})
        else:
            out.append({"id": f"c{i:03d}", "tools": ["calculator"],
                        "turns": [{"text": f"What is {e}?", "answer": str(v)} for e, v in exprs]})
    return out


def fasteval(*args: str) -> list[str]:
    return [sys.executable, "-m", "fasteval.cli.main", *args]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def records(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "records.jsonl"
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]


def vllm_processes() -> list[str]:
    """Every process on this machine running vLLM (``pgrep -af vllm`` as a list)."""
    out = subprocess.run(["pgrep", "-af", "vllm serve|VLLM::EngineCore|vllm.entrypoints"], capture_output=True,
                         text=True).stdout
    return [line for line in out.splitlines() if line.strip() and "pgrep" not in line]


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")


# -- the tiny vision-language checkpoint (tests/tiny_models/zoom.py) ------------------------------
VLM_ARGS = ["--enable-auto-tool-choice", "--tool-call-parser", "hermes", "--max-model-len", "2048",
            "--max-num-seqs", "8", "--dtype", "float32"]


@pytest.fixture(scope="session")
def vlm_checkpoint(vllm: str) -> Path:
    """The tiny zooming Idefics3 checkpoint, built with the vLLM venv's Python (it has torch);
    ``FASTEVAL_TINY_VLM`` names another folder to use instead (an intermediate ``checkpoint-N``)."""
    from tests.tiny_models.zoom import ensure_checkpoint as ensure_vlm

    chosen = os.environ.get("FASTEVAL_TINY_VLM")
    return Path(chosen) if chosen else ensure_vlm(str(Path(vllm).with_name("python")))


def vlm_serve_block(checkpoint: Path, vllm: str, *, images: int, **fields: Any) -> dict[str, Any]:
    args = [*VLM_ARGS, "--limit-mm-per-prompt", orjson.dumps({"image": images}).decode()]
    # a loaded 2-core machine has taken 5 minutes to start it (torch compile of the vision tower)
    return {**serve_block(checkpoint, vllm, **fields), "args": args, "startup_timeout_s": 900}


def mark_png(marks: list[Any]) -> bytes:
    """The task image of the zoom recipe's (flat grey, coloured squares), as a PNG made with pyvips."""
    import pyvips

    from tests.tiny_models.zoom import COLOURS, IMAGE_SIDE

    img = pyvips.Image.black(IMAGE_SIDE, IMAGE_SIDE, bands=3).new_from_image([marks[0].grey] * 3)
    for m in marks:
        img = img.draw_rect(list(COLOURS[m.colour]), m.x, m.y, m.side, m.side, fill=True)
    return bytes(img.cast("uchar").write_to_buffer(".png"))


def mark_tasks(folder: Path, n: int, *, two_turn: int = 0, seed: int = 7) -> list[dict[str, Any]]:
    """``n`` one-question tasks, then ``two_turn`` tasks asking about a second mark (another cell) in the same image."""
    import random

    from tests.tiny_models.zoom import mark, second_mark

    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    for i in range(n + two_turn):
        first = mark(rng)
        marks = [first]
        if i >= n:
            marks.append(second_mark(rng, first))
        (folder / f"m{i:03d}.png").write_bytes(mark_png(marks))
        if len(marks) == 1:
            out.append({"id": f"m{i:03d}", "images": [f"m{i:03d}.png"], "prompt": first.question(),
                        "answer": first.colour, "tools": ["image_zoom_in_tool"]})
        else:
            out.append({"id": f"m{i:03d}", "tools": ["image_zoom_in_tool"], "turns": [
                {"text": first.question(), "images": [f"m{i:03d}.png"], "answer": first.colour},
                {"text": marks[1].question(), "answer": marks[1].colour}]})
    return out
