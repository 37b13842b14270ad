"""LLM answer extraction for TIR-Bench, as the reference ``extract_answer.py`` does it.

One extractor call per item (every task but ``ocr``): a fixed system line, then a user message
made of the task's few-shot block, the question, the model's response and an empty
"Extracted answer: " slot. The extractor is a model role reached through the providers layer
(which retries transport errors and caches verdicts); here we only retry replies we cannot
use, and after the last attempt report a ``judge_error`` instead of scoring a fake answer
(``fixed``), or score an empty extraction as the reference does (``on_failure="empty"``).

The texts (system line, layout, demo blocks) come from a ``TextBook``: the reference's own
strings under ``texts: reference``, ours under ``texts: own`` (the built-in default here).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Literal, Protocol

from fasteval.suites.reference_texts import TextBook
from fasteval.suites.tirbench.demos import DEMO_BLOCKS
from fasteval.suites.tirbench.texts import OWN_FULL_PROMPT, OWN_TEST_PROMPT
from providers import ChatRequest, ChatResponse, ProviderError

EXTRACTOR_SYSTEM_PROMPT = "Assistant is a large language model trained by OpenAI."
"""The reference's system message (no temperature is set either)."""

MAX_EXTRACTION_ATTEMPTS = 3
_BAD_FINISH = {"length", "content_filter"}


class ChatModel(Protocol):
    """Anything with the providers' ``chat``: a provider, a role wrapper, a scripted test model."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...


class ExtractionReplyError(ValueError):
    """The extractor's reply cannot be used as an extraction (empty, truncated, filtered)."""


@dataclass(slots=True)
class ExtractionResult:
    """Outcome of ``extract``: the extracted text, or an error after the last attempt."""

    text: str | None
    error: str | None = None
    attempts: int = 0
    replies: list[str | None] = field(default_factory=list)
    """Raw reply of each attempt, kept for auditing extractions that were retried."""
    failed: str | None = None
    """Why the extraction was replaced by "" under ``on_failure="empty"``."""


def extraction_prompt(task_type: str, question: str, response: str, demo_block: str | None = None,
                      texts: TextBook | None = None) -> str:
    """The user text: demo block, then "Question / Model response / Extracted answer: ".

    ``demo_block`` overrides the text book's block, so suites with new task types (tir-synth)
    can reuse the layout with their own examples.
    """
    if demo_block is None:
        key = f"demo.{task_type}"
        if texts is not None and key in texts.values:
            demo_block = str(texts.get(key))
        elif texts is None and task_type in DEMO_BLOCKS:
            demo_block = DEMO_BLOCKS[task_type]
        else:
            raise ValueError(f"no extraction examples for task type {task_type!r}; known: {sorted(DEMO_BLOCKS)}")
    # The reference strips the block, then fills two f-strings (create_test_prompt).
    if texts is None:
        test = OWN_TEST_PROMPT.render({"query": question, "response": response})
        return OWN_FULL_PROMPT.render({"demo_prompt": demo_block.strip(), "test_prompt": test})
    test = texts.render("extractor_question", query=question, response=response)
    return texts.render("extractor_layout", demo_prompt=demo_block.strip(), test_prompt=test)


def extraction_request(
    task_type: str, question: str, response: str, *, attempt: int = 0, demo_block: str | None = None,
    texts: TextBook | None = None,
) -> ChatRequest:
    """The extractor's ChatRequest. Retries carry ``seed=attempt`` so that a cached unusable
    verdict (the cache key includes the seed) is not served again; the first try has no seed.
    """
    text = extraction_prompt(task_type, question, response, demo_block, texts)
    system = EXTRACTOR_SYSTEM_PROMPT if texts is None else texts.render("extractor_system")
    messages = [
        {"role": "system", "content": [{"type": "text", "text": system}]},
        {"role": "user", "content": [{"type": "text", "text": text}]},
    ]
    return ChatRequest(messages=messages, seed=attempt or None)


def parse_extraction_reply(reply: ChatResponse) -> str:
    """The extraction in a reply, kept verbatim apart from outer whitespace, as the reference
    stores it (scoring strips ``*`` and labels itself). Raises ExtractionReplyError when the
    reply is empty, truncated or filtered: the reference would then have scored ''.
    """
    if reply.finish_reason in _BAD_FINISH:
        raise ExtractionReplyError(f"reply ended with finish_reason={reply.finish_reason!r}")
    text = (reply.content or "").strip()
    if not text:
        raise ExtractionReplyError("empty reply")
    return text


async def extract(
    extractor: ChatModel,
    task_type: str,
    question: str,
    response: str,
    *,
    max_attempts: int = MAX_EXTRACTION_ATTEMPTS,
    timeout_s: float = 600.0,
    demo_block: str | None = None,
    texts: TextBook | None = None,
    on_failure: Literal["error", "empty"] = "error",
) -> ExtractionResult:
    """Ask the extractor for the answer in ``response``; retry unusable replies up to
    ``max_attempts`` in all. A provider error or timeout ends it at once: the providers layer
    already retried it. Never raises for a model failure: with ``on_failure="error"`` the error
    is on the result; with ``"empty"`` (the reference, whose failed extraction is stored as
    nothing and scored) the text is ``""`` and ``failed`` says why.
    """
    result = ExtractionResult(text=None)
    last_problem = "no attempt made"
    for attempt in range(max_attempts):
        request = extraction_request(task_type, question, response, attempt=attempt, demo_block=demo_block,
                                     texts=texts)
        result.attempts = attempt + 1
        try:
            async with asyncio.timeout(timeout_s):
                reply = await extractor.chat(request)
        except ProviderError as exc:
            return _failed(result, f"judge_error: extractor call failed: {exc}", on_failure)
        except TimeoutError:
            return _failed(result, f"judge_error: extractor call timed out after {timeout_s:g} s", on_failure)
        result.replies.append(reply.content)
        try:
            result.text = parse_extraction_reply(reply)
            return result
        except ExtractionReplyError as exc:
            last_problem = str(exc)
    message = f"judge_error: unusable extractor reply after {result.attempts} attempts ({last_problem})"
    return _failed(result, message, on_failure)


def _failed(result: ExtractionResult, message: str, on_failure: str) -> ExtractionResult:
    if on_failure == "empty":
        result.text, result.failed = "", message
    else:
        result.error = message
    return result
