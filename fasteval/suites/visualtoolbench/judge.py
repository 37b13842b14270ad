"""The rubric judge: one text-only call per rubric item, verdict Met / Not Met with a reason.

Two ways of counting (the suite option ``judge_counting``):

- ``fixed``: we read the verdict tolerantly (code fences, prose, case), retry an unreadable
  reply (with a new seed, so a cached bad reply is not served again) and then report
  ``judge_error``, which excludes the task instead of guessing.
- ``reference``: the reference's reading. A judge call that fails after its retries becomes
  "Not Met" and is counted; a reply that is not JSON is a ``judge_error`` (the reference's
  ``json.loads`` raises and its whole chunk of tasks is lost; we judge per task, so only this
  task is lost); any ``judge_result`` other than exactly "Met" earns no weight, and only exactly
  "Not Met" fails APR.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Protocol

from fasteval.core.tagged import Tagged
from fasteval.suites.reference_texts import Template
from providers import ChatRequest, ChatResponse

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
    met: bool | None
    """True for Met, False for Not Met, None for a reference verdict that is neither (no weight, APR kept)."""
    reason: str


class ReferenceChunkLoss(JudgeError):
    """Under reference counting: a judge reply ``json.loads`` rejects (the reference loses the chunk)."""


def parse_reference_verdict(text: str | None) -> Verdict:
    """The reference's reading: ``json.loads`` of the whole reply, exact "Met" / "Not Met"."""
    try:
        obj = json.loads(text or "")
    except json.JSONDecodeError as e:
        raise ReferenceChunkLoss(f"judge reply is not JSON ({e}); the reference loses this chunk") from None
    if not isinstance(obj, dict) or "judge_result" not in obj:
        raise ReferenceChunkLoss("judge reply has no judge_result key; the reference raises on it")
    result = obj["judge_result"]
    reason = obj.get("explanation")
    met = True if result == "Met" else False if result == "Not Met" else None
    return Verdict(met=met, reason=reason if isinstance(reason, str) else "")


_FENCE = Tagged("```", "```")
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
    fenced = [c[4:] if c[:4].lower() == "json" else c for c in _FENCE.all(text)]  # ```json ... ```
    candidates = [*fenced, text]
    for cand in candidates:
        cand = cand.strip()
        try:
            obj = json.loads(cand)
        except ValueError:  # JSONDecodeError, or an integer past Python's 4,300-digit limit
            start, end = cand.find("{"), cand.rfind("}")
            if start < 0 or end <= start:
                continue
            try:
                obj = json.loads(cand[start : end + 1])
            except ValueError:
                continue
        if isinstance(obj, dict):
            return obj
    return None


def judge_request(question: str, golden_answer: str, rubric: str, answer: str, attempt: int = 0,
                  template: Template | None = None) -> ChatRequest:
    """The judge request, as the reference sends it: JSON mode, no temperature, one user message.

    ``template`` is the judge prompt to fill (the reference's own under ``texts: reference``).
    """
    text = judge_prompt(question, golden_answer, rubric, answer) if template is None else template.render(
        {"question": question, "golden_answer": golden_answer, "rubric_criteria": rubric, "model_answer": answer})
    return ChatRequest(
        messages=[{"role": "user", "content": text}],
        params={"response_format": {"type": "json_object"}},
        # The seed changes per attempt so a cached unreadable reply is not replayed.
        seed=attempt,
    )


async def judge_rubric(
    judge: JudgeModel, question: str, golden_answer: str, rubric: str, answer: str,
    *, timeout_s: float = 600.0, template: Template | None = None, counting: str = "fixed",
) -> Verdict:
    """One rubric verdict; raises JudgeError after MAX_ATTEMPTS failed or unreadable replies.

    Under ``counting="reference"`` a call that fails every attempt is "Not Met" and a non-JSON
    reply raises ReferenceChunkLoss at once (the reference retries only failed calls).
    """
    errors: list[str] = []
    for attempt in range(MAX_ATTEMPTS):
        request = judge_request(question, golden_answer, rubric, answer, attempt, template)
        try:
            response = await asyncio.wait_for(judge.chat(request), timeout_s)
            if counting == "reference":
                if not response.content:  # the reference retries a None reply
                    errors.append("empty reply")
                    continue
                return parse_reference_verdict(response.content)
            return parse_verdict(response.content)
        except ReferenceChunkLoss:
            raise
        except JudgeParseError as e:
            errors.append(f"unreadable reply: {e}")
        except TimeoutError:
            errors.append(f"no reply within {timeout_s:g}s")
        except Exception as e:  # provider errors already retried below us: count the attempt, go on
            errors.append(f"{type(e).__name__}: {e}")
    if counting == "reference":
        return Verdict(met=False, reason=f"{REFERENCE_FAILED_REASON} ({errors[-1]})")
    raise JudgeError(f"{MAX_ATTEMPTS} attempts failed; last: {errors[-1]}")


REFERENCE_FAILED_REASON = "judge failed after every attempt; counted as Not Met (reference)"
