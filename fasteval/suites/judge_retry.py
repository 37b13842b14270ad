"""Asking a judge model until one of its replies can be read, shared by the suites' judges.

VLMEvalKit's MCQ matcher and Mini-o3's VisualProbe grader both retry an unreadable judge reply a
fixed number of times; a reply that does not come within the timeout counts as one unreadable
attempt, so a slow judge cannot stall a sample. Every reply is kept for the record.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Protocol, TypeVar

from providers import ChatRequest, ChatResponse

T = TypeVar("T")


class JudgeModel(Protocol):
    """A judge role: a provider, or the retry/cache wrapper around one."""

    async def chat(self, request: ChatRequest) -> ChatResponse: ...


async def ask_until_read(judge: JudgeModel, request: Callable[[int], ChatRequest],
                         read: Callable[[str], T | None], *, attempts: int,
                         timeout_s: float) -> tuple[T | None, list[str]]:
    """The first reply ``read`` accepts (None after ``attempts`` failures) and every reply seen.

    ``request(attempt)`` builds each attempt's request, so it can vary the seed (a cached
    unreadable reply is not served again) or the temperature.
    """
    replies: list[str] = []
    for attempt in range(attempts):
        try:
            response = await asyncio.wait_for(judge.chat(request(attempt)), timeout_s)
        except TimeoutError:
            replies.append(f"<no reply within {timeout_s:g}s>")
            continue
        reply = response.content or ""
        replies.append(reply)
        value = read(reply)
        if value is not None:
            return value, replies
    return None, replies
