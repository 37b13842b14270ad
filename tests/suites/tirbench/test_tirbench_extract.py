"""Extraction prompt layout, reply parsing, and retry-then-judge_error against a scripted extractor."""

from __future__ import annotations

import asyncio

import pytest

from fasteval.suites.tirbench.demos import DEMO_BLOCKS
from fasteval.suites.tirbench.extract import (
    EXTRACTOR_SYSTEM_PROMPT,
    ExtractionReplyError,
    extract,
    extraction_prompt,
    extraction_request,
    parse_extraction_reply,
)
from fasteval.suites.tirbench.scoring import TASK_TYPES
from providers.base import ChatRequest, ChatResponse, ProviderError


class ScriptedExtractor:
    """Replies from a list, one per call, recording every request it saw."""

    def __init__(self, replies: list[ChatResponse | Exception]) -> None:
        self.replies = list(replies)
        self.requests: list[ChatRequest] = []

    async def chat(self, request: ChatRequest) -> ChatResponse:
        self.requests.append(request)
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply


class HangingExtractor:
    async def chat(self, request: ChatRequest) -> ChatResponse:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


def test_every_task_but_ocr_has_a_demo_block() -> None:
    assert set(DEMO_BLOCKS) == set(TASK_TYPES) - {"ocr"}
    for block in DEMO_BLOCKS.values():
        assert block.startswith("Please read the following example.")
        assert block.count("Extracted answer: ") >= 2


def test_demo_blocks_cover_every_answer_format() -> None:
    text = "\n".join(DEMO_BLOCKS.values())
    for sample in ("Extracted answer: B\n", "Extracted answer: 10\n", "Extracted answer: 3.4\n",
                   "Extracted answer: [4, 7]", "Extracted answer: [3, 6, 14]",
                   "Extracted answer: 4, 9, 2, 7, 1, 5, 3, 8, 6", "Extracted answer: AC"):
        assert sample in text


def test_prompt_layout_ends_with_empty_slot() -> None:
    prompt = extraction_prompt("math", "How many?", "I count 7.")
    assert prompt.startswith(DEMO_BLOCKS["math"])
    assert prompt.endswith("\n\nQuestion: How many?\n\nModel response: I count 7.\n\nExtracted answer: ")


def test_prompt_accepts_a_custom_block_and_rejects_unknown_types() -> None:
    assert extraction_prompt("synth", "Q", "R", demo_block="Demo.\n").startswith("Demo.\n\nQuestion: Q")
    with pytest.raises(ValueError, match="ocr"):
        extraction_prompt("ocr", "Q", "R")


def test_request_has_reference_system_line_and_no_sampling_params() -> None:
    request = extraction_request("maze", "Q", "R")
    assert request.messages[0] == {"role": "system", "content": [{"type": "text", "text": EXTRACTOR_SYSTEM_PROMPT}]}
    assert request.messages[1]["content"][0]["text"] == extraction_prompt("maze", "Q", "R")
    assert request.params == {} and request.seed is None
    assert extraction_request("maze", "Q", "R", attempt=2).seed == 2


def test_parse_reply_keeps_text_and_rejects_unusable_replies() -> None:
    assert parse_extraction_reply(ChatResponse(content="  **B**\n")) == "**B**"
    for bad in (ChatResponse(content=None), ChatResponse(content="  "),
                ChatResponse(content="B", finish_reason="length"),
                ChatResponse(content="B", finish_reason="content_filter")):
        with pytest.raises(ExtractionReplyError):
            parse_extraction_reply(bad)


async def test_extract_returns_first_usable_reply() -> None:
    model = ScriptedExtractor([ChatResponse(content="[4, 7]")])
    result = await extract(model, "word_search", "Where?", "At [4, 7].")
    assert (result.text, result.error, result.attempts) == ("[4, 7]", None, 1)


async def test_extract_retries_unusable_replies_with_new_seeds() -> None:
    model = ScriptedExtractor([ChatResponse(content=""), ChatResponse(content=None), ChatResponse(content="C")])
    result = await extract(model, "maze", "Q", "R")
    assert result.text == "C" and result.attempts == 3
    assert [r.seed for r in model.requests] == [None, 1, 2]


async def test_extract_reports_judge_error_after_three_unusable_replies() -> None:
    model = ScriptedExtractor([ChatResponse(content="")] * 3)
    result = await extract(model, "maze", "Q", "R")
    assert result.text is None and result.attempts == 3
    assert result.error is not None and result.error.startswith("judge_error: unusable extractor reply")
    assert result.replies == ["", "", ""]


async def test_provider_error_is_a_judge_error_without_retry() -> None:
    model = ScriptedExtractor([ProviderError("fatal", "model not found", status=404), ChatResponse(content="B")])
    result = await extract(model, "maze", "Q", "R")
    assert result.error is not None and result.error.startswith("judge_error: extractor call failed")
    assert result.attempts == 1


async def test_timeout_is_a_judge_error() -> None:
    result = await extract(HangingExtractor(), "maze", "Q", "R", timeout_s=0.01)
    assert result.error is not None and "timed out" in result.error
