"""VisualToolBench (Scale AI, arXiv 2510.12712): loader, prompts, settings, rubric judge, metrics.

Importing this package registers the suite as ``visualtoolbench``.
"""

from .judge import JudgeError, JudgeParseError, Verdict, judge_request, judge_rubric, parse_verdict
from .loader import domain_of, iter_tasks, load_rubric_weights
from .metrics import (
    aggregate,
    classify_image_ops,
    image_op_distribution,
    rubric_score,
    score_tables,
    tool_metrics,
)
from .prompts import OVERFLOW_ANSWER, SYSTEM_PROMPTS, TOOL_NAMES, judge_prompt, system_prompt_for
from .reference import score_reference_file
from .suite import IMAGE_PROFILE, VisualToolBenchSuite, fidelity_switches, score_task

__all__ = [
    "IMAGE_PROFILE",
    "OVERFLOW_ANSWER",
    "SYSTEM_PROMPTS",
    "TOOL_NAMES",
    "JudgeError",
    "JudgeParseError",
    "Verdict",
    "VisualToolBenchSuite",
    "aggregate",
    "classify_image_ops",
    "domain_of",
    "fidelity_switches",
    "image_op_distribution",
    "iter_tasks",
    "judge_prompt",
    "judge_request",
    "judge_rubric",
    "load_rubric_weights",
    "parse_verdict",
    "rubric_score",
    "score_reference_file",
    "score_task",
    "score_tables",
    "system_prompt_for",
    "tool_metrics",
]
