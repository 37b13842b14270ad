"""Validation: answer extraction, normalised EM, judge verdict parsing and the judge call flow.

The call flow runs against a real aiohttp OpenAI-compatible server on 127.0.0.1 that replies
from a script, through providers.openai_compat.OpenAICompatProvider.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from fasteval.core.types import Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import ScoreContext, Setting, make_suite
from fasteval.suites.vistahop import (
    VistaHopSuite,
    exact_match,
    extract_answer,
    normalize_answer,
    parse_judge_verdict,
)
from providers.openai_compat import OpenAICompatProvider


class ScriptedJudge:
    """An OpenAI-compatible endpoint answering from a list; logs every request body."""

    def __init__(self) -> None:
        self.replies: list[tuple[int, str]] = []
        self.requests: list[dict[str, Any]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(await request.json())
        status, text = self.replies.pop(0) if self.replies else (200, "<judge>No</judge>")
        if status != 200:
            return web.json_response({"error": {"message": text}}, status=status)
        return web.json_response({"choices": [{"message": {"role": "assistant", "content": text},
                                               "finish_reason": "stop"}],
                                  "usage": {"prompt_tokens": 10, "completion_tokens": 5}})


@pytest.fixture
async def judge_server() -> AsyncIterator[tuple[ScriptedJudge, str]]:
    script = ScriptedJudge()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", script.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield script, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


@pytest.fixture
async def provider(judge_server: tuple[ScriptedJudge, str], blobs: BlobStore) -> AsyncIterator[OpenAICompatProvider]:
    async def resolve(ref: str, profile: str = "") -> str:
        assert profile == "jpeg85"  # the reference sends the judge a JPEG q85
        return "data:image/png;base64," + base64.b64encode(blobs.get(ref)).decode()

    p = OpenAICompatProvider(judge_server[1], "Qwen3-VL-32B-Instruct", image_resolver=resolve)
    yield p
    await p.close()


def _suite_and_task(json_file: Path, blobs: BlobStore, **options: Any) -> tuple[VistaHopSuite, Task]:
    suite = make_suite("vistahop", {"path": str(json_file), **options}, blobs)
    assert isinstance(suite, VistaHopSuite)
    task = next(t for t in suite.load() if isinstance(t, Task))
    return suite, task


def _setting(suite: VistaHopSuite) -> Setting:
    return suite.default_settings()[2]


def _answered(text: str) -> Trajectory:
    return Trajectory(messages=[{"role": "assistant", "content": text}], answers=[extract_answer(text)], rounds=1)


def test_extract_answer_takes_last_answer_tag_after_thinking_and_last_round() -> None:
    assert extract_answer("<answer>A</answer> then <answer> B </answer>") == "B"
    assert extract_answer("<think><answer>no</answer></think>Final: <answer>yes</answer>") == "yes"
    assert extract_answer("<thinking>x <answer>hidden</answer></thinking>plain reply") == "plain reply"
    multi = "<answer>old</answer><|im_end|><|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\nnew text<|im_end|>"
    assert extract_answer(multi) == "new text"
    assert extract_answer("  1819 - 1521 = 298  <|im_end|>tail") == "1819 - 1521 = 298"
    assert extract_answer("") == ""


def test_normalised_exact_match_follows_squad_rules() -> None:
    assert normalize_answer("The  Hapag-Lloyd!") == "hapaglloyd"
    assert normalize_answer("An Apple a day") == "apple day"
    assert normalize_answer("A") == "a"  # a bare "a" is kept
    assert exact_match("the hapag-lloyd.", ["Hapag Lloyd AG", "Hapag-Lloyd"])
    assert not exact_match("Hapag Lloyd", ["Hapag-Lloyd"])  # punctuation is removed, not spaced
    assert not exact_match(None, ["x"])


def test_judge_verdict_parsing_never_turns_noise_into_no() -> None:
    assert parse_judge_verdict("<judge>Yes</judge>\n<reason>ok</reason>") is True
    assert parse_judge_verdict("<judge>\n no \n</judge>") is False
    assert parse_judge_verdict("Yes, this is correct.") is None
    assert parse_judge_verdict("<judge>Maybe</judge>") is None
    assert parse_judge_verdict("") is None and parse_judge_verdict(None) is None


async def test_exact_match_passes_without_calling_the_judge(json_file: Path, blobs: BlobStore,
                                                            judge_server: tuple[ScriptedJudge, str],
                                                            provider: OpenAICompatProvider) -> None:
    suite, task = _suite_and_task(json_file, blobs)
    score = await suite.score(task, _answered("<answer>Hapag-Lloyd</answer>"), _setting(suite),
                              ScoreContext(blobs, {"judge": provider}))
    assert (score.value, score.error, score.details["method"]) == (1.0, None, "em")
    assert judge_server[0].requests == []


async def test_unparseable_judge_reply_is_retried_then_judged(json_file: Path, blobs: BlobStore,
                                                              judge_server: tuple[ScriptedJudge, str],
                                                              provider: OpenAICompatProvider) -> None:
    script = judge_server[0]
    script.replies = [(200, "I think so."), (200, "<judge>Yes</judge><reason>same company</reason>")]
    suite, task = _suite_and_task(json_file, blobs, judge_no_verdict_is_no=False, texts="own")
    score = await suite.score(task, _answered("It is <answer>Hapag-Lloyd AG of Hamburg</answer>"),
                              _setting(suite), ScoreContext(blobs, {"judge": provider}))
    assert (score.value, score.error) == (1.0, None)
    assert score.details["judge"] == [{"gold": "Hapag-Lloyd", "verdict": True, "attempts": 2}]
    first, second = script.requests
    assert first["temperature"] == 0.0 and first["max_tokens"] == 8192 and "seed" not in first
    assert second["seed"] == 1  # a retry must not be answered from a verdict cache
    system, user = first["messages"]
    assert system["role"] == "system" and "strictly Yes or No" in system["content"]
    text, image = user["content"]
    assert "Question: Which company owns the ship?" in text["text"]
    assert "Ground Truth Answer: Hapag-Lloyd\n" in text["text"]
    assert "Model Response: Hapag-Lloyd AG of Hamburg\n" in text["text"]
    assert image["image_url"]["url"].startswith("data:image/png;base64,")


async def test_each_gold_is_judged_until_the_first_yes(json_file: Path, blobs: BlobStore,
                                                       judge_server: tuple[ScriptedJudge, str],
                                                       provider: OpenAICompatProvider) -> None:
    script = judge_server[0]
    script.replies = [(200, "<judge>No</judge>"), (200, "<judge>Yes</judge>"), (200, "<judge>Yes</judge>")]
    suite, task = _suite_and_task(json_file, blobs)
    score = await suite.score(task, _answered("<answer>HL AG</answer>"), _setting(suite),
                              ScoreContext(blobs, {"judge": provider}))
    assert score.value == 1.0 and len(script.requests) == 2
    assert [c["verdict"] for c in score.details["judge"]] == [False, True]
    script.replies = [(200, "<judge>No</judge>"), (200, "<judge>No</judge>")]
    wrong = await suite.score(task, _answered("<answer>Maersk</answer>"), _setting(suite),
                              ScoreContext(blobs, {"judge": provider}))
    assert (wrong.value, wrong.error) == (0.0, None)


async def test_judge_that_never_parses_is_a_judge_error_not_a_no(json_file: Path, blobs: BlobStore,
                                                                 judge_server: tuple[ScriptedJudge, str],
                                                                 provider: OpenAICompatProvider) -> None:
    script = judge_server[0]
    script.replies = [(200, "hmm")] * 4 + [(200, "<judge>No</judge>")]
    suite, task = _suite_and_task(json_file, blobs, judge_no_verdict_is_no=False)
    score = await suite.score(task, _answered("<answer>Maersk</answer>"), _setting(suite),
                              ScoreContext(blobs, {"judge": provider}))
    assert score.value is None and score.error is not None and score.error.startswith("judge_error:")
    assert len(script.requests) == 4  # the first call and three retries
    script.replies = [(400, "bad request")]
    failed = await suite.score(task, _answered("<answer>Maersk</answer>"), _setting(suite),
                               ScoreContext(blobs, {"judge": provider}))
    assert failed.value is None and failed.error is not None and failed.error.startswith("judge_error: judge call failed")
    missing = await suite.score(task, _answered("<answer>Maersk</answer>"), _setting(suite), ScoreContext(blobs))
    assert missing.error == "judge_error: no 'judge' service configured"


async def test_max_rounds_scores_zero_in_reference_and_judges_last_text_in_fixed(
    json_file: Path, blobs: BlobStore, judge_server: tuple[ScriptedJudge, str], provider: OpenAICompatProvider
) -> None:
    script = judge_server[0]
    ran_out = Trajectory(messages=[{"role": "assistant", "content": "Probably Hapag Lloyd <tool_call>{}</tool_call>"}],
                         answers=[None], rounds=10, termination="max_rounds")
    suite, task = _suite_and_task(json_file, blobs)
    ref = await suite.score(task, ran_out, _setting(suite), ScoreContext(blobs, {"judge": provider}))
    assert (ref.value, ref.details["method"]) == (0.0, "no_answer") and script.requests == []
    fixed, task = _suite_and_task(json_file, blobs, fidelity="fixed")
    script.replies = [(200, "<judge>Yes</judge>")]
    got = await fixed.score(task, ran_out, _setting(fixed), ScoreContext(blobs, {"judge": provider}))
    assert got.value == 1.0 and len(script.requests) == 1


# --- reference behaviours (fixture reference repository: tests/suites/reference_repos.py) -----


async def test_reference_no_verdict_is_a_no_and_the_next_gold_is_judged_with_the_reference_texts(
        json_file: Path, blobs: BlobStore, judge_server: tuple[ScriptedJudge, str],
        provider: OpenAICompatProvider) -> None:
    script = judge_server[0]
    script.replies = [(200, "I think so."), (200, "<judge>Yes</judge>")]
    suite, task = _suite_and_task(json_file, blobs)  # fidelity reference, texts reference
    score = await suite.score(task, _answered("<answer>HL AG</answer>"), _setting(suite),
                              ScoreContext(blobs, {"judge": provider}))
    assert (score.value, score.error) == (1.0, None)
    assert score.details["judge"] == [{"gold": "Hapag-Lloyd", "verdict": False, "attempts": 1},
                                      {"gold": "Hapag Lloyd AG", "verdict": True, "attempts": 1}]
    system, user = script.requests[0]["messages"]
    assert system["content"] == "SYNTH judge system. Output <judge>Yes/No</judge>."
    assert user["content"][0]["text"] == "SYNTH Q: Which company owns the ship?\nSYNTH GT: Hapag-Lloyd\nSYNTH R: HL AG"
    fixed, _ = _suite_and_task(json_file, blobs, fidelity="fixed")
    script.replies = [(200, "hmm")] * 4
    undecided = await fixed.score(task, _answered("<answer>HL AG</answer>"), _setting(fixed),
                                  ScoreContext(blobs, {"judge": provider}))
    assert undecided.value is None and undecided.error is not None


async def test_non_object_tool_call_json_is_a_sample_error_under_reference_only(
        json_file: Path, blobs: BlobStore, judge_server: tuple[ScriptedJudge, str],
        provider: OpenAICompatProvider) -> None:
    text = 'Let me look. <tool_call>["image_zoom_in_tool", [0, 0, 10, 10]]</tool_call>'
    suite, task = _suite_and_task(json_file, blobs)
    score = await suite.score(task, _answered(text), _setting(suite), ScoreContext(blobs, {"judge": provider}))
    assert (score.value, score.details["method"]) == (0.0, "sample_error")
    assert judge_server[0].requests == []
    fixed, _ = _suite_and_task(json_file, blobs, fidelity="fixed")
    judged = await fixed.score(task, _answered(text), _setting(fixed), ScoreContext(blobs, {"judge": provider}))
    assert judged.details["method"] == "judge" and len(judge_server[0].requests) == 2


def test_judge_image_is_smart_resized_before_its_jpeg_encoding(blobs: BlobStore) -> None:
    import pyvips

    from fasteval.images.decode import probe
    from fasteval.suites.vistahop.scoring import judge_image

    big = pyvips.Image.black(4000, 3000, bands=3).pngsave_buffer()
    ref = blobs.put(bytes(big))
    small = judge_image(blobs, ref)
    info = probe(blobs.get(small))
    assert small != ref and info.width * info.height <= 8_294_400
    assert info.width % 32 == 0 and info.height % 32 == 0 and abs(info.width / info.height - 4 / 3) < 0.02
    tiny = blobs.put(bytes(pyvips.Image.black(320, 256, bands=3).pngsave_buffer()))
    assert judge_image(blobs, tiny) == tiny  # already on the grid: sent as it is


def test_sampling_is_the_reference_runners_and_overridable_per_model(json_file: Path, blobs: BlobStore) -> None:
    from fasteval.suites.vistahop.suite import REFERENCE_SAMPLING

    suite, _ = _suite_and_task(json_file, blobs, sampling_by_model={"gpt-4o": {"temperature": 0.7, "top_p": 0.8}})
    setting = _setting(suite)
    assert suite.request_params(setting, "qwen") == REFERENCE_SAMPLING
    assert REFERENCE_SAMPLING == {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5}
    assert suite.request_params(setting, "gpt-4o") == {"temperature": 0.7, "top_p": 0.8}
    fixed, _ = _suite_and_task(json_file, blobs, fidelity="fixed")
    assert fixed.request_params(_setting(fixed), "qwen") == {}


def test_tool_system_prompt_and_error_strings_come_from_the_reference_files(json_file: Path, blobs: BlobStore) -> None:
    import json

    from fasteval.core.types import ToolCall
    from fasteval.tools.base import ToolResult

    suite, task = _suite_and_task(json_file, blobs, system_prompt="BASE")
    setting = _setting(suite)
    from fasteval.tools.base import TOOLS

    specs = [TOOLS[n]().spec() for n in setting.tools or []]
    text = suite.system_prompt(task, setting, specs)
    zoom = {"type": "function", "function": {"name": "image_zoom_in_tool", "description": "SYNTH zoom.",
                                             "parameters": {"type": "object", "properties": {
                                                 "bbox_2d": {"type": "array", "items": {"type": "number"}}},
                                                 "required": ["bbox_2d"]}}}
    assert text is not None and text.startswith("BASE\n\n# SYNTH Tools\n<tools>\n" + json.dumps(zoom) + "\n")
    bad = suite.tool_result_messages(ToolCall(id="1", name="nope", args={}, status="error"), ToolResult.fail("x"), setting)
    assert bad is not None and bad[0]["content"][-1]["text"] == "<tool_response>\nError: SYNTH unknown 'nope'.\n</tool_response>"
    crop = suite.tool_result_messages(ToolCall(id="2", name="image_zoom_in_tool", args={}, status="error"),
                                      ToolResult.fail("Invalid bbox format: too short"), setting)
    assert crop is not None and crop[0]["content"][-1]["text"] == "<tool_response>\nError: SYNTH bad bbox.\n</tool_response>"
    manifest = suite.text_manifest()
    assert manifest is not None and manifest["mode"] == "reference"
    assert {t["name"]: t["symbol"] for t in manifest["texts"]}["error.invalid_bbox"] == "evaluate_tool.tool_response@2"
