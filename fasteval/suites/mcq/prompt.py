"""Our wording of the multiple-choice prompt (the reference layouts are described in the spec;
their instruction strings are not shipped here)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

Mode = Literal["direct", "zoom", "code"]
_TOOL_LINE = {
    "direct": "",
    "zoom": "You may call image_zoom_in_tool to look closer at a region of the original image. ",
    "code": "You may run Python code on the image with python_image_processing (crop, enlarge, enhance). ",
}
# Under fidelity fixed the answer goes in a tag; under reference the instruction asks for a letter
# the way the MCQ harnesses do, with no tag the reference scorers cannot read.
TAGGED = "Think first, then give the option's letter inside <answer></answer>."
PLAIN = "Answer with the option's letter from the given choices directly."


def choice_prompt(question: str, options: Mapping[str, str], *, mode: Mode = "direct", hint: str = "",
                  tagged: bool = True) -> str:
    """Question, lettered options, then the instruction for the setting (``tagged``: ask for <answer>)."""
    lines = [f"Hint: {hint}"] if hint else []
    lines.append(f"Question: {question}")
    lines.append("Options:")
    lines.extend(f"{k}. {v}" for k, v in options.items())
    lines.append(_TOOL_LINE[mode] + (TAGGED if tagged else PLAIN))
    return "\n".join(lines)
