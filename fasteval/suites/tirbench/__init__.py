"""TIR-Bench: loader, extraction prompts and the reference scoring rules.

Importing this package registers the ``tirbench`` suite (the rotation diagnostic uses the
``rotate_image`` tool of ``fasteval.tools.image_tools``). The
scoring functions are public so procedural suites (tir-synth) score exactly the same way.
"""

from fasteval.suites.tirbench.extract import (
    ChatModel,
    ExtractionResult,
    extract,
    extraction_prompt,
    extraction_request,
    parse_extraction_reply,
)
from fasteval.suites.tirbench.loader import load_tirbench
from fasteval.suites.tirbench.reference_file import aggregate, score_reference_file
from fasteval.suites.tirbench.scoring import (
    TASK_TYPES,
    classify_string,
    judge_by_answer_type,
    judge_choice,
    judge_float,
    judge_int,
    judge_jigsaw,
    judge_ocr,
    judge_spot_difference,
    judge_word_search,
    overall_accuracy,
    score_item,
    scoring_rule,
)
from fasteval.suites.tirbench.suite import TIRBench

__all__ = [
    "TASK_TYPES",
    "ChatModel",
    "ExtractionResult",
    "TIRBench",
    "aggregate",
    "classify_string",
    "extract",
    "extraction_prompt",
    "extraction_request",
    "judge_by_answer_type",
    "judge_choice",
    "judge_float",
    "judge_int",
    "judge_jigsaw",
    "judge_ocr",
    "judge_spot_difference",
    "judge_word_search",
    "load_tirbench",
    "overall_accuracy",
    "parse_extraction_reply",
    "score_item",
    "score_reference_file",
    "scoring_rule",
]
