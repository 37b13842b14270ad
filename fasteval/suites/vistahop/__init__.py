"""VistaHop (VistaArena): multi-hop visual deep search.

Importing the package registers the ``vistahop`` suite and the offline ``image_search_tool``.
"""

from fasteval.suites.vistahop.loader import LoaderConfig, level_of, load_tasks
from fasteval.suites.vistahop.metrics import (
    aggregate,
    aggregate_by_setting,
    score_reference_file,
    termination_state,
)
from fasteval.suites.vistahop.scoring import (
    JudgeError,
    exact_match,
    extract_answer,
    judge_answer,
    normalize_answer,
    parse_judge_verdict,
)
from fasteval.suites.vistahop.suite import FIDELITY_SWITCHES, PRESETS, VistaHopSuite, tool_response_content
from fasteval.suites.vistahop.tools import ImageSearchTool

__all__ = [
    "FIDELITY_SWITCHES",
    "PRESETS",
    "ImageSearchTool",
    "JudgeError",
    "LoaderConfig",
    "VistaHopSuite",
    "aggregate",
    "aggregate_by_setting",
    "exact_match",
    "extract_answer",
    "judge_answer",
    "level_of",
    "load_tasks",
    "normalize_answer",
    "parse_judge_verdict",
    "score_reference_file",
    "termination_state",
    "tool_response_content",
]
