"""HR-Bench's own evaluation (``scorer: official``): every row judged yes or no by an LLM (§2.3).

The HR-Bench repository evaluates with its fork of VLMEvalKit (``hrbench/``). Its
``HRBenchDataset.evaluate`` runs no matcher at all: each row goes to a local LLM (lmdeploy,
temperature 0.2, top_p 0.8, top_k 40) with the text ``utils/hrbench.py`` builds —

- ``build_prompt``: the question, ``Options:`` and one ``{key}. {item}`` line per option in the
  release's order, an instruction line; the gold as ``{label}. {gt_text}``; and ``content``, which
  puts those and the prediction into one yes/no question;
- ``pipeline_eval``: a preamble ``"...{}".format(content)``;

and the row scores 1 iff the lower-cased reply *starts with* ``yes`` (``^(yes|no)`` on the reply
as it came: a leading space is a 0, "Yesterday" a 1). The cycle average follows (metrics.py).

Every one of those texts is read at run time from the user's HR-Bench checkout
(``hrbench/vlmeval/dataset/utils/hrbench.py``); the model's prompt is the fork's
``ImageMCQDataset.build_prompt`` (``hrbench/vlmeval/dataset/image_mcq.py``). An empty
prediction reads ``nan`` in the judge's text, as the fork's xlsx round trip gives it. We send
temperature and top_p; top_k is not an OpenAI parameter (set it in the judge role's params for a
server that takes it, such as vLLM); the reply budget is lmdeploy's default of 512 tokens.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasteval.suites.judge_retry import JudgeModel, ask_until_read
from fasteval.suites.mcq.vlmevalkit_prompt import specs_for
from fasteval.suites.reference_texts import (
    ReferenceTextError,
    Template,
    TextBook,
    TextSpec,
    load_text_book,
    text_options,
)
from providers import ChatRequest

FORK = "hrbench/"
JUDGE_FILE = FORK + "vlmeval/dataset/utils/hrbench.py"
DEFAULT_REFERENCE_REPO = "data/reference/HR-Bench"
FETCH_HINT = "fasteval data fetch hrbench-reference --dest data"
JUDGE_PARAMS = {"temperature": 0.2, "top_p": 0.8, "max_tokens": 512}
"""lmdeploy's GenerationConfig in ``pipeline_eval`` (top_k 40 aside) and its default token budget."""

SPECS = [
    # The model's prompt: the fork's ImageMCQDataset.build_prompt, same layout as upstream's.
    *(dataclasses.replace(s, file=FORK + s.file) for s in specs_for("ImageMCQDataset")),
    TextSpec("judge_question", "judge_prompt", JUDGE_FILE, "build_prompt.prompt+@0",
             Template.from_format("{question}\n")),
    TextSpec("judge_options_header", "judge_prompt", JUDGE_FILE, "build_prompt.options_prompt", "Options:\n"),
    TextSpec("judge_option", "judge_prompt", JUDGE_FILE, "build_prompt.options_prompt+@0",
             Template.from_format("{key}. {item}\n")),
    TextSpec("judge_instruction", "judge_prompt", JUDGE_FILE, "build_prompt.prompt+@2",
             "One of the options above is right.\n"),
    TextSpec("judge_ground_truth", "judge_prompt", JUDGE_FILE, "build_prompt.ground_truth",
             Template.from_format("{label}. {gt_text}")),
    TextSpec("judge_content", "judge_prompt", JUDGE_FILE, "build_prompt.content", Template.from_format(
        "Question and options:\n{prompt}\nReference answer: {ground_truth}\nCandidate answer: {prediction}\n"
        "Is the candidate answer the reference answer?")),
    TextSpec("judge_preamble", "judge_prompt", JUDGE_FILE, "pipeline_eval.inp",
             Template.from_format("You grade answers; reply with yes or no and nothing else.\n{}"), kind="format"),
]
FIELDS = {"judge_question": {"question"}, "judge_option": {"key", "item"},
          "judge_ground_truth": {"label", "gt_text"}, "judge_content": {"prompt", "ground_truth", "prediction"}}
"""The fields each template may use (the local names ``build_prompt`` has)."""
_YES_NO = re.compile(r"^(yes|no)", re.IGNORECASE)


def official_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    """The fork's prompt and judge texts: HR-Bench's own (texts: reference) or ours (texts: own)."""
    mode, repo = text_options(options, fidelity)
    book = load_text_book("hrbench-official", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)
    preamble = book.get("judge_preamble")
    if not isinstance(preamble, Template) or len(preamble.fields) != 1 or preamble.fields[0] not in ("", "0"):
        raise ReferenceTextError(f"hrbench-official: pipeline_eval.inp in {JUDGE_FILE} of {book.repo} is not a "
                                 "format string with one positional field; the checkout may be at another commit")
    book.check_fields(FIELDS)
    return book


def judge_text(texts: TextBook, question: str, options: Mapping[str, str], label: str,
               prediction: str | None) -> str:
    """The judge's input, as ``build_prompt`` and ``pipeline_eval`` lay it out (no prediction: ``nan``)."""
    prediction = prediction if prediction else "nan"
    prompt = texts.render("judge_question", question=question)
    if options:
        prompt += texts.render("judge_options_header")
        prompt += "".join(texts.render("judge_option", key=k, item=v) for k, v in options.items())
        prompt += texts.render("judge_instruction")
    gold = texts.render("judge_ground_truth", label=label, gt_text=options[label])
    content = texts.render("judge_content", prompt=prompt, ground_truth=gold, prediction=prediction)
    preamble = texts.get("judge_preamble")
    return str(preamble.render({f: content for f in preamble.fields}))


def parse_score(reply: str) -> float:
    """``parse_score``: 1 iff the lower-cased reply starts with "yes"; anything else 0."""
    m = _YES_NO.match(reply.lower())
    return 1.0 if m and m.group(0) == "yes" else 0.0


@dataclass(slots=True)
class YesNo:
    value: float | None
    reply: str | None = None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


async def official_verdict(judge: JudgeModel, texts: TextBook, question: str, options: Mapping[str, str],
                           gold: str, prediction: str | None, *, timeout_s: float = 300.0) -> YesNo:
    """One judge call per row, as the fork makes it; a reply that never comes is an error, not a 0."""
    text = judge_text(texts, question, options, gold, prediction)
    value, replies = await ask_until_read(
        judge, lambda attempt: ChatRequest(messages=[{"role": "user", "content": text}], params=dict(JUDGE_PARAMS)),
        parse_score, attempts=1, timeout_s=timeout_s)
    if value is None:
        return YesNo(None, None, {"judge_replies": replies}, f"judge_error: {replies[0] if replies else 'no reply'}")
    return YesNo(value, replies[0], {"judge_reply": replies[0]})
