"""The baseline of benchmarks/throughput.py: a minimal agent loop on raw aiohttp + uvloop + orjson.

It sends exactly the request pattern the engine sends for a jsonl task with one image and the
``calculator`` tool: the first user message holds the image as a base64 data URL plus the prompt,
then every round re-sends the whole growing history (assistant tool call, tool result, ...) until
the model answers. No retries, records, limits or resume: this is the floor our engine is
measured against. Run by throughput.py in its own process:

    python benchmarks/_rawclient.py --url http://127.0.0.1:PORT/v1 --image IMG --n N --concurrency C

Image modes (benchmarks/images_throughput.py): ``--tool-image`` offers ``image_zoom_in_tool``
instead and answers each call as the engine does, cutting the crop from the original with
pyvips (decode, crop the 0-1000 box, Qwen smart-resize to multiples of 32, PNG without
metadata) in a worker thread and sending it in a user message after the tool message;
``--local-media DIR`` sends ``file://`` URLs (the image's path, crops written under DIR)
instead of data URLs, for servers started with an allowed local media path.

It prints one JSON line: wall_s (first request to last answer), trajectories, rounds, errors, and
the process's user+sys CPU and peak RSS from ``getrusage(RUSAGE_SELF)`` at the end.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import base64
import hashlib
import math
import operator
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import uvloop

CALCULATOR = {
    "type": "function",
    "function": {
        "name": "calculator",
        "description": ("Evaluate an arithmetic expression. Supports + - * / % ** ^ (power), parentheses, "
                        "and sqrt, sin, cos, tan, log, exp of one argument."),
        "parameters": {"type": "object",
                       "properties": {"expression": {"type": "string", "description": "e.g. '(3 + 4) * 2'"}},
                       "required": ["expression"]},
    },
}
ZOOM = {
    "type": "function",
    "function": {
        "name": "image_zoom_in_tool",
        "description": ("Zoom in on a region of the image by cropping it with a bounding box. bbox_2d is "
                        "[x1, y1, x2, y2] in coordinates normalised to 0-1000."),
        "parameters": {"type": "object",
                       "properties": {"bbox_2d": {"type": "array", "items": {"type": "number"}},
                                      "label": {"type": "string"}, "img_idx": {"type": "number"}},
                       "required": ["bbox_2d", "label", "img_idx"]},
    },
}
TOOL_IMAGES_TEXT = "Images returned by the tool call above:"
_OPS: dict[type[ast.operator], Callable[[float, float], float]] = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _calc(node: ast.AST) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return float(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_calc(node.left), _calc(node.right))
    raise ValueError("unsupported expression")


def calculator(arguments: str) -> str:
    """The same work a real tool does: parse the arguments, evaluate, serialise the result."""
    expr = orjson.loads(arguments)["expression"]
    value = _calc(ast.parse(expr.strip(), mode="eval").body)
    result = int(value) if float(value).is_integer() else value
    return orjson.dumps({"result": result, "expression": expr, "status": "success"}).decode()


def _round_by(x: float, f: int) -> int:
    return max(f, round(x / f) * f)


def smart_size(h: int, w: int, f: int = 32, lo: int = 65_536, hi: int = 8_294_400) -> tuple[int, int]:
    """Qwen2.5-VL's smart_resize target (height, width), as the zoom tool computes it."""
    hb, wb = _round_by(h, f), _round_by(w, f)
    if hb * wb > hi:
        beta = math.sqrt(h * w / hi)
        hb, wb = max(f, math.floor(h / beta / f) * f), max(f, math.floor(w / beta / f) * f)
    elif hb * wb < lo:
        beta = math.sqrt(lo / (h * w))
        hb, wb = math.ceil(h * beta / f) * f, math.ceil(w * beta / f) * f
    return hb, wb


def zoom(image: bytes, arguments: str, local_dir: Path | None) -> str:
    """The zoom tool's image work, done in a worker thread: returns the crop's image URL."""
    import pyvips

    x1, y1, x2, y2 = orjson.loads(arguments)["bbox_2d"]
    img = pyvips.Image.new_from_buffer(image, "", access="sequential")
    left, top = math.floor(x1 / 1000 * img.width), math.floor(y1 / 1000 * img.height)
    right, bottom = math.ceil(x2 / 1000 * img.width), math.ceil(y2 / 1000 * img.height)
    region = img.crop(left, top, right - left, bottom - top)
    h, w = smart_size(region.height, region.width)
    if (w, h) != (region.width, region.height):
        region = region.resize(w / region.width, vscale=h / region.height, kernel="lanczos3")
    png = bytes(region.pngsave_buffer(keep="none"))
    if local_dir is None:
        return "data:image/png;base64," + base64.b64encode(png).decode("ascii")
    path = local_dir / hashlib.sha256(png).hexdigest()
    path.write_bytes(png)
    return path.as_uri()


