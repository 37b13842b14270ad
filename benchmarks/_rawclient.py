"""The baseline of benchmarks/throughput.py: a minimal agent loop on raw aiohttp + uvloop + orjson.

It sends exactly the request pattern the engine sends for a jsonl task with one image and the
``calculator`` tool: the first user message holds the image as a base64 data URL plus the prompt,
then every round re-sends the whole growing history (assistant tool call, tool result, ...) until
the model answers. No retries, records, limits or resume: this is the floor our engine is
measured against. Run by throughput.py in its own process:

    python benchmarks/_rawclient.py --url http://127.0.0.1:PORT/v1 --image IMG --n N --concurrency C

It prints one JSON line: wall_s (first request to last answer), trajectories, rounds, errors, and
the process's user+sys CPU and peak RSS from ``getrusage(RUSAGE_SELF)`` at the end.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import base64
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


async def trajectory(session: aiohttp.ClientSession, url: str, model: str, image_url: str, i: int,
                     max_rounds: int) -> int:
    """One task: returns the number of model calls it took."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": image_url}},
        {"type": "text", "text": f"Task {i}: what is 1 + 1? Use the calculator."}]}]
    for rounds in range(1, max_rounds + 1):
        body = orjson.dumps({"model": model, "messages": messages, "tools": [CALCULATOR], "seed": 0})
        async with session.post(url, data=body, headers={"Content-Type": "application/json"}) as resp:
            raw = await resp.read()
            if resp.status != 200:
                raise RuntimeError(f"HTTP {resp.status}: {raw[:200]!r}")
        msg = orjson.loads(raw)["choices"][0]["message"]
        calls = msg.get("tool_calls") or []
        if not calls:
            return rounds
        messages.append({"role": "assistant", "content": msg.get("content"), "tool_calls": calls})
        for call in calls:
            messages.append({"role": "tool", "tool_call_id": call["id"],
                             "content": calculator(call["function"]["arguments"])})
    raise RuntimeError("no answer within max_rounds")


async def run(url: str, model: str, image_bytes: bytes, n: int, concurrency: int, max_rounds: int) -> dict[str, Any]:
    # Encoded once and shared by every request, as a hand-written client would.
    image_url = "data:image/png;base64," + base64.b64encode(image_bytes).decode("ascii")
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
                    rounds = await trajectory(session, endpoint, model, image_url, i, max_rounds)
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
    a = ap.parse_args()
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    out = uvloop.run(run(a.url, a.model, a.image.read_bytes(), a.n, a.concurrency, a.max_rounds))
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    out["cpu_s"] = r1.ru_utime + r1.ru_stime
    out["cpu_startup_s"] = r0.ru_utime + r0.ru_stime
    out["maxrss_kb"] = r1.ru_maxrss
    print(orjson.dumps(out).decode(), flush=True)


if __name__ == "__main__":
    main()
