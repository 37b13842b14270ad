"""Our wording of the multiple-choice prompt (the reference layouts are described in the spec;
their instruction strings are not shipped here)."""

from __future__ import annotations

from collections.abc import Mapping

DIRECT_INSTRUCTION = "Answer with the option's letter, inside <answer></answer>."
ZOOM_INSTRUCTION = ("You may call image_zoom_in_tool to look closer at a region of the original image. "
                    "Think first, then give the option's letter inside <answer></answer>.")
# Under fidelity reference the instruction asks for a letter the way the MCQ harnesses do, with no
# tag the reference scorers cannot read.
PLAIN_DIRECT_INSTRUCTION = "Answer with the option's letter from the given choices directly."
PLAIN_ZOOM_INSTRUCTION = ("You may call image_zoom_in_tool to look closer at a region of the original image. "
                          "Then answer with the option's letter from the given choices.")


def choice_prompt(question: str, options: Mapping[str, str], *, zoom: bool, hint: str = "",
                  tagged: bool = True) -> str:
    """Question, lettered options, then the instruction for the setting (``tagged``: ask for <answer>)."""
    lines = [f"Hint: {hint}"] if hint else []
    lines.append(f"Question: {question}")
    lines.append("Options:")
    lines.extend(f"{k}. {v}" for k, v in options.items())
    if tagged:
        lines.append(ZOOM_INSTRUCTION if zoom else DIRECT_INSTRUCTION)
    else:
        lines.append(PLAIN_ZOOM_INSTRUCTION if zoom else PLAIN_DIRECT_INSTRUCTION)
    return "\n".join(lines)
