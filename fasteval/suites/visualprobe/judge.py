"""Mini-o3's answer judge (§5.3), through our ``judge`` role.

Reference reading (``general_qa_tool.compute_score``): the first ``<answer>`` of all model turns
joined by spaces (none: 0, no judge call); up to 5 attempts at temperature min(0.2·attempt, 1);
a reply must contain "score:" and a 0 or 1 in the first word after the last one; reward 1 iff
that word contains "1" ("Score: 10" is 1); five failures count 0. The judge texts are Mini-o3's
``SYSTEM_PROMPT`` and ``QUERY_PROMPT``, read at run time from the user's checkout.

Ours: the last ``<answer>`` of the final reply (else the reply after its reasoning); the verdict
must be exactly 0 or 1 after the last "Score:"; five unreadable replies are a judge error, never
a 0.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasteval.core.tagged import Tagged
from fasteval.suites.judge_retry import JudgeModel, ask_until_read
from fasteval.suites.reference_texts import Template, TextBook, TextSpec, load_text_book, text_options
from providers import ChatRequest

JUDGE_FILE = "verl/utils/reward_score/general_qa_tool.py"
DEFAULT_REFERENCE_REPO = "data/reference/Mini-o3"
FETCH_HINT = "fasteval data fetch mini-o3-reference --dest data"
ATTEMPTS = 5
JUDGE_MAX_TOKENS = 16384

OWN_SYSTEM = "You grade answers to questions about images. Compare the prediction with the ground truth."
OWN_QUERY = Template.from_format(
    "Question: {question}\nGround truth: {ground_truth}\nPrediction: {prediction}\n"
    "Does the prediction mean the same as the ground truth? Reply with \"Score: 1\" if it does, "
    "\"Score: 0\" if not.")
SPECS = [
    TextSpec("judge_system", "judge_prompt", JUDGE_FILE, "SYSTEM_PROMPT", OWN_SYSTEM),
    TextSpec("judge_query", "judge_prompt", JUDGE_FILE, "QUERY_PROMPT", OWN_QUERY, kind="format"),
]
_ANSWER = Tagged("<answer>", "</answer>")
_THINK_END = re.compile(r"</think>", re.I)
# Possessive repeats (``*+``): the same strings as ``score:\s*\**\s*([01])\s*\**\s*$``, without
# the backtracking that made "score:" and 20,000 spaces cost 26 s.
_STRICT_SCORE = re.compile(r"score:\s*+\**+\s*+([01])\s*+\**+\s*+$", re.I)


def judge_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    mode, repo = text_options(options, fidelity)
    return load_text_book("visualprobe", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)


def reference_answer(turns: list[str]) -> str | None:
    return _ANSWER.first(" ".join(turns))


def fixed_answer(final: str | None) -> str | None:
    if not final or not final.strip():
        return None
    tags = _ANSWER.all(final)
    if tags:
        return tags[-1].strip() or None
    ends = list(_THINK_END.finditer(final))
    tail = final[ends[-1].end():] if ends else final
    return tail.strip() or None


def reference_reading(reply: str) -> float | None:
    """Mini-o3's reading: None when the reply counts as a failed call."""
    if "score:" not in reply.lower():
        return None
    word = reply.lower().split("score:")[-1].strip().split("\n")[0].strip().split(" ")[0]
    if "1" not in word and "0" not in word:
        return None
    return 1.0 if "1" in word else 0.0


def fixed_reading(reply: str) -> float | None:
    last = None
    for line in reply.splitlines():
        m = _STRICT_SCORE.search(line.strip())
        if m:
            last = float(m.group(1))
    return last


@dataclass(slots=True)
class Verdict:
    value: float | None
    replies: list[str] = field(default_factory=list)
    error: str | None = None


async def judge_answer(judge: JudgeModel, texts: TextBook, question: str, solution: str, prediction: str, *,
                       fidelity: str, timeout_s: float = 300.0) -> Verdict:
    """One verdict; reference: five failures are 0; fixed: five failures are an error."""
    user = texts.render("judge_query", question=question, ground_truth=solution, prediction=prediction)
    messages = [{"role": "system", "content": texts.render("judge_system")}, {"role": "user", "content": user}]
    read = reference_reading if fidelity == "reference" else fixed_reading
    value, replies = await ask_until_read(
        judge, lambda attempt: ChatRequest(
            messages=list(messages), seed=attempt,
            params={"temperature": min(0.2 * attempt, 1.0), "max_tokens": JUDGE_MAX_TOKENS}),
        read, attempts=ATTEMPTS, timeout_s=timeout_s)
    if value is not None:
        return Verdict(value, replies)
    if fidelity == "reference":
        return Verdict(0.0, replies)  # is_filter: the sample's reward stays 0 in validation
    return Verdict(None, replies, f"judge_error: {ATTEMPTS} unreadable judge replies")
