"""Text tool-call protocol: settings, system prompt with the tools block, user and tool-result messages."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from fasteval.core.types import Task, ToolCall, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Setting, make_suite
from fasteval.suites.vistahop import ImageSearchTool, VistaHopSuite, tool_response_content
from fasteval.tools.base import ToolContext, ToolResult, make_tool


def _suite(json_file: Path, blobs: BlobStore, **options: object) -> VistaHopSuite:
    suite = make_suite("vistahop", {"path": str(json_file), **options}, blobs)
    assert isinstance(suite, VistaHopSuite)
    return suite


def _tasks(suite: VistaHopSuite) -> list[Task]:
    return [t for t in suite.load() if isinstance(t, Task)]


def _setting(suite: VistaHopSuite, name: str) -> Setting:
    return next(s for s in suite.default_settings() if s.name == name)


def test_settings_follow_the_paper_and_presets_switch_to_public_code_values(json_file: Path, blobs: BlobStore) -> None:
    suite = _suite(json_file, blobs)
    by_name = {s.name: s for s in suite.default_settings()}
    assert list(by_name) == ["no_tool", "search", "search_crop"]
    assert all(s.tool_protocol == "text" for s in by_name.values())
    assert by_name["no_tool"].tools == [] and by_name["no_tool"].max_rounds == 1
    assert by_name["search"].tools == ["text_search_tool", "image_search_tool"]
    assert by_name["search_crop"].tools == ["image_zoom_in_tool", "text_search_tool", "image_search_tool"]
    assert by_name["search_crop"].max_rounds == 10 and by_name["search"].options["text_search_top_k"] == 3
    assert by_name["search"].options["all_images"] is False
    script = _suite(json_file, blobs, preset="script").default_settings()[2]
    assert (script.max_rounds, script.options["tool_options"]["text_search_tool"]["top_k"]) == (20, 10)
    cli = _suite(json_file, blobs, preset="cli", max_rounds=12, fidelity="fixed").default_settings()[2]
    assert (cli.max_rounds, cli.options["text_search_top_k"], cli.fidelity) == (12, 10, "fixed")
    assert cli.options["all_images"] is True and cli.options["judge_on_max_rounds"] is True


def test_tool_mode_system_prompt_is_base_blank_line_then_tools_block(json_file: Path, blobs: BlobStore) -> None:
    suite = _suite(json_file, blobs, system_prompt="BASE PROMPT", texts="own")
    task = _tasks(suite)[0]
    specs = [ImageSearchTool().spec()]
    text = suite.system_prompt(task, _setting(suite, "search"), specs)
    assert text is not None
    assert text.startswith("BASE PROMPT\n\n# Tools\n\nYou may call one or more functions")
    assert f"<tools>\n{json.dumps(specs[0], ensure_ascii=False)}\n</tools>" in text
    assert text.endswith('<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>')
    # Without a dataset prompt ours is used, and it states the <answer> tag and the 0-1000 bbox rule.
    ours = _suite(json_file, blobs).system_prompt(task, _setting(suite, "search_crop"), specs)
    assert ours is not None and "<answer></answer>" in ours and "0-1000" in ours and "<tools>" in ours


def test_direct_mode_appends_format_instruction_and_has_no_tools(json_file: Path, blobs: BlobStore,
                                                                 tmp_path: Path) -> None:
    config = tmp_path / "datasets.json"
    config.write_text(json.dumps({"vistahop": {"input_template": {"arguments": {
        "system_prompt": "SYS", "format_instruction": "Answer in <answer></answer>."}}}}))
    suite = _suite(json_file, blobs, config=str(config))
    task, second = _tasks(suite)[:2]
    direct = _setting(suite, "no_tool")
    assert suite.system_prompt(task, direct, []) == "SYS"
    msg = suite.user_message(task, 0, direct, Trajectory())
    assert msg["content"][0] == {"type": "image", "image": task.turns[0].images[0]}
    assert msg["content"][1]["text"] == "Which company owns the ship?\nAnswer in <answer></answer>."
    tool_msg = suite.user_message(second, 0, _setting(suite, "search"), Trajectory())
    assert [p["type"] for p in tool_msg["content"]] == ["image", "text"]  # first image only (reference)
    assert tool_msg["content"][1]["text"] == "What year was it founded?"
    fixed = _suite(json_file, blobs, fidelity="fixed")
    all_msg = fixed.user_message(_tasks(fixed)[1], 0, _setting(fixed, "search"), Trajectory())
    assert [p["type"] for p in all_msg["content"]] == ["image", "image", "text"]


async def test_image_search_tool_replays_dataset_results_through_the_blob_store(json_file: Path,
                                                                               blobs: BlobStore) -> None:
    suite = _suite(json_file, blobs)
    first, _, third = _tasks(suite)
    tool = make_tool("image_search_tool")
    assert isinstance(tool, ImageSearchTool) and tool.parameters["properties"] == {}
    result = await tool.run({}, ToolContext(blobs=blobs, task=first, images=first.turns[0].images))
    assert result.status == "ok" and result.output.startswith("Reverse Image Search Results:")
    assert "\n\nTitle 1: title 0\nThumbnail 1: " in result.output and "Title 5: title 4" in result.output
    assert "Title 6" not in result.output
    assert result.images == first.metadata["image_search_thumbnails"]
    assert all(blobs.get(ref) for ref in result.images)
    empty = await tool.run({}, ToolContext(blobs=blobs, task=third, images=[]))
    assert empty.output == "No matching images were found." and empty.images == []


async def test_tool_results_come_back_as_user_message_in_tool_response_tags(json_file: Path, blobs: BlobStore,
                                                                           png: Callable[..., bytes]) -> None:
    suite = _suite(json_file, blobs)
    first = _tasks(suite)[0]
    setting = _setting(suite, "search")
    result = await ImageSearchTool().run({}, ToolContext(blobs=blobs, task=first, images=[]))
    call = ToolCall(id="c1", name="image_search_tool", args={}, status="ok")
    msgs = suite.tool_result_messages(call, result, setting)
    assert msgs is not None and len(msgs) == 1 and msgs[0]["role"] == "user"
    parts = msgs[0]["content"]
    assert parts[0] == {"type": "text", "text": "<tool_response>\nReverse Image Search Results:\n\nTitle 1: title 0\nThumbnail 1: "}
    assert parts[1] == {"type": "image", "image": first.metadata["image_search_thumbnails"][0]}
    assert parts[2]["text"] == "\n\nTitle 2: title 1\nThumbnail 2: "
    assert parts[-3]["text"].endswith("Thumbnail 5: ") and parts[-2]["type"] == "image"
    assert parts[-1] == {"type": "text", "text": "\n</tool_response>"}  # the reference's closing part
    crop_ref = blobs.put(png((1, 1, 1)))
    crop = tool_response_content(ToolResult(status="ok", output="Here is the zoomed image:", images=[crop_ref]))
    assert crop == [{"type": "text", "text": "<tool_response>\nHere is the zoomed image:"},
                    {"type": "image", "image": crop_ref}, {"type": "text", "text": "\n</tool_response>"}]
    text_only = tool_response_content(ToolResult(status="ok", output="Final summary generated for query: q\nS"))
    assert text_only == [{"type": "text", "text": "<tool_response>\nFinal summary generated for query: q\nS\n</tool_response>"}]
    error = tool_response_content(ToolResult.fail("Invalid bbox format."))
    assert error[0]["text"] == "<tool_response>\nError: Invalid bbox format.\n</tool_response>"


async def test_missing_thumbnail_keeps_its_title_and_images_stay_in_place(blobs: BlobStore,
                                                                          png: Callable[..., bytes]) -> None:
    a, c = blobs.put(png((1, 0, 0))), blobs.put(png((0, 0, 1)))
    task = Task(id="x", turns=[], metadata={"image_search_titles": ["A", "B", "C"],
                                            "image_search_thumbnails": [a, None, c]})
    result = await ImageSearchTool().run({}, ToolContext(blobs=blobs, task=task, images=[]))
    assert result.images == [a, c]
    parts = tool_response_content(result)
    assert [p["type"] for p in parts] == ["text", "image", "text", "image", "text"]
    assert parts[2]["text"] == "\n\nTitle 2: B\nThumbnail 2: \n\nTitle 3: C\nThumbnail 3: "


def test_reference_reads_tool_arguments_from_arguments_only(json_file: Path, blobs: BlobStore) -> None:
    from fasteval.engine.run.agent import parse_text_tool_call

    reply = '<tool_call>{"name": "image_zoom_in_tool", "parameters": {"bbox_2d": [0, 0, 5, 5]}}</tool_call>'
    strict = parse_text_tool_call(reply, arguments_only=True)
    loose = parse_text_tool_call(reply)
    assert strict is not None and json.loads(strict.arguments) == {}
    assert loose is not None and json.loads(loose.arguments) == {"bbox_2d": [0, 0, 5, 5]}
    assert _setting(_suite(json_file, blobs), "search").options["tool_call_arguments_only"] is True
    assert _setting(_suite(json_file, blobs, fidelity="fixed"), "search").options["tool_call_arguments_only"] is False
