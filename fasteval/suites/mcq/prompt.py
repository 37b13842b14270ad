"""Our wording of the multiple-choice prompt (the reference layouts are described in the spec;
their instruction strings are not shipped here)."""

from __future__ import annotations

from collections.abc import Mapping

DIRECT_INSTRUCTION = "Answer with the option's letter, inside <answer></answer>."
ZOOM_INSTRUCTION = ("You may call image_zoom_in_tool to look closer at a region of the original image. "
                    "Think first, then give the option's letter inside <answer></answer>.")


def choice_prompt(question: str, options: Mapping[str, str], *, zoom: bool, hint: str = "") -> str:
    """Question, lettered options, then the instruction for the setting."""
    lines = [f"Hint: {hint}"] if hint else []
    lines.append(f"Question: {question}")
    lines.append("Options:")
    lines.extend(f"{k}. {v}" for k, v in options.items())
    lines.append(ZOOM_INSTRUCTION if zoom else DIRECT_INSTRUCTION)
    return "\n".join(lines)
