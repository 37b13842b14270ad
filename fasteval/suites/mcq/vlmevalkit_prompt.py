"""VLMEvalKit's multiple-choice prompt (``ImageMCQDataset.build_prompt``), read from the checkout.

V* and HR-Bench are run through this layout in VLMEvalKit (§1.2, §2.2): the image, then
``[Hint: …\\n]Question: {q}\\nOptions:\\nA. …\\n…`` and its instruction line. Under ``fidelity:
reference`` with ``texts: reference`` each piece is read at run time from
``vlmeval/dataset/image_mcq.py`` of the user's checkout (the f-strings the function builds the
prompt from, in source order) and filled as VLMEvalKit fills them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasteval.suites.mcq import judge
from fasteval.suites.reference_texts import Template, TextBook, TextSpec, load_text_book, text_options

PROMPT_FILE = "vlmeval/dataset/image_mcq.py"


def specs_for(dataset_class: str) -> list[TextSpec]:
    """The pieces of ``<dataset_class>.build_prompt`` (V*, HR-Bench: ImageMCQDataset; TreeBench: its own
    class, whose instruction differs), with our wording for ``texts: own``."""
    fn = f"{dataset_class}.build_prompt"
    return [
        TextSpec("hint", "system_prompt", PROMPT_FILE, f"{fn}.prompt+@0", Template.from_format("Hint: {hint}\n")),
        TextSpec("question", "system_prompt", PROMPT_FILE, f"{fn}.prompt+@1",
                 Template.from_format("Question: {question}\n")),
        TextSpec("options_header", "system_prompt", PROMPT_FILE, f"{fn}.options_prompt", "Options:\n"),
        TextSpec("option", "system_prompt", PROMPT_FILE, f"{fn}.options_prompt+@0",
                 Template.from_format("{key}. {item}\n")),
        TextSpec("instruction", "system_prompt", PROMPT_FILE, f"{fn}.prompt+@3",
                 "Answer with the option's letter from the given choices directly.\n"),
    ]


def prompt_texts(options: Mapping[str, Any], fidelity: str, dataset_class: str = "ImageMCQDataset") -> TextBook:
    """The layout's pieces: VLMEvalKit's (texts: reference) or ours (texts: own)."""
    mode, repo = text_options(options, fidelity)
    # One VLMEvalKit checkout holds the judge's texts and these (read at call time: tests move it).
    return load_text_book("vlmevalkit-prompt", specs_for(dataset_class), mode, repo or judge.DEFAULT_REFERENCE_REPO, judge.FETCH_HINT)


def vlmevalkit_prompt(texts: TextBook, question: str, options: Mapping[str, str], hint: str = "") -> str:
    """``build_prompt``'s text: hint, question, the options and the instruction."""
    out = texts.render("hint", hint=hint) if hint else ""
    out += texts.render("question", question=question)
    if options:
        out += texts.render("options_header")
        out += "".join(texts.render("option", key=k, item=v) for k, v in options.items())
        out += texts.render("instruction")
    return out
