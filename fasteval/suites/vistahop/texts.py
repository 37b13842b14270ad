"""Where VistaHop's texts live in the reference repository, and our own wording of each.

Reference layout (ahang0712/vistahop): ``evaluation/tools.yaml`` lists the tool schemas
(``tools[i].tool_schema``), rendered one JSON line each into the '# Tools' block, an f-string
named ``tools_section`` in ``load_tool_config`` of ``evaluation/run_vistahop_eval.py``. The judge
texts are the module constants ``LLM_JUDGE_SYSTEM_PROMPT`` and ``LLM_JUDGE_USER_PROMPT`` (a
``str.format`` template); the tool error strings are assignments to ``tool_response`` in
``evaluate_tool`` (wrapped in ``<tool_response>`` there; we strip the wrapper and wrap again).
"""

from __future__ import annotations

from typing import Any

from fasteval.suites.reference_texts import Field, Template, TextBook, TextSpec, load_text_book, text_options
from fasteval.suites.vistahop.prompts import JUDGE_SYSTEM_PROMPT, JUDGE_USER_PROMPT, tools_section

FETCH_HINT = "fasteval data fetch vistahop-reference --dest data"
DEFAULT_REFERENCE_REPO = "data/reference/vistahop"
EVAL = "evaluation/run_vistahop_eval.py"
TOOL_ORDER = ("image_zoom_in_tool", "text_search_tool", "image_search_tool")
"""Order of the schemas in the reference tools.yaml."""

OWN_INVALID_BBOX = "Error: Invalid bbox format."
OWN_NO_RESULTS = "No matching images were found."
OWN_UNKNOWN_TOOL = Template(("Error: Unknown tool '", Field("tool_name"), "'."))


def _own_tool(name: str) -> dict[str, Any]:
    from fasteval.tools.base import TOOLS

    spec: dict[str, Any] = TOOLS[name]().spec()
    return spec


def _own_tools_section() -> Template:
    head, _, tail = tools_section([]).partition("<tools>\n\n</tools>")
    return Template((head + "<tools>\n", Field("tool_def_str"), "\n</tools>" + tail))


def _specs() -> list[TextSpec]:
    specs = [
        TextSpec("tools_section", "system_prompt", EVAL, "load_tool_config.tools_section", _own_tools_section()),
        *(TextSpec(f"tool.{name}", "tool_spec", "evaluation/tools.yaml", f"tools[{i}].tool_schema",
                   _own_tool(name), kind="data") for i, name in enumerate(TOOL_ORDER)),
        TextSpec("judge_system", "judge_prompt", EVAL, "LLM_JUDGE_SYSTEM_PROMPT", JUDGE_SYSTEM_PROMPT),
        TextSpec("judge_user", "judge_prompt", EVAL, "LLM_JUDGE_USER_PROMPT", Template.from_format(JUDGE_USER_PROMPT),
                 kind="format"),
        # The n-th assignment to tool_response in evaluate_tool (0 is the empty initial value).
        TextSpec("error.invalid_bbox", "tool_error", EVAL, "evaluate_tool.tool_response@2", _wrap(OWN_INVALID_BBOX)),
        TextSpec("error.no_results", "tool_error", EVAL, "evaluate_tool.tool_response@6", _wrap(OWN_NO_RESULTS)),
        TextSpec("error.unknown_tool", "tool_error", EVAL, "evaluate_tool.tool_response@8",
                 Template(("<tool_response>\n", *OWN_UNKNOWN_TOOL.parts, "\n</tool_response>"))),
    ]
    return specs


def _wrap(text: str) -> str:
    return f"<tool_response>\n{text}\n</tool_response>"


def unwrap(text: str) -> str:
    """The text inside the reference's ``<tool_response>\\n...\\n</tool_response>`` wrapper."""
    prefix, suffix = "<tool_response>\n", "\n</tool_response>"
    if text.startswith(prefix):
        text = text[len(prefix):]
    if text.endswith(suffix):
        text = text[: -len(suffix)]
    return text


def vistahop_texts(options: dict[str, Any], fidelity: str) -> TextBook:
    """The suite's text book: the reference's strings, or ours under ``texts: own``."""
    mode, repo = text_options(options, fidelity)
    return load_text_book("vistahop", _specs(), mode, repo or DEFAULT_REFERENCE_REPO, FETCH_HINT)
