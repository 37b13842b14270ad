"""The rubric judge: one text-only call per rubric item, verdict Met / Not Met with a reason.

The reference defaults a failed or unreadable verdict to "Not Met"; we retry an unreadable reply
(with a new seed, so a cached bad reply is not served again) and then report ``judge_error``
instead of guessing.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from providers.base import ChatRequest, ChatResponse

from .prompts import judge_prompt

MAX_ATTEMPTS = 3


class JudgeModel(Protocol):
    """A model role: anything with the provider ``chat`` coroutine (cache and retries live there)."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...


class JudgeParseError(ValueError):
    """The judge replied, but not with a readable verdict."""


class JudgeError(RuntimeError):
    """No usable verdict after every attempt."""


@dataclass(slots=True)
class Verdict:
    met: bool
    reason: str


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL | re.IGNORECASE)
_MET = {"met": True, "not met": False, "not_met": False, "notmet": False, "unmet": False}


def parse_verdict(text: str | None) -> Verdict:
    """Read ``{"explanation", "judge_result"}`` from a reply, tolerating code fences and prose around it."""
    if not text or not text.strip():
        raise JudgeParseError("empty reply")
    obj = _find_json_object(text)
    if obj is None:
        raise JudgeParseError(f"no JSON object in reply: {text[:120]!r}")
    result = obj.get("judge_result")
    if not isinstance(result, str):
        raise JudgeParseError(f"no judge_result string in {list(obj)}")
    key = " ".join(result.strip().strip(".").lower().split())
    if key not in _MET:
        raise JudgeParseError(f"judge_result is neither Met nor Not Met: {result!r}")
    reason = obj.get("explanation")
    return Verdict(met=_MET[key], reason=reason if isinstance(reason, str) else "")


def _find_json_object(text: str) -> dict[str, Any] | None:
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    for cand in candidates:
        cand = cand.strip()
        try:
            obj = json.loads(cand)
        except json.JSONDecodeError:
            start, end = cand.find("{"), cand.rfind("}")
            if start < 0 or end <= start:
                continue
            try:
                obj = json.loads(cand[start : end + 1])
            except json.JSONDecodeError:
                continue
        if isinstance(obj, dict):
            return obj
    return None


def judge_request(question: str, golden_answer: str, rubric: str, answer: str, attempt: int = 0) -> ChatRequest:
    """The judge request, as the reference sends it: JSON mode, no temperature, one user message."""
    return ChatRequest(
        messages=[{"role": "user", "content": judge_prompt(question, golden_answer, rubric, answer)}],
        params={"response_format": {"type": "json_object"}},
        # The seed changes per attempt so a cached unreadable reply is not replayed.
        seed=attempt,
    )


async def judge_rubric(
    judge: JudgeModel, question: str, golden_answer: str, rubric: str, answer: str,
    *, timeout_s: float = 600.0,
) -> Verdict:
    """One rubric verdict; raises JudgeError after MAX_ATTEMPTS failed or unreadable replies."""
    errors: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        request = judge_request(question, golden_answer, rubric, answer, attempt)
        try:
            response = await asyncio.wait_for(judge.chat(request), timeout_s)
            return parse_verdict(response.content)
        except JudgeParseError as e:
            errors.append(f"unreadable reply: {e}")
        except TimeoutError:
            errors.append(f"no reply within {timeout_s:g}s")
        except Exception as e:  # provider errors already retried below us: count the attempt, go on
            errors.append(f"{type(e).__name__}: {e}")
    raise JudgeError(f"{MAX_ATTEMPTS} attempts failed; last: {errors[-1]}")
