"""Where TIR-Bench's texts live in the reference repository, and our own wording of each.

Reference layout (agents-x-project/TIR-Bench): ``demo_prompts.py`` holds one few-shot block per
task type (``demo_prompt_<task>``); ``extract_answer.py`` builds the extractor's user text in
``create_test_prompt`` (two f-strings) and sends a fixed system line in ``get_response_text``.
"""

from __future__ import annotations

from typing import Any

from fasteval.suites.reference_texts import Template, TextBook, TextSpec, load_text_book, text_options
from fasteval.suites.tirbench.demos import DEMO_BLOCKS

REFERENCE_REPO = "agents-x-project/TIR-Bench"
FETCH_HINT = "fasteval data fetch tirbench-reference --dest data"
DEFAULT_REFERENCE_REPO = "data/reference/TIR-Bench"

OWN_EXTRACTOR_SYSTEM = "Assistant is a large language model trained by OpenAI."
OWN_TEST_PROMPT = Template.from_format("Question: {query}\n\nModel response: {response}")
OWN_FULL_PROMPT = Template.from_format("{demo_prompt}\n\n{test_prompt}\n\nExtracted answer: ")

DEMO_TASKS = ("jigsaw", "color", "maze", "math", "symbolic", "word_search", "rotation_game",
              "spot_difference", "visual_search", "refcoco", "contrast", "instrument")

SPECS: list[TextSpec] = [
    TextSpec("extractor_system", "extractor_prompt", "extract_answer.py",
             "get_response_text.{role=system}.content[0].text", OWN_EXTRACTOR_SYSTEM),
    TextSpec("extractor_question", "extractor_prompt", "extract_answer.py", "create_test_prompt.test_prompt",
             OWN_TEST_PROMPT),
    TextSpec("extractor_layout", "extractor_prompt", "extract_answer.py", "create_test_prompt.full_prompt",
             OWN_FULL_PROMPT),
    *(TextSpec(f"demo.{task}", "demo", "demo_prompts.py", f"demo_prompt_{task}", DEMO_BLOCKS[task])
      for task in DEMO_TASKS),
]


def tirbench_texts(options: dict[str, Any], fidelity: str) -> TextBook:
    """The suite's text book: the reference's strings, or ours under ``texts: own``."""
    mode, repo = text_options(options, fidelity)
    return load_text_book("tirbench", SPECS, mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)
