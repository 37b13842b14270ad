"""Texts VisualToolBench sends: system prompts per level, the rubric judge prompt, fixed strings.

The wording is ours; the content follows the reference harness (benchmarks.md §1.3, §1.5) point
by point, so a level or a judge verdict means the same thing as in the paper's runs.
"""

from __future__ import annotations

from collections.abc import Mapping

PROMPT_LEVELS = ("low", "mid", "high")

TOOL_NAMES = (
    "python_image_processing",
    "python_interpreter",
    "web_search",
    "calculator",
    "browser_get_page_text",
    "historical_weather",
)
"""The six tools of the paper; the reference code calls web_search ``google_search``."""

OVERFLOW_ANSWER = "Model hit the maximum number of tool calls"
"""What the reference harness stores (and the judge grades) when the round budget runs out."""

_LOW = "You are a helpful assistant for visual reasoning, and you can call tools to help answer the user's question."

_MID = (
    _LOW
    + "\n1. Use the image-processing tools to transform the image so you can see what matters more clearly."
    "\n2. Whenever you use an image-processing tool, save the transformed image so it can be used later."
    "\n3. Use the other general-purpose tools to look up or compute any information the question needs."
)

_HIGH = (
    "You are a visual-reasoning assistant that is proactive and makes full use of its tools.\n"
    "When the user gives you an image and a problem whose visual evidence is small, unclear or off-centre:\n"
    "1. Study the image closely and list to yourself the visual clues most likely to lead you to the target.\n"
    "2. Do not wait to be asked: crop, zoom into or enhance the image with the image-processing tools to "
    "isolate the relevant region and make it clearer.\n"
    "3. Save every transformed image; each saved image is added to the conversation so you can look at it.\n"
    "4. Repeat as needed, calling the tools again until the visual evidence is clear enough to answer.\n"
    "5. Check your observations again and make sure the last transformed image supports a correct, "
    "confident answer before you reply.\n"
    "6. Use the other general-purpose tools when the question needs them.\n"
    "7. Your number of tool calls is limited, so spend them carefully."
)

SYSTEM_PROMPTS: dict[str, str] = {"low": _LOW, "mid": _MID, "high": _HIGH}


def system_prompt_for(level: str, fidelity: str, prompts: Mapping[str, str] | None = None) -> str | None:
    """System prompt text of a level; None means no system message.

    The reference CLI accepts ``medium`` but looks up ``mid``, so ``medium`` silently sends no
    system prompt there; ``reference`` fidelity keeps that, ``fixed`` reads it as ``mid``.
    ``prompts`` (level -> text) replaces our wording, e.g. with the reference's own texts.
    """
    table = SYSTEM_PROMPTS if prompts is None else prompts
    if level == "medium":
        return None if fidelity == "reference" else table["mid"]
    if level == "none":
        return None
    try:
        return table[level]
    except KeyError:
        raise ValueError(f"unknown prompt_level {level!r}; use one of {[*PROMPT_LEVELS, 'none']}") from None


def transformed_images_text(call_id: str) -> str:
    """Text of the user message that carries a python_image_processing call's new images."""
    return f"Here are the transformed images from the tool call {call_id}."


JUDGE_TEMPLATE = """You are an expert grader. Decide whether a model's answer satisfies one rubric criterion.
You are given a question, a golden (reference) answer, a single rubric criterion and the model's answer.
Judge whether the model's answer MEETS or DOES NOT MEET the criterion; consult the golden answer only as far as the criterion needs it.

### Question
{question}

### Golden answer
{golden_answer}

### Rubric criterion
{rubric_criteria}

### Model answer
{model_answer}

### Notes
- When the criterion does not ask for a correct result, the answer need not be correct to meet it. For example, "the model shows its reasoning" is met by an answer that shows its reasoning, even if the conclusion is wrong.
- Be lenient with criteria about writing style or presentation. For example, if the criterion asks for a concise answer, an answer somewhat longer than the golden answer but still of reasonable length meets it.
- An answer can meet the criterion implicitly, without using its exact words, as long as it is reasonable and sensible. For example, "plants make their own food from sunlight" shows an understanding of photosynthesis without naming it.

### Output
Reply with a JSON object only, in this form:
{{"explanation": "a short justification of your verdict", "judge_result": "Met" or "Not Met"}}
"""


def judge_prompt(question: str, golden_answer: str, rubric: str, answer: str) -> str:
    """The single-rubric judge prompt: text only, that turn's question only, as the reference does."""
    return JUDGE_TEMPLATE.format(question=question, golden_answer=golden_answer, rubric_criteria=rubric,
                                 model_answer=answer)
