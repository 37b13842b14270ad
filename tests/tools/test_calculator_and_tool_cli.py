"""The calculator's safe evaluation per fidelity, and `fasteval tool run` from the outside."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from fasteval.suites.demo import render
from fasteval.tools.calculator import CalcError, evaluate

CLI = [sys.executable, "-m", "fasteval.cli.main", "tool", "run"]


@pytest.mark.parametrize("expr,value", [("1 + 2 * 3", 7), ("-(2 ** 3)", -8), ("sqrt(16) + 7 % 4", 7.0),
                                        ("10 / 4", 2.5), ("log(exp(2))", 2.0)])
def test_calculator_arithmetic(expr: str, value: float) -> None:
    assert evaluate(expr, caret_is_power=False) == pytest.approx(value)


def test_caret_is_an_error_in_reference_and_power_in_fixed() -> None:
    with pytest.raises(CalcError, match=r"'\^'"):
        evaluate("2 ^ 3", caret_is_power=False)
    assert evaluate("2 ^ 3", caret_is_power=True) == 8


@pytest.mark.parametrize("expr,reason", [("__import__('os')", "unsupported"), ("9 ** 9 ** 9", "too large"),
                                         ("1 / 0", "division by zero"), ("sqrt(1, 2)", "one argument"),
                                         ("1 +", "could not parse"), ("[1, 2]", "unsupported")])
def test_calculator_rejects_unsafe_or_bad_input(expr: str, reason: str) -> None:
    with pytest.raises(CalcError, match=reason):
        evaluate(expr, caret_is_power=True)


def run(*args: str) -> tuple[int, dict[str, object]]:
    p = subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=60)
    return p.returncode, orjson.loads(p.stdout) if p.stdout.strip() else {"stderr": p.stderr}


def test_tool_run_calculator_and_its_error_exit_zero() -> None:
    code, out = run("calculator", "--args", '{"expression": "2 ^ 10"}', "--fidelity", "fixed")
    assert code == 0 and out["status"] == "ok" and orjson.loads(str(out["output"]))["result"] == 1024
    code, out = run("calculator", "--args", '{"expression": "2 ^ 10"}', "--fidelity", "reference")
    assert code == 0 and out["status"] == "error" and "'^'" in str(out["error"])


def test_tool_run_zoom_saves_the_crop_and_reports_bad_bbox(tmp_path: Path) -> None:
    import random

    img = tmp_path / "in.png"
    img.write_bytes(render(random.Random(3), 320, 240)[0])
    code, out = run("image_zoom_in_tool", "--args", '{"bbox_2d": [0, 0, 500, 500]}', "--image", str(img),
                    "--out", str(tmp_path / "out"))
    assert code == 0 and out["status"] == "ok"
    images = out["images"]
    assert isinstance(images, list) and len(images) == 1 and Path(images[0]).read_bytes()[:4] == b"\x89PNG"
    code, out = run("image_zoom_in_tool", "--args", '{"bbox_2d": [500, 0, 100, 50]}', "--image", str(img))
    assert code == 0 and out["status"] == "error" and "bbox" in str(out["error"]).lower()


@pytest.mark.slow
def test_tool_run_python_in_the_sandbox_has_no_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-should-not-be-visible")
    code, out = run("python_interpreter", "--args",
                    '{"code": "import os; print(os.environ.get(\\"OPENAI_API_KEY\\"))"}', "--fidelity", "fixed")
    assert code == 0 and out["status"] == "ok"
    assert "sk-should-not-be-visible" not in str(out) and "None" in str(out["output"])


@pytest.mark.slow
def test_tool_run_misuse_exits_non_zero() -> None:
    assert run("no_such_tool")[0] == 2
    assert run("calculator", "--args", "{not json")[0] == 2
    assert run("image_zoom_in_tool", "--image", "/nonexistent.png")[0] == 2


async def test_a_tool_option_fidelity_overrides_the_setting(tmp_path: Path) -> None:
    from fasteval.core.types import Task
    from fasteval.engine.run.agent import AgentEnv, execute_tool
    from fasteval.runfolder.blobs import BlobStore
    from fasteval.tools.base import ToolContext, make_tool
    from providers.base import ToolCallRequest

    blobs = BlobStore(tmp_path)
    ctx = ToolContext(blobs=blobs, task=Task(id="t", turns=[]), images=[], fidelity="reference")
    call = ToolCallRequest("c", "calculator", '{"expression": "2 ^ 3"}')
    for options, status in (({}, "error"), ({"fidelity": "fixed"}, "ok")):
        tool = make_tool("calculator", **{"fidelity": "reference", **options})
        env = AgentEnv(client=None, suite=None, setting=None, tools={"calculator": tool}, blobs=blobs)  # type: ignore[arg-type]
        result, _, _ = await execute_tool(call, env, ctx)
        assert result.status == status
