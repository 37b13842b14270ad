"""Every text VistaHop sends: system prompts, the Qwen-style tools section, judge prompts.

The tools section and judge prompts are copied from the public VistaArena runner, so that
`reference` runs send byte-identical text. The dataset's own tool-mode system prompt was never
published, so ours fills the gap; it states what the tool schemas omit: the <answer> tag and the
0-1000 bounding-box convention of image_zoom_in_tool.
"""

from __future__ import annotations

import json
from typing import Any

DEFAULT_SYSTEM_PROMPT = (
    "You are a visual deep-search agent. You are given an image and a question about it. "
    "Answer by inspecting the image, searching for evidence and reasoning step by step.\n"
    "- Make at most one tool call per reply. Tool results come back in <tool_response> tags.\n"
    "- image_zoom_in_tool crops the original full-resolution image. bbox_2d is [x1, y1, x2, y2] "
    "in coordinates normalised to 0-1000 (0,0 is the top-left corner, 1000,1000 the bottom-right), "
    "whatever the size of the image you see.\n"
    "- image_search_tool runs a reverse image search on the input image; it takes no arguments.\n"
    "- text_search_tool searches the web and returns a summary of the results.\n"
    "- When you are confident, reply without a tool call and put the final answer, as short as "
    "possible, inside <answer></answer> tags."
)
"""Our tool-mode base prompt; the reference requires one but never published it."""

DEFAULT_FORMAT_INSTRUCTION = (
    "Think step by step, then give the final answer, as short as possible, inside <answer></answer> tags."
)
"""Appended to the question in direct (No-Tool) mode only, as the reference does."""


def tools_section(tool_specs: list[dict[str, Any]]) -> str:
    """The reference's '# Tools' block: one JSON signature per line inside <tools></tools>."""
    # json.dumps(ensure_ascii=False) spacing, as the reference renders its tools.yaml.
    lines = "\n".join(_dumps(spec) for spec in tool_specs)
    return (
        "# Tools\n\n"
        "You may call one or more functions to assist with the user query.\n\n"
        "You are provided with function signatures within <tools></tools> XML tags:\n"
        f"<tools>\n{lines}\n</tools>\n\n"
        "For each function call, return a json object with function name and arguments within "
        "<tool_call></tool_call> XML tags:\n"
        "<tool_call>\n"
        '{"name": <function-name>, "arguments": <args-json-object>}\n'
        "</tool_call>"
    )


def tool_system_prompt(base: str, tool_specs: list[dict[str, Any]]) -> str:
    """Dataset system prompt, a blank line, then the tools section (reference concatenation)."""
    return f"{base}\n\n{tools_section(tool_specs)}"


def _dumps(value: Any) -> str:
    """JSON with Python's default separators (', ' and ': '), as the reference prints them."""
    return json.dumps(value, ensure_ascii=False)


JUDGE_SYSTEM_PROMPT = """You are an AI assistant tasked with evaluating the correctness of model responses based on an image, question, and ground truth answer. Your judgment should follow these principles:

1. Consider the image, question, and ground truth answer holistically before evaluating the model's response.
2. Your decision should be strictly Yes or No, based on whether the model's response is factually accurate and aligns with the ground truth answer.
3. If the model response is a more specific form of the ground truth answer, it is correct.
4. If the model response includes all key information but adds minor details, it is correct as long as the extra details are factually correct.
5. If the model response contradicts, modifies, or omits critical parts of the answer, it is incorrect.
6. For numerical values, ensure correctness even when presented in different units.
7. For names, check for first and last name correctness. If the middle name is extra but correct, consider it correct.
8. For yes/no questions, the response must exactly match "Yes" or "No" to be correct.
9. If the judgment can be made based solely on the text, you may choose to ignore the input image, as some images may be unfamiliar to you and could affect your judgment. Refer to the image only when necessary to minimize misjudgment.
10. If there are multiple candidate answers, you can also evaluate the model's response against all of them. If the response aligns with at least one candidate according to the rules above, it should be considered correct.
11. For multiple choice questions (A, B, C, D), be more lenient. If the model provides the correct letter choice, even with additional text or formatting, consider it correct.
12. If the model's answer contains the correct choice letter (A, B, C, or D) anywhere in the response, and it's clear this is the intended answer, mark it as correct.
13. Ignore formatting issues like extra parentheses, brackets, or minor text variations as long as the core answer is correct.

Your output must be in the following format:
<judge>Yes/No</judge>
<reason>Explanation of why the answer is correct or incorrect.</reason>"""

JUDGE_USER_PROMPT = """Image, Question, and Model Response Evaluation
Question: {question}
Ground Truth Answer: {ground_truth}
Model Response: {model_response}

Evaluation Instructions
Evaluate whether the Model Response is correct based on the Image, Question and Ground Truth Answer. Follow the predefined judgment rules and provide a clear Yes/No answer along with a justification.

Output Format
<judge>Yes/No</judge>
<reason>Detailed reasoning following the evaluation principles.</reason>"""
