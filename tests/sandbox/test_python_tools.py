"""The two Python tools end to end: real PNG/JPEG images through a BlobStore and the pool."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from PIL import Image

from fasteval.core.types import Task, Turn
from fasteval.runfolder.blobs import BlobStore
from fasteval.tools.base import ToolContext, make_tool
from fasteval.tools.python_tools import PythonImageProcessing
from sandbox import SandboxPool

pytestmark = [pytest.mark.slow, pytest.mark.asyncio(loop_scope="module")]

CROP = (
    "from PIL import Image as PILImage\n"
    "im = PILImage.open('input_0.png')\n"
    "im.crop((0, 0, 32, 24)).save(f'{PROCESSED_IMAGE_SAVE_PATH}/transformed_image_0.png')\n"
    "print(im.size)"
)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def pool() -> AsyncIterator[SandboxPool]:
    async with SandboxPool(2) as p:
        yield p


def _ctx(tmp_path: Path, pool: SandboxPool | None, fidelity: str) -> ToolContext:
    blobs = BlobStore(tmp_path / "blobs")
    refs = []
    for fmt in ("PNG", "JPEG"):
        buf = io.BytesIO()
        Image.linear_gradient("L").resize((64, 48)).convert("RGB").save(buf, fmt)
        refs.append(blobs.put(buf.getvalue()))
    services = {"sandbox": pool} if pool is not None else {}
    return ToolContext(blobs=blobs, task=Task(id="t1", turns=[Turn("q")]), images=refs, fidelity=fidelity,
                       session_id="job-1", services=services)  # fmt: skip


async def test_image_tool_reference_returns_harness_dict_and_blob(tmp_path: Path, pool: SandboxPool) -> None:
    ctx = _ctx(tmp_path, pool, "reference")
    res = await make_tool("python_image_processing").run({"code": CROP}, ctx)
    assert res.status == "ok", res.output
    view = json.loads(res.output)
    assert list(view) == ["ok", "stdout", "stderr", "output_path", "output_paths"]
    assert view["ok"] == "true" and view["stdout"] == "(64, 48)\n"
    assert view["output_path"] == "/sandbox/work/out/transformed_image_0.png"
    assert len(res.images) == 1 and res.images[0] in ctx.blobs
    assert Image.open(io.BytesIO(ctx.blobs.get(res.images[0]))).size == (32, 24)
    assert res.extra["inputs"] == ["input_0.png", "input_1.jpg"]


async def test_image_tool_fixed_reports_error_with_traceback(tmp_path: Path, pool: SandboxPool) -> None:
    ctx = _ctx(tmp_path, pool, "fixed")
    res = await make_tool("python_image_processing").run({"code": "Image.open('input_1.jpg').size\n1/0"}, ctx)
    assert res.status == "error" and res.error == "ZeroDivisionError: division by zero"
    view = json.loads(res.output)
    assert list(view) == ["ok", "stdout", "stderr", "output_paths"]
    assert view["ok"] == "false" and "ZeroDivisionError" in view["stderr"] and view["output_paths"] == []


async def test_interpreter_reference_shows_only_stdout_and_stderr(tmp_path: Path, pool: SandboxPool) -> None:
    ctx = _ctx(tmp_path, pool, "reference")
    res = await make_tool("python_interpreter").run({"code": "print(np.array([1, 2]).sum())"}, ctx)
    assert json.loads(res.output) == {"stdout": "3\n", "stderr": ""}


async def test_stateful_option_keeps_variables_for_the_job(tmp_path: Path, pool: SandboxPool) -> None:
    ctx = _ctx(tmp_path, pool, "fixed")
    tool = make_tool("python_interpreter", stateful=True)
    await tool.run({"code": "total = 40"}, ctx)
    res = await tool.run({"code": "print(total + 2)"}, ctx)
    assert json.loads(res.output)["stdout"] == "42\n"
    await pool.release(ctx.session_id)


async def test_timeout_is_an_error_result(tmp_path: Path) -> None:
    from sandbox import SandboxLimits

    async with SandboxPool(1, limits=SandboxLimits(timeout_s=1)) as small:
        res = await make_tool("python_interpreter").run({"code": "while True: pass"}, _ctx(tmp_path, small, "fixed"))
    assert res.status == "error" and res.extra["sandbox_status"] == "timeout"
    assert "TimeoutError" in json.loads(res.output)["stderr"]


@pytest.mark.parametrize("args", [{}, {"code": ""}, {"code": 3}, {"code": "x" * 5001}])
async def test_bad_arguments_fail_without_running(tmp_path: Path, pool: SandboxPool, args: dict[str, object]) -> None:
    res = await make_tool("python_image_processing").run(args, _ctx(tmp_path, pool, "fixed"))
    assert res.status == "error" and "code" in res.output


async def test_missing_pool_is_a_clear_error(tmp_path: Path) -> None:
    res = await make_tool("python_interpreter").run({"code": "print(1)"}, _ctx(tmp_path, None, "fixed"))
    assert res.status == "error" and "ctx.services['sandbox']" in res.output


async def test_schema_and_description_list_stable_names() -> None:
    tool = PythonImageProcessing()
    code = tool.parameters["properties"]["code"]
    assert (code["minLength"], code["maxLength"], tool.parameters["required"]) == (1, 5000, ["code"])
    spec = tool.spec_for_images(["input_0.png", "input_1.jpg"])
    text = spec["function"]["description"]
    assert "['input_0.png', 'input_1.jpg']" in text and "image as PNG to out (PROCESSED_IMAGE_SAVE_PATH)" in text
    assert "transformed_image_i.png" in text


async def test_persist_files_keeps_saved_images_for_the_trajectorys_later_calls(tmp_path: Path,
                                                                                pool: SandboxPool) -> None:
    """VisualToolBench reference: a later call reopens what an earlier one saved; other jobs do not see it."""
    reopen = "from PIL import Image as I\nprint(I.open('out/transformed_image_0.png').size)"
    ctx = _ctx(tmp_path, pool, "reference")
    tool = make_tool("python_image_processing", persist_files=True)
    first = await tool.run({"code": CROP}, ctx)
    assert first.status == "ok", first.output
    again = await tool.run({"code": reopen}, ctx)
    assert again.status == "ok" and "(32, 24)" in again.output
    other = _ctx(tmp_path, pool, "reference")
    other.session_id = "job-2"
    assert (await tool.run({"code": reopen}, other)).status == "error"
    stateless = await make_tool("python_image_processing").run({"code": reopen}, ctx)
    assert stateless.status == "error"
    await pool.release("job-1")
    assert (await tool.run({"code": reopen}, ctx)).status == "error"  # released with its job
