"""Text protocols: the harness's call regex read in linear time, numbers we cannot use and boxes
we will not pad are tool errors (issue 30, item 11)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fasteval.images import ImageError
from fasteval.tools.text_protocols import (
    DeepEyesProtocol,
    DeepEyesTexts,
    MiniO3Protocol,
    MiniO3Texts,
    deepeyes_crop,
)
from fasteval.tools.text_protocols.mini_o3 import reference_call

_spec = importlib.util.spec_from_file_location(
    "protocol_checkouts_bounds", Path(__file__).resolve().parents[1] / "suites" / "twi" / "protocol_checkouts.py")
assert _spec is not None and _spec.loader is not None
if "protocol_checkouts_bounds" not in sys.modules:
    sys.modules["protocol_checkouts_bounds"] = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(sys.modules["protocol_checkouts_bounds"])
regions_png = sys.modules["protocol_checkouts_bounds"].regions_png

# Mini-o3's own regex (vllm_async_engine.py), the oracle on inputs small enough for it.
HARNESS = re.compile(r'.*<grounding>{"bbox_2d": (.*),.*"source": [\',"](.*)[\',"]}</grounding>', re.S)
_PIECES = ['<grounding>{"bbox_2d": ', '"source": ', ",", "'", '"', "}", "[0.1, 0.2]", "x", " ", "observation_1", "\n"]


@settings(max_examples=600, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=14).map("".join))
def test_reference_call_reads_what_the_harness_regex_reads(body: str) -> None:
    kept = body + "}</grounding>"
    m = HARNESS.match(kept)
    assert reference_call(kept) == (m.groups() if m else None)


def test_reference_call_on_a_realistic_reply() -> None:
    kept = 'I look. <grounding>{"bbox_2d": [0.1, 0.2, 0.3, 0.4], "source": "observation_2"}</grounding>'
    assert reference_call(kept) == ("[0.1, 0.2, 0.3, 0.4]", "observation_2")
    hostile = '<grounding>{"bbox_2d": ,' * 20_000 + '"source": "x"}</grounding>'  # the regex: minutes
    assert reference_call(hostile) is not None


def test_a_number_we_cannot_use_is_a_tool_error_not_a_traceback() -> None:
    """A 400-digit integer made ``math.isfinite`` raise OverflowError: the job failed internally."""
    deep = DeepEyesProtocol("reference", DeepEyesTexts(system="s", feedback="f"))
    huge = "1" + "0" * 400
    parsed = deep.parse('<tool_call>{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [0, 0, '
                        + huge + ", 10]}}</tool_call>")
    assert not parsed.calls and parsed.rejected is not None and "within ±1,000,000" in parsed.rejected
    texts = MiniO3Texts(system="s", observation=lambda a, o: "", error=lambda e: e)
    mini = MiniO3Protocol("fixed", texts)
    call = mini.parse('<grounding>{"bbox_2d": [0, 0, ' + huge + ', 1], "source": "original_image"}</grounding>')
    assert not call.calls and call.rejected is not None  # a rejected call: the model reads why
    from fasteval.tools.text_protocols.mini_o3 import _box
    with pytest.raises(ValueError, match="must be a list of 4 numbers"):
        _box([0, 0, int(huge), 1], 100, 100, "reference")


def test_a_box_far_larger_than_the_image_is_refused_before_any_pixel_is_made() -> None:
    """Under reference the box is padded with black: 60000x60000 cost 9 s of CPU per call."""
    original = regions_png()  # 200x100
    with pytest.raises(ImageError, match=r"10000x10000 px, more than 2 times the image \(200x100\)"):
        deepeyes_crop(original, [0, 0, 10_000, 10_000], clamp=False)
    data, w, h = deepeyes_crop(original, [-100, -50, 300, 150], clamp=False)  # the image with a black margin
    assert data and w > 0 and h > 0
