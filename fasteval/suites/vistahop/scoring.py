"""VistaHop validation: extract the answer, normalised exact match, then a multimodal judge.

Follows the reference ``llm_score``: EM against every gold first; otherwise one judge call per
gold, stopping at the first Yes. A judge reply without a readable <judge>Yes|No</judge> is, by
``no_verdict``: ``"no"`` (reference) a No for that gold, and the next gold is judged; or
``"retry"`` (fixed) asked again (with a new seed, so a verdict cache cannot hand back the same
reply) and, after the retries, a ``judge_error``. The judge's image is smart-resized (factor 32,
65,536..8,294,400 px) before its JPEG q85 encoding, as the reference does.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass, field
from typing import Any, Protocol

from fasteval.core.tagged import Tagged
from fasteval.core.types import ImageRef, Message
from fasteval.images.decode import probe, thumbnail
from fasteval.images.ops import smart_resize
from fasteval.images.render import PNG_SMART_FACTOR, PNG_SMART_MAX_PIXELS, PNG_SMART_MIN_PIXELS, png_bytes
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.reference_texts import TextBook
from fasteval.suites.vistahop.prompts import JUDGE_SYSTEM_PROMPT, JUDGE_USER_PROMPT
from providers import ChatRequest, ChatResponse

JUDGE_PARAMS: dict[str, Any] = {"temperature": 0.0, "max_tokens": 8192}
"""Reference judge sampling: greedy, long enough for the <reason> block."""

JUDGE_IMAGE_PROFILE = "jpeg85"
"""The reference sends the judge its image as JPEG quality 85."""

_ANSWER = Tagged("<answer>", "</answer>")
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
    matches = _ANSWER.all(text)
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


def judge_messages(question: str, gold: str, response: str, image: ImageRef | None,
                   texts: TextBook | None = None) -> list[Message]:
    """System principles, then the question/gold/response text followed by the image (reference order)."""
    values = {"question": question, "ground_truth": gold, "model_response": response}
    if texts is None:
        text, system = JUDGE_USER_PROMPT.format(**values), JUDGE_SYSTEM_PROMPT
    else:
        text, system = texts.render("judge_user", **values), texts.render("judge_system")
    content: str | list[dict[str, Any]] = text
    if image is not None:
        content = [{"type": "text", "text": text}, {"type": "image", "image": image}]
    return [{"role": "system", "content": system}, {"role": "user", "content": content}]


def judge_image(blobs: BlobStore, ref: ImageRef) -> ImageRef:
    """The judge's view of an image: smart-resized (factor 32, 65,536..8,294,400 px), stored as PNG.

    The request's ``jpeg85`` profile then encodes it once as JPEG q85, as the reference does
    (process_image, then JPEG quality 85). Blocking: call it off the event loop.
    """
    data = blobs.get(ref)
    info = probe(data)
    h, w = smart_resize(info.height, info.width, factor=PNG_SMART_FACTOR, min_pixels=PNG_SMART_MIN_PIXELS,
                        max_pixels=PNG_SMART_MAX_PIXELS)
    if (w, h) == (info.width, info.height):
        return ref
    return blobs.put(png_bytes(thumbnail(data, w, h)))


@dataclass(slots=True)
class JudgeCall:
    """One gold answer's verdict and what it took to get it (kept in score details)."""

    gold: str
    verdict: bool | None = None
    attempts: int = 0
    replies: list[str] = field(default_factory=list)


async def judge_one(judge: ChatModel, messages: list[Message], gold: str, retries: int,
                    no_verdict: str = "retry") -> JudgeCall:
    """Ask until a verdict parses: 1 call plus up to ``retries`` more; raise JudgeError after that.
    Under ``no_verdict="no"`` an unreadable reply is a No at once (the reference's reading).

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
        if no_verdict == "no":
            call.verdict = False
            return call
    raise JudgeError(f"no <judge>Yes|No</judge> verdict after {call.attempts} replies; last: {call.replies[-1][:200]!r}")


async def judge_answer(
    judge: ChatModel, question: str, golds: list[str], response: str, image: ImageRef | None, retries: int = 3,
    *, texts: TextBook | None = None, no_verdict: str = "retry",
) -> tuple[bool, list[JudgeCall]]:
    """One judge verdict per gold, in order, stopping at the first Yes (reference behaviour)."""
    calls: list[JudgeCall] = []
    for gold in golds:
        call = await judge_one(judge, judge_messages(question, gold, response, image, texts), gold, retries,
                               no_verdict)
        calls.append(call)
        if call.verdict:
            return True, calls
    return False, calls
