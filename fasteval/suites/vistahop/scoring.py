"""VistaHop validation: extract the answer, normalised exact match, then a multimodal judge.

Follows the reference ``llm_score``: EM against every gold first; otherwise one judge call per
gold, stopping at the first Yes. Unlike the reference, a judge reply without a readable
<judge>Yes|No</judge> is never a silent No: it is asked again (with a new seed, so a verdict
cache cannot hand back the same reply) and, after the retries, it is a ``judge_error``.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasteval.suites.vistahop.prompts import JUDGE_SYSTEM_PROMPT, JUDGE_USER_PROMPT
from fasteval.types import ImageRef, Message
from providers.base import ChatRequest, ChatResponse

JUDGE_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 8192}
"""Reference judge sampling: greedy, long enough for the <reason> block."""

JUDGE_IMAGE_PROFILE = "jpeg85"
"""The reference sends the judge its image as JPEG quality 85."""

_ANSWER_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_THINK_END_RE = re.compile(r"</think(?:ing)?>")
_JUDGE_RE = re.compile(r"<judge>\s*(Yes|No)\s*</judge>", re.IGNORECASE | re.DOTALL)
_PUNCT = frozenset(string.punctuation)


class ChatModel(Protocol):
    """Anything that answers a chat request: a provider, or the retry/cache wrapper around one."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...


class JudgeError(Exception):
    """The judge gave no usable verdict; the record gets status error, not a score."""


def extract_answer(text: str) -> str:
    """Reference ``extract_answer_allow_no_tag``: last <answer> content, else the whole last text.

    Text before the last ``<|im_start|>assistant`` and before a closing think tag is dropped
    first, so tags inside reasoning or earlier rounds never count.
    """
    if not text:
        return ""
    text = text.rsplit("<|im_start|>assistant", 1)[-1]
    text = _THINK_END_RE.split(text)[-1]
    matches = _ANSWER_RE.findall(text)
    if matches:
        return str(matches[-1]).strip()
    return text.split("<|im_end|>")[0].strip()


def normalize_answer(text: str) -> str:
    """SQuAD normalisation as in the reference: lower, strip punctuation, drop articles, squash spaces."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT)
    if text.strip() != "a":  # a bare "a" is an answer (e.g. an option), not an article
        text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def exact_match(prediction: str | None, golds: list[str]) -> bool:
    """True when the normalised prediction equals any normalised gold answer."""
    if prediction is None:
        return False
    pred = normalize_answer(prediction)
    return any(normalize_answer(g) == pred for g in golds)


def parse_judge_verdict(reply: str | None) -> bool | None:
    """Yes -> True, No -> False, no readable <judge> tag -> None (never a silent No)."""
    if not reply:
        return None
    match = _JUDGE_RE.search(reply)
    if match is None:
        return None
    return match.group(1).lower() == "yes"


def judge_messages(question: str, gold: str, response: str, image: ImageRef | None) -> list[Message]:
    """System principles, then the question/gold/response text followed by the image (reference order)."""
    text = JUDGE_USER_PROMPT.format(question=question, ground_truth=gold, model_response=response)
    content: str | list[dict[str, Any]] = text
    if image is not None:
        content = [{"type": "text", "text": text}, {"type": "image", "image": image}]
    return [{"role": "system", "content": JUDGE_SYSTEM_PROMPT}, {"role": "user", "content": content}]


@dataclass(slots=True)
class JudgeCall:
    """One gold answer's verdict and what it took to get it (kept in score details)."""

    gold: str
    verdict: bool | None = None
    attempts: int = 0
    replies: list[str] = field(default_factory=list)


async def judge_one(judge: ChatModel, messages: list[Message], gold: str, retries: int) -> JudgeCall:
    """Ask until a verdict parses: 1 call plus up to ``retries`` more; raise JudgeError after that.

    Transport failures were already retried by the providers layer, so an exception here is
    final and becomes a judge_error at once.
    """
    call = JudgeCall(gold=gold)
    for attempt in range(retries + 1):
        call.attempts = attempt + 1
        # A retry changes the seed so that a response cache keyed on the request misses.
        request = ChatRequest(messages=messages, params=dict(JUDGE_PARAMS), seed=None if attempt == 0 else attempt,
                              image_profile=JUDGE_IMAGE_PROFILE)
        try:
            response = await judge.chat(request)
        except Exception as e:  # any provider failure becomes a judge error value
            raise JudgeError(f"judge call failed: {e}") from e
        reply = response.content or ""
        call.replies.append(reply[:500])
        call.verdict = parse_judge_verdict(reply)
        if call.verdict is not None:
            return call
    raise JudgeError(f"no <judge>Yes|No</judge> verdict after {call.attempts} replies; last: {call.replies[-1][:200]!r}")


async def judge_answer(
    judge: ChatModel, question: str, golds: list[str], response: str, image: ImageRef | None, retries: int = 3
) -> tuple[bool, list[JudgeCall]]:
    """One judge verdict per gold, in order, stopping at the first Yes (reference behaviour)."""
    calls: list[JudgeCall] = []
    for gold in golds:
        call = await judge_one(judge, judge_messages(question, gold, response, image), gold, retries)
        calls.append(call)
        if call.verdict:
            return True, calls
    return False, calls