async def trajectory(session: aiohttp.ClientSession, url: str, model: str, image_url: str, i: int,
                     max_rounds: int, image: bytes | None = None, local_dir: Path | None = None) -> int:
    """One task: returns the number of model calls it took (``image`` set: the zoom-tool mode)."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_url}},
        {"type": "text", "text": f"Task {i}: what is 1 + 1? Use the calculator."}]}]
    tools = [CALCULATOR] if image is None else [ZOOM]
    for rounds in range(1, max_rounds + 1):
        body = orjson.dumps({"model": model, "messages": messages, "tools": tools, "seed": 0})
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
            raw = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {raw[:200]!r}")
        msg = orjson.loads(raw)["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        if not calls:
            return rounds
        messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": calls})
        crops: list[dict[str, Any]] = []
        for call in calls:
            if image is None:
                messages.append({"role": "tool", "tool_call_id": call["id"],
                                 "content": calculator(call["function"]["arguments"])})
                continue
            crop_url = await asyncio.to_thread(zoom, image, call["function"]["arguments"], local_dir)
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "Here is the zoomed image:"})
            crops.append({"type": "image_url", "image_url": {"url": crop_url}})
        if crops:
            messages.append({"role": "user", "content": [{"type": "text", "text": TOOL_IMAGES_TEXT}, *crops]})
    raise RuntimeError("no answer within max_rounds")


async def run(url: str, model: str, image_bytes: bytes, image_url: str, n: int, concurrency: int, max_rounds: int,
              tool_image: bool = False, local_dir: Path | None = None) -> dict[str, Any]:
    endpoint = url.rstrip("/") + "/chat/completions"
    connector = aiohttp.TCPConnector(limit=concurrency)
    timeout = aiohttp.ClientTimeout(total=300)
    rounds_total = errors = 0
    next_i = 0
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        async def worker() -> None:
            nonlocal rounds_total, errors, next_i
            while next_i < n:
                i = next_i
                next_i += 1
                try:
                    rounds = await trajectory(session, endpoint, model, image_url, i, max_rounds,
                                              image_bytes if tool_image else None, local_dir)
                    rounds_total += rounds  # not `+= await ...`: that reads the total before the await
                except Exception:  # counted, not retried: the baseline does no error handling
                    errors += 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(min(concurrency, n))))
        wall = time.perf_counter() - t0
    return {"wall_s": wall, "trajectories": n - errors, "errors": errors, "rounds": rounds_total}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="sim-tools")
    ap.add_argument("--image", required=True, type=Path)
    ap.add_argument("--n", type=int, required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--max-rounds", type=int, default=10)
    ap.add_argument("--tool-image", action="store_true", help="offer the zoom tool; each call returns a crop")
    ap.add_argument("--local-media", type=Path, default=None, help="send file:// URLs; crops are written here")
    a = ap.parse_args()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    image_bytes = a.image.read_bytes()
    mime = "image/jpeg" if image_bytes[:2] == b"\xff\xd8" else "image/png"
    # Encoded once and shared by every request, as a hand-written client would.
    if a.local_media is None:
        image_url = f"data:{mime};base64," + base64.b64encode(image_bytes).decode("ascii")
    else:
        image_url = a.image.resolve().as_uri()
    out = uvloop.run(run(a.url, a.model, image_bytes, image_url, a.n, a.concurrency, a.max_rounds, a.tool_image,
                         a.local_media))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = r1.ru_utime + r1.ru_stime
    out["cpu_startup_s"] = r0.ru_utime + r0.ru_stime
    out["maxrss_kb"] = peak_rss_kb()
    print(orjson.dumps(out).decode(), flush=True)


def peak_rss_kb() -> int:
    """This process's own peak RSS (VmHWM). ru_maxrss is not: after fork+exec it keeps the forking
    parent's peak, so both sides of a benchmark would read at least the benchmark process's size."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


if __name__ == "__main__":
    main()
