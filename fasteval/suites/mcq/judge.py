"""VLMEvalKit's judge fallback for multiple choice (§0.3), through our ``judge`` role.

It runs only when ``can_infer`` fails. The judge template is VLMEvalKit's own ``build_prompt``
(``build_prompt_cn`` for questions with CJK text), read at run time from the user's checkout
(``vlmeval/dataset/utils/multiple_choice.py``) and filled with ``str.format`` as VLMEvalKit
does; each reply goes through ``can_infer``; after three unreadable replies VLMEvalKit draws a
random letter (or Z). We draw it from a generator seeded by the task and seed, so a rerun gives
the same letter, and the record says it was drawn. The judge role's cache makes reruns free.
"""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasteval.suites.judge_retry import JudgeModel, ask_until_read
from fasteval.suites.mcq.matching import MatcherVersion, can_infer
from fasteval.suites.reference_texts import TextBook, TextSpec, load_text_book, text_options
from providers import ChatRequest

JUDGE_FILE = "vlmeval/dataset/utils/multiple_choice.py"
REFERENCE_REPO = "open-compass/VLMEvalKit"
DEFAULT_REFERENCE_REPO = "data/reference/VLMEvalKit"
FETCH_HINT = "fasteval data fetch vlmevalkit-reference --dest data"
JUDGE_ATTEMPTS = 3
EXACT_MATCHING = "exact_matching"

# Our wording for ``texts: own`` (three positional fields: question, options block, prediction).
OWN_JUDGE = ("Which option of this multiple-choice question does the answer choose? Reply with the option's "
             "letter only, or Z if it chooses none of them.\nQuestion: {}\nOptions: {}\nAnswer: {}\nLetter: ")
SPECS = [
    TextSpec("judge_en", "judge_prompt", JUDGE_FILE, "build_prompt.tmpl", OWN_JUDGE),
    TextSpec("judge_cn", "judge_prompt", JUDGE_FILE, "build_prompt_cn.tmpl", OWN_JUDGE),
]
_CJK = re.compile(r"[\u4e00-\u9fff]")


def judge_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    """The judge templates: VLMEvalKit's own (texts: reference) or ours (texts: own)."""
    mode, repo = text_options(options, fidelity)
    return load_text_book("vlmevalkit-judge", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)


def option_block(choices: Mapping[str, str]) -> str:
    """The options as ``build_option_str`` lays them out for the judge."""
    return "There are several options: \n" + "".join(f"{k}. {v}\n" for k, v in choices.items())


@dataclass(slots=True)
class Matched:
    letter: str
    how: str
    """can_infer | exact_matching | judge | judge_random"""
    judge_replies: list[str] = field(default_factory=list)


async def vlmevalkit_option(prediction: str, choices: Mapping[str, str], question: str, *,
                            judge: JudgeModel | None, texts: TextBook | None, version: MatcherVersion,
                            draw_key: str, timeout_s: float = 300.0) -> Matched:
    """The option VLMEvalKit's ``mcq_vanilla_eval`` gives a prediction (Z scores 0)."""
    letter = can_infer(prediction, choices, version)
    if letter is not None:
        return Matched(letter, "can_infer")
    if judge is None or texts is None:
        return Matched("Z", EXACT_MATCHING)
    template = str(texts.get("judge_cn" if _CJK.search(question) else "judge_en"))
    prompt = template.format(question, option_block(choices), prediction)
    # A new seed per attempt, so a cached unreadable reply is not served again.
    letter, replies = await ask_until_read(
        judge, lambda attempt: ChatRequest(messages=[{"role": "user", "content": prompt}], seed=attempt),
        lambda reply: can_infer(reply, choices, version), attempts=JUDGE_ATTEMPTS, timeout_s=timeout_s)
    if letter is not None:
        return Matched(letter, "judge", replies)
    drawn = random.Random(f"judge-draw|{draw_key}").choice([*choices, "Z"])
    return Matched(drawn, "judge_random", replies)
