"""Where VisualToolBench's texts live in the reference repository, and our own wording of each.

Reference layout (xi1ngang/VisualToolBench): ``scripts/prompt.py`` holds the three system
prompts (``system_prompt_low/mid/high``); ``scripts/tools.py`` builds the six tool entries in
``VisionTools.get_tools`` (the image tool's description is an f-string over the turn's image
list and the save folder, rebuilt every round); the rubric judge's prompt is the f-string
``prompt`` in ``LLM_Judge.LLMasJudge`` of ``scripts/run_judge_single_turn.py``.
"""

from __future__ import annotations

from typing import Any, cast

from fasteval.suites.reference_texts import Field, Template, TextBook, TextSpec, load_text_book, text_options

from .prompts import JUDGE_TEMPLATE, SYSTEM_PROMPTS

FETCH_HINT = "fasteval data fetch visualtoolbench-reference --dest data"
DEFAULT_REFERENCE_REPO = "data/reference/VisualToolBench"

REFERENCE_TOOL_NAMES = {"web_search": "google_search"}
"""Our tool name -> the name the reference shows the model (and the model calls)."""


def _own_tool(name: str) -> dict[str, Any]:
    from fasteval.tools.base import TOOLS

    spec: dict[str, Any] = TOOLS[name]().spec()["function"]
    return spec


def _specs() -> list[TextSpec]:
    from fasteval.tools.python_tools import image_processing_description

    own_image = _own_tool("python_image_processing")
    own_image["description"] = _as_template(
        image_processing_description(cast(list[str], _Marker("image_list")), str(_Marker("processed_image_save_path"))))
    specs = [
        TextSpec(f"system.{level}", "system_prompt", "scripts/prompt.py", f"system_prompt_{level}", text)
        for level, text in SYSTEM_PROMPTS.items()
    ]
    specs.append(TextSpec("judge", "judge_prompt", "scripts/run_judge_single_turn.py", "LLM_Judge.LLMasJudge.prompt",
                          Template.from_format(JUDGE_TEMPLATE)))
    for ours in ("python_image_processing", "python_interpreter", "web_search", "browser_get_page_text",
                 "historical_weather", "calculator"):
        ref = REFERENCE_TOOL_NAMES.get(ours, ours)
        own = own_image if ours == "python_image_processing" else _own_tool(ours)
        specs.append(TextSpec(f"tool.{ours}", "tool_spec", "scripts/tools.py", f"VisionTools.get_tools.{{name={ref}}}",
                              own, kind="data"))
    return specs


class _Marker:
    """Stands for a template field while our own description is rendered (then split on NUL)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __str__(self) -> str:
        return f"\0{self.name}\0"

    __repr__ = __str__


def _as_template(text: str) -> Template:
    pieces = text.split("\0")
    return Template(tuple(Field(p) if i % 2 else p for i, p in enumerate(pieces) if p or i % 2))


def vtb_texts(options: dict[str, Any], fidelity: str) -> TextBook:
    """The suite's text book: the reference's strings, or ours under ``texts: own``."""
    mode, repo = text_options(options, fidelity)
    return load_text_book("visualtoolbench", _specs(), mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)


def render_value(value: Any, fields: dict[str, Any]) -> Any:
    """A tool entry with every Template in it filled in."""
    if isinstance(value, Template):
        return value.render(fields)
    if isinstance(value, dict):
        return {k: render_value(v, fields) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, fields) for v in value]
    return value
