"""Fuzzing what comes from outside: dataset lines, model replies (both tool protocols), image bytes.

Random bytes and random JSON must never raise anything but the one documented error of each
entry point, and every error is one bounded line: a dataset row becomes a LoadError, a model
reply a ChatResponse or a ProviderError("bad_response"), a tool call a ToolResult, an image an
ImageError.
"""

from __future__ import annotations

import asyncio
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import orjson
import pytest
import pyvips
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fasteval.core.types import Task, Turn
from fasteval.engine.run.agent import AgentEnv, execute_tool, parse_text_tool_call
from fasteval.images.decode import ImageError, ImageLimits, decode, probe, verify
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, make_suite
from fasteval.tools.base import ToolContext, ToolResult, make_tool
from providers.base import ChatResponse, ProviderError, ToolCallRequest
from providers.openai_compat import parse_response

# Derandomized and without an example database: the same examples on every machine and run.
FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])
MAX_ERROR = 2000

scalars = st.none() | st.booleans() | st.integers(-10**12, 10**12) | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=12)
FIELDS = ["id", "prompt", "text", "turns", "images", "answer", "tools", "match", "metadata"]
rows = st.dictionaries(st.sampled_from(FIELDS), json_values, max_size=6)
lines = st.lists(rows.map(lambda r: orjson.dumps(r)) | json_values.map(lambda v: orjson.dumps(v))
                 | st.binary(max_size=40), min_size=1, max_size=6)


@pytest.mark.slow
@FUZZ
@given(lines)
def test_jsonl_loader_turns_any_line_into_a_task_or_one_bounded_load_error(content: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        (folder / "a.png").write_bytes(b"not really a png")
        path = folder / "tasks.jsonl"
        path.write_bytes(b"\n".join(line.replace(b"\n", b" ") for line in content) + b"\n")
        items = list(make_suite("jsonl", {"path": str(path)}, BlobStore(folder / "blobs")).load())
    non_blank = [ln for ln in content if ln.replace(b"\n", b" ").strip()]
    assert len(items) == len(non_blank)  # one item per line: no line hides another
    for item in items:
        if isinstance(item, LoadError):
            assert "\n" not in item.message and len(item.message) < MAX_ERROR
            assert "line " in item.message
        else:
            assert isinstance(item, Task) and all(isinstance(t, str) for t in item.tools)


bodies = (json_values.map(lambda v: orjson.dumps(v))
          | st.builds(lambda choices, usage: orjson.dumps({"choices": choices, "usage": usage}),
                      st.lists(st.dictionaries(st.sampled_from(["message", "finish_reason"]), json_values
                                               | st.dictionaries(st.sampled_from(["content", "tool_calls"]),
                                                                 json_values), max_size=2), max_size=2),
                      json_values)
          | st.binary(max_size=60))


@FUZZ
@given(bodies)
def test_native_replies_parse_or_fail_as_bad_response(raw: bytes) -> None:
    try:
        resp = parse_response(raw)
    except ProviderError as e:
        assert e.kind == "bad_response" and len(str(e)) < MAX_ERROR
        return
    assert isinstance(resp, ChatResponse)
    assert all(isinstance(c.arguments, str) and isinstance(c.name, str) for c in resp.tool_calls)


@FUZZ
@given(st.text(max_size=60), json_values, st.text(max_size=20))
def test_text_protocol_calls_parse_or_are_an_answer(prefix: str, payload: Any, name: str) -> None:
    for body in (orjson.dumps(payload).decode(), json.dumps({"name": name, "arguments": payload}), prefix):
        call = parse_text_tool_call(f"{prefix}<tool_call>{body}</tool_call>")
        assert call is None or (isinstance(call.name, str) and isinstance(orjson.loads(call.arguments), object))


def _image_ctx(folder: Path) -> tuple[ToolContext, AgentEnv]:
    blobs = BlobStore(folder / "blobs")
    ref = blobs.put(pyvips.Image.black(40, 30, bands=3).write_to_buffer(".png"))
    task = Task(id="fuzz", turns=[Turn(text="", images=[ref])])
    tools = {n: make_tool(n) for n in ("calculator", "image_zoom_in_tool")}
    env = AgentEnv(client=None, suite=None, setting=None, tools=tools, blobs=blobs)  # type: ignore[arg-type]
    return ToolContext(blobs=blobs, task=task, images=[ref]), env


@FUZZ
@given(st.sampled_from(["calculator", "image_zoom_in_tool", "nope"]),
       json_values.map(lambda v: orjson.dumps(v).decode()) | st.text(max_size=40)
       | st.dictionaries(st.sampled_from(["expression", "bbox_2d", "label", "img_idx"]), json_values,
                         max_size=4).map(lambda d: orjson.dumps(d).decode()))
def test_tool_arguments_of_any_shape_give_a_tool_result(name: str, arguments: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        ctx, env = _image_ctx(Path(tmp))
        result, _, _ = asyncio.run(execute_tool(ToolCallRequest(id="c", name=name, arguments=arguments), env, ctx))
    assert isinstance(result, ToolResult) and result.status in ("ok", "error")
    if result.status == "error":
        assert len(result.output) < MAX_ERROR + len(arguments)


def _seed_images() -> list[bytes]:
    img = pyvips.Image.black(24, 16, bands=3) + 90
    return [img.write_to_buffer(ext) for ext in (".png", ".jpg", ".webp", ".gif", ".tif")]


SEEDS = _seed_images()
LIMITS = ImageLimits(max_pixels=4_000_000)


def _mutate(seed: bytes, rnd: random.Random) -> bytes:
    data = bytearray(seed)
    for _ in range(rnd.randint(1, 8)):
        op = rnd.random()
        if op < 0.4 and data:
            data[rnd.randrange(len(data))] = rnd.randrange(256)
        elif op < 0.7:
            data = data[: rnd.randrange(len(data) + 1)]
        else:
            pos = rnd.randrange(len(data) + 1)
            data[pos:pos] = rnd.randbytes(rnd.randint(1, 16))
    return bytes(data)


@FUZZ
@given(st.binary(max_size=200) | st.tuples(st.sampled_from(range(len(SEEDS))), st.integers(0, 2**32)).map(
    lambda t: _mutate(SEEDS[t[0]], random.Random(t[1]))))
def test_any_bytes_decode_or_raise_image_error(data: bytes) -> None:
    for fn in (probe, verify):
        try:
            fn(data, LIMITS)
        except ImageError as e:
            assert len(str(e)) < MAX_ERROR and "\n" not in str(e).strip()
    try:
        img = decode(data, limits=LIMITS)
    except ImageError:
        return
    assert img.width > 0 and img.height > 0
