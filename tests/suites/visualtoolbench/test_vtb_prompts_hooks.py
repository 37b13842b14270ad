"""Prompt levels, settings, and the hooks that make reference and fixed fidelity differ."""

from __future__ import annotations

from pathlib import Path

import pytest
from vtb_fixtures import sample_rows, write_parquet

from fasteval.core.types import Task, ToolCall, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting
from fasteval.suites.visualtoolbench import (
    OVERFLOW_ANSWER,
    SYSTEM_PROMPTS,
    TOOL_NAMES,
    VisualToolBenchSuite,
    system_prompt_for,
)
from fasteval.tools.base import ToolResult


def _suite(tmp_path: Path, **options: object) -> tuple[VisualToolBenchSuite, list[Task]]:
    blobs = BlobStore(tmp_path / "blobs")
    path = write_parquet(tmp_path / "test.parquet", sample_rows()[:2])
    suite = VisualToolBenchSuite({"path": str(path), **options}, blobs)
    return suite, [t for t in suite.load() if isinstance(t, Task)]


def _with_tool(suite: VisualToolBenchSuite) -> Setting:
    return next(s for s in suite.default_settings() if s.name == "with-tool")


def test_prompt_levels_grow_in_content() -> None:
    low, mid, high = SYSTEM_PROMPTS["low"], SYSTEM_PROMPTS["mid"], SYSTEM_PROMPTS["high"]
    assert low.count(".") == 1 and "tools" in low
    assert mid.startswith(low) and "save" in mid and "image-processing" in mid and "general-purpose" in mid
    for point in ("proactive", "clues", "crop", "Save every transformed image", "Repeat", "Check",
                  "general-purpose", "limited"):
        assert point in high
    assert system_prompt_for("high", "fixed") == high


def test_medium_means_no_prompt_only_under_reference() -> None:
    assert system_prompt_for("medium", "reference") is None
    assert system_prompt_for("medium", "fixed") == SYSTEM_PROMPTS["mid"]
    with pytest.raises(ValueError, match="prompt_level"):
        system_prompt_for("extreme", "reference")


def test_settings_record_tools_rounds_and_switches(tmp_path: Path) -> None:
    suite, [task, _] = _suite(tmp_path, prompt_level="low")
    with_tool, no_tool = suite.default_settings()
    assert with_tool.name == "with-tool" and with_tool.tools == list(TOOL_NAMES) and with_tool.max_rounds == 20
    assert with_tool.options["image_profile"] == "jpeg85" and with_tool.options["prompt_level"] == "low"
    assert with_tool.options["first_image_only"] and with_tool.options["golden_history"]
    assert with_tool.options["overflow_answer"] == OVERFLOW_ANSWER
    assert suite.system_prompt(task, with_tool, []) == "SYNTH low prompt."  # the reference file's text
    own, [own_task, _] = _suite(tmp_path / "own", prompt_level="low", texts="own")
    assert own.system_prompt(own_task, _with_tool(own), []) == SYSTEM_PROMPTS["low"]
    assert no_tool.name == "no-tool" and no_tool.tools == [] and suite.system_prompt(task, no_tool, []) is None
    fixed = _with_tool(_suite(tmp_path / "f", fidelity="fixed")[0])
    assert fixed.fidelity == "fixed" and not fixed.options["first_image_only"]
    assert fixed.options["overflow_answer"] is None and fixed.options["image_profile"] == "jpeg85"


def test_unknown_fidelity_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fidelity"):
        VisualToolBenchSuite({"path": "x", "fidelity": "loose"}, BlobStore(tmp_path))


def test_reference_sends_first_image_only_and_golden_text_history(tmp_path: Path) -> None:
    suite, [single, multi] = _suite(tmp_path)
    setting, traj = _with_tool(suite), Trajectory()
    msg = suite.user_message(single, 0, setting, traj)
    assert msg["content"] == [{"type": "text", "text": single.turns[0].text},
                              {"type": "image", "image": single.turns[0].images[0]}]
    assert suite.history_before_turn(multi, 0, setting, traj) is None
    assert suite.history_before_turn(multi, 2, setting, traj) == [
        {"role": "user", "content": "Which month had the highest revenue?"},
        {"role": "assistant", "content": "March."},
        {"role": "user", "content": "And the lowest?"},
        {"role": "assistant", "content": "July."},
    ]
    # A turn without new images gets no image at all, as in the reference.
    assert suite.user_message(multi, 1, setting, traj)["content"] == [{"type": "text", "text": "And the lowest?"}]
    assert suite.answer_on_max_rounds(multi, 1, setting) == OVERFLOW_ANSWER


def test_fixed_sends_every_image_and_keeps_real_history(tmp_path: Path) -> None:
    suite, [single, multi] = _suite(tmp_path, fidelity="fixed")
    setting, traj = _with_tool(suite), Trajectory()
    parts = suite.user_message(single, 0, setting, traj)["content"]
    assert [p["image"] for p in parts if p["type"] == "image"] == single.turns[0].images
    assert len(single.turns[0].images) == 2
    assert suite.history_before_turn(multi, 2, setting, traj) is None
    assert suite.answer_on_max_rounds(multi, 0, setting) is None


