"""The two VisualToolBench Python tools, run in the pooled sandbox (never in-process).

``python_image_processing`` and ``python_interpreter`` take model code, run it in a
``sandbox.SandboxPool`` found in ``ctx.services["sandbox"]`` with the task's images as
``input_0.png``... in the working folder, and return what the model sees: the harness's result
dict under ``fidelity="reference"``, our corrected one under ``"fixed"``. New images go to the
blob store and come back as refs. Options: ``stateful=True`` keeps variables across the calls of
one trajectory (session = ``ctx.session_id``; the job runner ends it through ``end_session``).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import re
from typing import Any, ClassVar, Literal

from fasteval.core.errors import ConfigError
from fasteval.core.options import Opt
from fasteval.services.registry import Closer, register_service
from fasteval.tools.base import Tool, ToolContext, ToolResult, register_tool
from providers import EndpointDown
from sandbox import RunResult, SandboxLimits, SandboxPool, SandboxStartError

MAX_CODE_CHARS = 5000
_CODE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "code": {"type": "string", "description": "Python code to run.", "minLength": 1, "maxLength": MAX_CODE_CHARS}
    },
    "required": ["code"],
}
SAVE_DIR = "out"
"""Where the model is told to save: relative to the working folder, which is right under both
isolations (the jail's /sandbox/work and the process fallback's host folder); an absolute
/sandbox/work/out only exists inside the jail."""

VTB_EXTRA = "vtb"
INTERPRETER_PACKAGES: dict[str, tuple[str, str]] = {
    "pandas": ("pandas", "pandas"), "pd": ("pandas", "pandas"), "scipy": ("scipy", "scipy"),
    "sklearn": ("sklearn", "scikit-learn"), "simpy": ("simpy", "simpy"), "tabulate": ("tabulate", "tabulate"),
    "BeautifulSoup": ("bs4", "beautifulsoup4"), "requests": ("requests", "requests"),
}
"""python_interpreter's pre-bound names (as the reference binds them) -> (module, distribution)."""
_NAME_ERROR = re.compile(r"NameError: name '(\w+)' is not defined")


def missing_extra_hint(stderr: str) -> str | None:
    """A one-line hint when code used a pre-bound name whose package is not installed here."""
    m = _NAME_ERROR.search(stderr or "")
    if m is None or m.group(1) not in INTERPRETER_PACKAGES:
        return None
    module, dist = INTERPRETER_PACKAGES[m.group(1)]
    if importlib.util.find_spec(module) is not None:
        return None
    return (f"{m.group(1)} is pre-bound by the reference harness but {dist} is not installed: "
            f"pip install 'fasteval[{VTB_EXTRA}]' (pandas, scipy, scikit-learn, simpy, tabulate, beautifulsoup4)")


def image_processing_description(image_names: list[str], save_dir: str = SAVE_DIR) -> str:
    """The harness's description with the sandbox's stable file names filled in."""
    listed = image_names or ["input_0.png", "input_1.png", "..."]
    return (
        "Generate arbitrary Python code for image manipulation and save the transformed image as PNG.\n"
        f"• Read one source image (your choice) from the working-directory file list: {listed}. "
        "Files are named input_<i> in the order the images were shown, with their own extension.\n"
        "• Perform any image processing with PIL, NumPy, or OpenCV. You cannot use matplotlib to show the image.\n"
        f"• You **must save** the transformed image as PNG to {save_dir} (PROCESSED_IMAGE_SAVE_PATH) using the "
        'filename pattern "transformed_image_i.png", where the counter **i starts at 0 and increments on each '
        "invocation** so files are never overwritten. Example:\n"
        f'    img.save(f"{save_dir}/transformed_image_{{i}}.png", "PNG")\n'
    )


INTERPRETER_DESCRIPTION = (
    "General-purpose Python interpreter. Run arbitrary Python code and capture stdout via print(). "
    "Any exceptions are returned in stderr.\n\n"
    "Pre-installed packages:\n  • numpy\n  • pillow\n  • opencv\n  • matplotlib\n"
    "The task's images are in the working directory as input_0.png, input_1.png, ... (own extension)."
)


