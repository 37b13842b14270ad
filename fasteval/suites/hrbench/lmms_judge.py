"""lmms-eval's HR-Bench task (``scorer: lmms-eval``): its prompt, its matcher and its GPT judge (§2.3).

``lmms_eval/tasks/hrbench/``:

- **Prompt** (``utils.hrbench_doc_to_text``): the stripped question, one ``{key}. {item}`` line per
  option in the release's order, and an instruction to answer with the letter.
- **Matcher** (``HRBenchEval.can_infer``): VLMEvalKit's old ``can_infer`` on the stripped reply
  (no last-four-tokens rule, no "answer is X" regex, no length guard: our ``hrbench`` version).
  Its text step lower-cases the options *in place*, so the judge, which only runs when the
  matcher failed, sees them lower-cased.
- **Judge** (``get_chat_response``): ``build_prompt``'s template filled with the question, the
  option lines and the prediction, temperature 0, 256 tokens; an empty reply (or an API failure)
  is asked again, up to 10 calls. The first non-empty reply is read by ``can_infer``.
- **Score**: 1 iff that letter equals the gold (case-insensitive).

lmms-eval has no answer for two cases, and we do not invent one: a judge reply that names no
option (``False.lower()`` raises) and ten failed calls (``gpt_prediction`` is never set) stop its
whole evaluation; here each is that item's scoring error. The texts are read at run time from
the user's lmms-eval checkout.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from fasteval.suites.judge_retry import JudgeModel, ask_until_read
from fasteval.suites.mcq.matching import can_infer
from fasteval.suites.reference_texts import (
    ReferenceTextError,
    Template,
    TextBook,
    TextSpec,
    load_text_book,
    text_options,
)
from providers import ChatRequest

TASK_DIR = "lmms_eval/tasks/hrbench/"
PROMPT_FILE = TASK_DIR + "utils.py"
JUDGE_FILE = TASK_DIR + "hrbench_evals.py"
DEFAULT_REFERENCE_REPO = "data/reference/lmms-eval"
FETCH_HINT = "fasteval data fetch lmms-eval-reference --dest data"
PATIENCE = 10
JUDGE_PARAMS = {"temperature": 0.0, "max_tokens": 256}
_API_FAILURE = "Failed to obtain answer via API"
NO_OPTION = "judge_error: lmms-eval crashes here (False.lower()): its judge's reply names no option"
NO_REPLY = f"judge_error: lmms-eval crashes here (no gpt_prediction): {PATIENCE} judge calls gave no reply"

OWN_JUDGE = Template.from_format("Which option does the answer choose? Reply with its letter only, or Z if none.\n"
                               "Question: {}\nOptions:\n{}Answer: {}\nLetter: ")
SPECS = [
    TextSpec("option", "system_prompt", PROMPT_FILE, "hrbench_doc_to_text.options_prompt+@0",
             Template.from_format("{key}. {item}\n")),
    TextSpec("prompt", "system_prompt", PROMPT_FILE, "hrbench_doc_to_text.prompt+@0",
             Template.from_format("{question}\n{options_prompt}Reply with the letter of the right option.")),
    TextSpec("judge", "judge_prompt", JUDGE_FILE, "HRBenchEval.build_prompt.tmpl", OWN_JUDGE, kind="format"),
    TextSpec("judge_option", "judge_prompt", JUDGE_FILE, "HRBenchEval.build_prompt.options_prompt+@0",
             Template.from_format("{key}. {item}\n")),
]

FIELDS = {"option": {"key", "item"}, "prompt": {"question", "options_prompt"}, "judge_option": {"key", "item"}}
"""The fields each template may use (the values ``hrbench_doc_to_text`` and ``build_prompt`` have)."""


def lmms_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    """lmms-eval's prompt and judge texts (texts: reference) or ours (texts: own)."""
    mode, repo = text_options(options, fidelity)
    book = load_text_book("hrbench-lmms-eval", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)
    judge = book.get("judge")
    if not isinstance(judge, Template) or len(judge.fields) != 3 or any(f not in ("", "0", "1", "2")
                                                                        for f in judge.fields):
        raise ReferenceTextError(f"hrbench-lmms-eval: HRBenchEval.build_prompt.tmpl in {JUDGE_FILE} of {book.repo} "
                                 "is not a format string with three positional fields (question, options, "
                                 "prediction); the checkout may be at another commit")
    book.check_fields(FIELDS)
    return book


def fill_positional(template: Template, *args: str) -> str:
    """``template.format(*args)`` for a ``{}`` template (its widths already bounded by Template)."""
    out: list[str] = []
    pending = iter(args)
    for part in template.parts:
        if isinstance(part, str):
            out.append(part)
            continue
        value: Any = args[int(part.expr)] if part.expr.isdigit() else next(pending)
        if part.conversion == "r":
            value = repr(value)
        out.append(format(value, part.spec))
    return "".join(out)


def lmms_prompt(texts: TextBook, question: str, options: Mapping[str, str]) -> str:
    """``hrbench_doc_to_text``: the stripped question, the option lines, the instruction."""
    block = "".join(texts.render("option", key=k, item=v) for k, v in options.items())
    return texts.render("prompt", question=question.strip(), options_prompt=block)


@dataclass(slots=True)
class Judged:
    letter: str | None
    how: str
    """can_infer | judge"""
    replies: list[str] = field(default_factory=list)
    error: str | None = None


def _readable(reply: str) -> str | None:
    reply = reply.strip()
    return reply if reply and _API_FAILURE not in reply else None


async def lmms_option(judge: JudgeModel | None, texts: TextBook, question: str, options: Mapping[str, str],
                      prediction: str | None, *, timeout_s: float = 300.0) -> Judged:
    """The option lmms-eval's ``get_chat_response`` gives a reply, or the crash it would hit."""
    pred = (prediction or "").strip()
    letter = can_infer(pred, options, "hrbench")
    if letter is not None:
        return Judged(letter, "can_infer")
    if judge is None:
        return Judged(None, "judge", error="judge_error: lmms-eval asks its GPT judge here; no judge role is set")
    lowered = {k: str(v).lower() for k, v in options.items()}  # can_infer_text's in-place lower-casing
    block = "".join(texts.render("judge_option", key=k, item=v) for k, v in lowered.items())
    prompt = fill_positional(texts.get("judge"), question, block, pred)
    reply, replies = await ask_until_read(
        judge, lambda attempt: ChatRequest(messages=[{"role": "user", "content": prompt}],
                                           params=dict(JUDGE_PARAMS), seed=attempt or None),
        _readable, attempts=PATIENCE, timeout_s=timeout_s)
    if reply is None:
        return Judged(None, "judge", replies, NO_REPLY)
    letter = can_infer(reply, lowered, "hrbench")
    return Judged(letter, "judge", replies, None if letter is not None else NO_OPTION)