def test_tool_images_follow_in_a_user_message_under_reference(tmp_path: Path) -> None:
    suite, [single, _] = _suite(tmp_path)
    setting = _with_tool(suite)
    img = single.turns[0].images[0]
    call = ToolCall(id="call_7", name="python_image_processing", args={"code": "..."}, status="ok")
    result = ToolResult(status="ok", output="{'ok': 'true'}", images=[img])
    assert suite.tool_result_messages(call, result, setting) == [
        {"role": "tool", "tool_call_id": "call_7", "name": "python_image_processing", "content": "{'ok': 'true'}"},
        {"role": "user", "content": [
            {"type": "text", "text": "Here are the transformed images from the tool call call_7."},
            {"type": "image", "image": img}]},
    ]
    calc = ToolCall(id="c2", name="calculator", args={"expression": "1+1"}, status="ok")
    assert suite.tool_result_messages(calc, ToolResult(status="ok", output="2"), setting) == [
        {"role": "tool", "tool_call_id": "c2", "name": "calculator", "content": "2"}]
    fixed_setting = _with_tool(_suite(tmp_path / "f", fidelity="fixed")[0])
    assert suite.tool_result_messages(call, result, fixed_setting) is None


def test_reference_tool_entries_use_the_reference_names_and_wording(tmp_path: Path) -> None:
    from fasteval.tools.base import TOOLS

    suite, [task, _] = _suite(tmp_path)
    setting = _with_tool(suite)
    specs = [TOOLS[n]().spec() for n in setting.tools or []]
    sent = suite.tool_specs(task, 0, setting, specs)
    assert sent is not None
    names = [s["function"]["name"] for s in sent]
    assert "google_search" in names and "web_search" not in names
    assert suite.tool_alias("google_search", setting) == "web_search" and suite.tool_alias("x", setting) is None
    image = next(s["function"] for s in sent if s["function"]["name"] == "python_image_processing")
    # first_image_only: the single-turn task's first image is input_0 (PNG sniffed from its bytes).
    assert image["description"].startswith("SYNTH image tool.\nfiles: ['input_0.png']; save to out as out/")
    assert image["parameters"] == {"type": "object", "properties": {"xpython_image_processing": {"type": "string"}},
                                   "required": ["xpython_image_processing"]}
    own, [own_task, _] = _suite(tmp_path / "own", texts="own", fidelity="fixed")
    own_sent = own.tool_specs(own_task, 0, _with_tool(own), specs)
    assert own_sent is not None and own.tool_alias("google_search", _with_tool(own)) is None
    own_image = next(s["function"] for s in own_sent if s["function"]["name"] == "python_image_processing")
    assert "['input_0.png', 'input_1.png']" in own_image["description"]  # fixed: every image of the turn


def test_multi_turn_no_tool_baseline_sends_no_images_under_reference(tmp_path: Path) -> None:
    suite, [single, multi] = _suite(tmp_path)
    no_tool = next(s for s in suite.default_settings() if s.name == "no-tool")
    text_only = suite.user_message(multi, 0, no_tool, Trajectory())
    assert [p["type"] for p in text_only["content"]] == ["text"]
    assert any(p["type"] == "image" for p in suite.user_message(single, 0, no_tool, Trajectory())["content"])
    fixed, [_, fixed_multi] = _suite(tmp_path / "f", fidelity="fixed")
    fixed_no_tool = next(s for s in fixed.default_settings() if s.name == "no-tool")
    assert any(p["type"] == "image" for p in fixed.user_message(fixed_multi, 0, fixed_no_tool, Trajectory())["content"])


def test_model_and_tools_see_the_same_pixels_whatever_the_exif_orientation(tmp_path: Path) -> None:
    import pyvips
    from vtb_fixtures import RED, row, rubric

    from fasteval.images.decode import decode, probe

    img = pyvips.Image.black(40, 20, bands=3).copy()
    img.set_type(pyvips.GValue.gint_type, "orientation", 6)  # displayed rotated 90 degrees
    jpeg = bytes(img.jpegsave_buffer())
    assert probe(jpeg).orientation == 6
    rows = [row("65f0a1b2c3d4e5f60123456a", "finance", "f", [
        {"prompt": "q", "golden": "a", "rubrics": {"r": rubric("x", 1)}, "images": [jpeg, RED]}])]
    path = write_parquet(tmp_path / "exif.parquet", rows)
    sizes = {}
    for fidelity in ("reference", "fixed"):
        suite = VisualToolBenchSuite({"path": str(path), "fidelity": fidelity}, BlobStore(tmp_path / fidelity))
        (task,) = [t for t in suite.load() if isinstance(t, Task)]
        first = suite.blobs.get(task.turns[0].images[0])
        # No orientation tag is left, so the encoder (which applies one) and the sandbox file agree.
        assert probe(first).orientation == 1
        out = decode(first)
        sizes[fidelity] = (out.width, out.height)
        assert suite.blobs.get(task.turns[0].images[1]) == RED  # untagged images keep their bytes
    assert sizes == {"reference": (40, 20), "fixed": (20, 40)}  # the reference never rotates