class _SandboxTool(Tool):
    option_schema = {"stateful": Opt("bool", "one interpreter per trajectory (state kept between calls)"),
                     "persist_files": Opt("bool", "files a call saves stay for the trajectory's later calls "
                                                  "(a fresh interpreter each call; VisualToolBench reference)")}
    kind: ClassVar[Literal["image", "interpreter"]]
    requires = ("sandbox",)
    keeps_sessions = True

    async def end_session(self, session_id: str, services: dict[str, Any]) -> None:
        """End the job's session in the pool (its variables and folder); a no-op if it opened none."""
        pool = services.get("sandbox")
        if isinstance(pool, SandboxPool):
            await pool.release(session_id)

    def prepare(self, services: dict[str, Any]) -> None:
        """Start the pool's workers in the background, beside the first job's first model request."""
        pool = services.get("sandbox")
        if isinstance(pool, SandboxPool):
            pool.start_soon()

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        code = args.get("code") if isinstance(args, dict) else None
        if not isinstance(code, str) or not code.strip():
            return ToolResult.fail("argument 'code' must be a non-empty string")
        if len(code) > MAX_CODE_CHARS:
            return ToolResult.fail(f"argument 'code' is {len(code)} characters; the limit is {MAX_CODE_CHARS}")
        pool = ctx.services.get("sandbox")
        if not isinstance(pool, SandboxPool):
            return ToolResult.fail(
                f"{self.name} needs a sandbox.SandboxPool in ctx.services['sandbox']; none is configured"
            )
        fidelity: Literal["reference", "fixed"] = "reference" if ctx.fidelity == "reference" else "fixed"
        images = await asyncio.to_thread(lambda: [ctx.blobs.get(ref) for ref in ctx.images]) if ctx.images else []
        stateful, files = bool(self.options.get("stateful")), bool(self.options.get("persist_files"))
        session = ctx.session_id if (stateful or files) and ctx.session_id else None
        try:
            result = await pool.run(code, images=images, session_id=session, keep="state" if stateful else "files",
                                    fidelity=fidelity, tool=self.kind)
        except SandboxStartError as e:  # no job that needs the sandbox can run: left for a rerun
            raise EndpointDown("sandbox", f"the Python sandbox could not start: {e}") from None
        refs = await asyncio.to_thread(lambda: [ctx.blobs.put(img.data) for img in result.images]) \
            if result.images else []
        hint = missing_extra_hint(result.stderr) if self.kind == "interpreter" and not result.ok else None
        if hint is not None:  # say which extra provides the name, on the result and the record
            result.stderr = f"{result.stderr.rstrip()}\n{hint}\n"
            result.error = f"{result.error or 'NameError'}; {hint}"
        return ToolResult(
            status="ok" if result.ok else "error",
            output=json.dumps(self._view(result, fidelity), ensure_ascii=False),
            images=refs,
            error=None if result.ok else result.error,
            extra={
                "sandbox_status": result.status,
                "inputs": result.input_names,
                "outputs": [img.path for img in result.images],
                "stdout_chars": result.stdout_chars,
                "duration_s": round(result.duration_s, 4),
            },
        )

    def _view(self, result: RunResult, fidelity: str) -> dict[str, Any]:
        """The dict the model reads, shaped like the harness's return value per fidelity."""
        paths = [img.path for img in result.images]
        ok = "true" if result.ok else "false"
        if fidelity == "fixed":
            return {"ok": ok, "stdout": result.stdout, "stderr": result.stderr, "output_paths": paths}
        if self.kind == "interpreter":
            return {"stdout": result.stdout, "stderr": result.stderr}
        return {
            "ok": ok,
            "stdout": result.stdout,
            "stderr": result.stderr,
            "output_path": paths[0] if paths else "",
            "output_paths": paths,
        }


@register_tool
class PythonImageProcessing(_SandboxTool):
    name = "python_image_processing"
    description = image_processing_description([])
    parameters = _CODE_SCHEMA
    kind = "image"

    def spec_for_images(self, image_names: list[str]) -> dict[str, Any]:
        """The tool entry listing this task's actual input names (the harness rebuilds it per round)."""
        spec = self.spec()
        spec["function"]["description"] = image_processing_description(image_names)
        return spec


@register_tool
class PythonInterpreter(_SandboxTool):
    name = "python_interpreter"
    description = INTERPRETER_DESCRIPTION
    parameters = _CODE_SCHEMA
    kind = "interpreter"


@register_service("sandbox")
async def start_sandbox(run_cfg: dict[str, Any]) -> tuple[SandboxPool, Closer]:
    """One pool per sweep, sized by ``run.sandbox.workers`` (default: the CPU count), with
    ``run.sandbox.limits`` over the defaults of SandboxLimits.

    Not started here: its workers take seconds to start (numpy, PIL, OpenCV and matplotlib,
    imported once each), which a run with no job left that offers a Python tool should not pay.
    The first such job starts it in the background (``prepare``); a call waits for it. A pool
    that cannot start leaves every job that needs it unrun (``EndpointDown``): the sweep ends
    incomplete with the reason, and a rerun runs them.
    """
    opts = dict(run_cfg.get("sandbox") or {})
    try:
        limits = SandboxLimits(**(opts.get("limits") or {}))
    except (TypeError, ValueError) as e:
        raise ConfigError(f"run.sandbox.limits: {e}") from None
    pool = SandboxPool(opts.get("workers"), isolation=opts.get("isolation", "auto"), limits=limits)
    return pool, pool.close
