"""The TIR-Bench suite: official data, the reference prompt layout, LLM extraction, faithful scoring.

Settings: ``no-tool`` (the reference's plain run), ``tool`` (a Python image-processing sandbox)
and the six rotation function-calling diagnostics of the paper (predefined ``rotate_image``
vs writing code, under prompts P1/P2/P3), which only apply to ``rotation_game`` tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from fasteval.core.options import Opt
from fasteval.core.types import Message, Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.option_checks import FIDELITIES, fidelity_option, limit_option
from fasteval.suites.tirbench.extract import ChatModel, extract
from fasteval.suites.tirbench.loader import load_tirbench
from fasteval.suites.tirbench.reference_file import aggregate as aggregate_records
from fasteval.suites.tirbench.reference_file import score_reference_file
from fasteval.suites.tirbench.scoring import TASK_TYPES, score_item, scoring_rule
from fasteval.suites.tirbench.texts import tirbench_texts

EXTRACTION_MODES = ("model", "raw")
PYTHON_TOOL = "python_image_processing"
ROTATE_TOOL = "rotate_image"
TOOL_MAX_ROUNDS = 20
SCORING_TIMEOUT_S = 30.0
"""Bound on one item's rule scoring (math-verify's sympy fallback can run away on a crafted answer)."""
EXTRACTION_FAILURE = ("empty", "error")
"""Not published for TIR-Bench; 20 matches the other agentic suites."""

# The paper describes the three prompts but does not print them; this wording is ours.
ROTATION_PROMPTS: dict[str, dict[str, str]] = {
    "fn": {
        "P1": "",
        "P2": "You can call the rotate_image function to rotate the image before answering.",
        "P3": (
            "Use the rotate_image function to test each candidate angle in the options one by one, "
            "look at each rotated image, and answer with the option that makes the image upright."
        ),
    },
    "code": {
        "P1": "",
        "P2": "You can write Python code to rotate the image before answering.",
        "P3": (
            "Write Python code that rotates the image by each candidate angle in the options one by one, "
            "look at each rotated image, and answer with the option that makes the image upright."
        ),
    },
}


def _str_keys(value: Any) -> Any:
    """The same nested value with every mapping key a string (JSON object keys)."""
    if isinstance(value, dict):
        return {str(k): _str_keys(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_str_keys(v) for v in value]
    return value


# TIR-Bench's tool-using runs used a hosted code interpreter (benchmarks.md §2.3): full Python,
# not VisualToolBench's restricted-builtins harness, whatever the suite's scoring fidelity, and
# stateful: variables and imports persist across the calls of one trajectory, as in a hosted
# interpreter session (option ``stateful_interpreter: false`` runs each call fresh).
CODE_INTERPRETER: dict[str, dict[str, Any]] = {PYTHON_TOOL: {"fidelity": "fixed", "stateful": True}}


def _interpreter(stateful: bool) -> dict[str, dict[str, Any]]:
    return {PYTHON_TOOL: {**CODE_INTERPRETER[PYTHON_TOOL], "stateful": stateful}}


def rotation_settings(fidelity: str, stateful: bool = True) -> list[Setting]:
    """The six diagnostic settings: rotation-{fn,code}-{p1,p2,p3}, rotation tasks only."""
    settings = []
    for flavour, tool in (("fn", ROTATE_TOOL), ("code", PYTHON_TOOL)):
        for prompt in ("P1", "P2", "P3"):
            settings.append(
                Setting(
                    name=f"rotation-{flavour}-{prompt.lower()}",
                    tools=[tool],
                    max_rounds=TOOL_MAX_ROUNDS,
                    fidelity=fidelity,
                    options={"task_types": ["rotation_game"], "rotation_tool": flavour, "rotation_prompt": prompt,
                             "tool_options": _interpreter(stateful)},
                )
            )
    return settings


@register_suite
class TIRBench(Suite):
    """TIR-Bench (1,215 items, 13 task types): image-operation tasks, answers extracted then scored exactly or by IoU.

    Options: ``path`` (release folder or TIR-Bench.json), ``fidelity`` ("reference" | "fixed", default "fixed"), ``limit``,
    ``task_types`` (subset) and ``extraction`` ("model": the extractor role, the reference's
    way; "raw": score the final answer text as if it were the extraction).
    """

    name = "tirbench"
    options_schema = {
        "path": Opt("path", "folder holding TIR-Bench.json and data/ (or the json itself)", required=True,
                    exists=True, fetch="tirbench"),
        "fidelity": Opt("str", "reference or fixed", choices=FIDELITIES),
        "limit": Opt("int", "first N tasks"), "task_types": Opt("str_list", "only these task types"),
        "extraction": Opt("str", "answer extraction: model (the extractor role) or raw", choices=EXTRACTION_MODES),
        "texts": Opt("str", "reference (the benchmark's own texts, default under fidelity reference) or own",
                     choices=("reference", "own")),
        "reference_repo": Opt("path", "checkout of the reference harness (default data/reference/<repo>)",
                              fetch="tirbench-reference"),
        "extraction_failure": Opt("str", "empty (reference: score '') or error", choices=EXTRACTION_FAILURE),
        "stateful_interpreter": Opt("bool", "python keeps its state across a trajectory's calls"),
        "scoring_timeout_s": Opt("float", "bound on one item's rule scoring"),
    }
    setting_options = {"task_types": Opt("str_list"), "rotation_tool": Opt("str"), "rotation_prompt": Opt("str"),
                       "extraction": Opt("str", choices=EXTRACTION_MODES)}

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Per-task-type accuracy table as the paper reports it.

        The report is JSON, so the per-seed tables are keyed by ``str(seed)`` here (orjson refuses
        int keys); ``aggregate_records`` itself keeps int seeds for Python callers.
        """
        table: dict[str, Any] = _str_keys(aggregate_records(records))
        return table

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """The reference's JSON keyed "0".."N-1", using its extracted_answer (no model call)."""
        return score_reference_file(path, fidelity)

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError("tirbench: option 'path' (the TIR-Bench folder or TIR-Bench.json) is required")
        self.path = path
        self.fidelity = fidelity_option(options, "tirbench")
        self.limit = limit_option(options, "tirbench")
        task_types = options.get("task_types")
        if task_types is not None and not set(task_types) <= set(TASK_TYPES):
            raise ValueError(f"tirbench: unknown task_types {sorted(set(task_types) - set(TASK_TYPES))}")
        self.task_types: list[str] | None = list(task_types) if task_types is not None else None
        self.extraction = str(options.get("extraction", "model"))
        if self.extraction not in EXTRACTION_MODES:
            raise ValueError(f"tirbench: extraction must be one of {EXTRACTION_MODES}, got {self.extraction!r}")
        # What a failed extraction becomes: "" scored as the reference does, or a judge_error.
        self.extraction_failure: str | None = options.get("extraction_failure")
        if self.extraction_failure is not None and self.extraction_failure not in EXTRACTION_FAILURE:
            raise ValueError(f"tirbench: extraction_failure must be one of {EXTRACTION_FAILURE}")
        self.scoring_timeout_s = float(options.get("scoring_timeout_s", SCORING_TIMEOUT_S))
        self.stateful_interpreter = bool(options.get("stateful_interpreter", True))
        self.texts = tirbench_texts(options, self.fidelity)

    def text_manifest(self) -> dict[str, Any] | None:
        return self.texts.manifest()

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        return self.texts.listing()

    def load(self) -> Iterator[Task | LoadError]:
        return load_tirbench(self.path, self.blobs, task_types=self.task_types, limit=self.limit,
                             allow_image_root=self.options.get("allow_image_root"))

    def default_settings(self) -> list[Setting]:
        return [
            Setting(name="no-tool", tools=[], fidelity=self.fidelity),
            Setting(name="tool", tools=[PYTHON_TOOL], max_rounds=TOOL_MAX_ROUNDS, fidelity=self.fidelity,
                    options={"tool_options": _interpreter(self.stateful_interpreter)}),
            *rotation_settings(self.fidelity, self.stateful_interpreter),
        ]

    def applies_to(self, task: Task, setting: Setting) -> bool:
        """Whether a setting runs this task (the rotation diagnostics only run rotation_game)."""
        wanted = setting.options.get("task_types")
        return wanted is None or task.metadata.get("task_type") in wanted

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        """The extractor reads the answer out of every reply but OCR's, unless ``extraction: raw``."""
        wanted = setting.options.get("task_types")
        only_ocr = wanted is not None and all(t == "ocr" for t in wanted)
        if str(setting.options.get("extraction", self.extraction)) == "raw" or only_ocr:
            return super().roles_needed(setting)
        return frozenset({"extractor"})

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        """Text first, then the images, as the reference harness sends them."""
        turn = task.turns[turn_index]
        text = turn.text
        flavour, prompt = setting.options.get("rotation_tool"), setting.options.get("rotation_prompt")
        if flavour and prompt:
            suffix = ROTATION_PROMPTS[flavour][prompt]
            text = f"{text}\n\n{suffix}" if suffix else text
        content: list[dict[str, Any]] = [{"type": "text", "text": text}]
        content.extend({"type": "image", "image": ref} for ref in turn.images)
        return {"role": "user", "content": content}

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        task_type = str(task.metadata["task_type"])
        response = trajectory.answers[0] if trajectory.answers else None
        details: dict[str, Any] = {
            "task_type": task_type,
            "rule": scoring_rule(task_type, task.reference),
            "fidelity": setting.fidelity,
            "extracted": None,
        }
        if response is None:
            # The model never answered (e.g. ran out of rounds): a wrong answer, not a judge failure.
            return Score(0.0, details | {"no_response": True})
        extracted: str | None = None
        if task_type != "ocr":
            extraction = str(setting.options.get("extraction", self.extraction))
            details["extraction_source"] = extraction
            if extraction == "raw":
                extracted = response
            else:
                extractor: ChatModel | None = ctx.services.get("extractor")
                if extractor is None:
                    return Score(None, details, error="judge_error: no 'extractor' service to extract the answer")
                failure = self.extraction_failure or ("empty" if setting.fidelity == "reference" else "error")
                on_failure: Literal["empty", "error"] = "empty" if failure == "empty" else "error"
                result = await extract(extractor, task_type, task.turns[0].text, response, texts=self.texts,
                                       on_failure=on_failure)
                details["extraction_attempts"] = result.attempts
                if result.failed is not None:
                    details["extraction_failed"] = result.failed
                    details["extractor_replies"] = result.replies
                if result.error is not None:
                    details["extractor_replies"] = result.replies
                    return Score(None, details, error=result.error)
                extracted = result.text
        details["extracted"] = extracted
        meta = {
            "prompt": task.turns[0].text,
            "image_1": task.metadata.get("image_1", ""),
            "difficulty": task.metadata.get("difficulty"),
        }
        # math_verify's sympy fallback can take a while: keep it off the event loop, and bound it
        # (its own SIGALRM timeouts do not work off the main thread). A runaway item scores 0, as
        # a timed-out math-verify does in the reference; the thread is left to finish on its own.
        try:
            value = await asyncio.wait_for(asyncio.to_thread(
                score_item, task_type, response, extracted, task.reference, setting.fidelity, meta
            ), self.scoring_timeout_s)
        except TimeoutError:
            return Score(0.0, details | {"scoring_timeout_s": self.scoring_timeout_s})
        return Score(value, details)
