"""Multiple-choice machinery shared by V*, HR-Bench, MME-RealWorld and TreeBench: the reference
matchers (VLMEvalKit, lmms-eval, MME-RealWorld's script), our fixed reading, option order per
seed, VLMEvalKit's judge fallback, release tables and both-fidelity tables."""

from fasteval.suites.mcq.matching import (
    can_infer,
    extract_characters_regex,
    fixed_choice,
    lmms_eval_letter,
)
from fasteval.suites.mcq.shuffle import gold_letter, option_order
from fasteval.suites.mcq.suite import ChoiceSuite, Scored

__all__ = ["ChoiceSuite", "Scored", "can_infer", "extract_characters_regex", "fixed_choice", "gold_letter",
           "lmms_eval_letter", "option_order"]
