"""What the multiple-choice thinking-with-images suites share: options per seed, settings,
both scores on every record.

A task holds its options in file order (``metadata["options"]``) and the gold's position
(``metadata["answer_index"]``). Under ``fidelity: fixed`` a suite that shuffles shows them in a
per-seed order (``option_order``), so "always A" scores chance; under ``reference`` they keep
the release's order, as the reference harnesses send them. The order and the gold letter shown
are recorded on the record. Each reply is scored twice — by the pinned reference rule of the
chosen ``scorer`` and by our fixed rule — and the setting's fidelity picks the record's score.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar

from fasteval.core.options import Opt, OptionSchema
from fasteval.core.tagged import Tagged
from fasteval.core.types import Message, Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import Score, ScoreContext, Setting, Suite
from fasteval.suites.mcq.judge import EXACT_MATCHING, judge_texts
from fasteval.suites.mcq.matching import MATCHER_VERSIONS, MatcherVersion, fixed_choice
from fasteval.suites.mcq.prompt import Mode, choice_prompt
from fasteval.suites.mcq.shuffle import gold_letter, option_order, shown
from fasteval.suites.mcq.vlmevalkit_prompt import prompt_texts, vlmevalkit_prompt
from fasteval.suites.option_checks import FIDELITIES, fidelity_option, limit_option
from fasteval.suites.reference_texts import TextBook

_ANSWER = Tagged("<answer>", "</answer>")
ZOOM_TOOL = "image_zoom_in_tool"
CODE_TOOL = "python_image_processing"
CODE_TOOL_OPTIONS = {CODE_TOOL: {"fidelity": "fixed", "stateful": True}}
"""Thyme writes and runs image-processing code; its interpreter keeps state within a trajectory."""
DEFAULT_MAX_TOKENS = 10240
"""DeepEyes' V* budget; big enough for thinking models (lmms-eval's 16 cuts every one off)."""


@dataclass(slots=True)
class Scored:
    """One reference rule's verdict on a reply."""

    value: float | None
    details: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def common_options(name: str, scorers: tuple[str, ...]) -> OptionSchema:
    """Options every choice suite takes."""
    return {
        "path": Opt("path", "the release file or folder", required=True, exists=True, fetch=name),
        "fidelity": Opt("str", "reference or fixed (default fixed)", choices=FIDELITIES),
        "scorer": Opt("str", "the reference scorer to reproduce", choices=scorers),
        "limit": Opt("int", "first N tasks"),
        "shuffle": Opt("bool", "show options in a per-seed order (default: on under fixed where the suite shuffles)"),
        "judge": Opt("str", "VLMEvalKit's fallback: exact_matching (default) or the name of a judge role"),
        "matcher": Opt("str", "VLMEvalKit can_infer version: upstream, fork or hrbench", choices=MATCHER_VERSIONS),
        "max_tokens": Opt("int", f"output budget per round (default {DEFAULT_MAX_TOKENS})"),
        "texts": Opt("str", "judge texts: reference (VLMEvalKit's, default under reference) or own",
                     choices=("reference", "own")),
        "reference_repo": Opt("path", "checkout of the reference harness holding the judge texts",
                              fetch="vlmevalkit-reference"),
        "allow_image_root": Opt("path", "another folder images may be read from"),
        "strip_answer_tag": Opt("bool", "reference: score the first <answer> of the final reply, as DeepEyesV2's "
                                "agent harness writes its prediction (default: the raw reply, as VLMEvalKit reads it)"),
    }


class ChoiceSuite(Suite):
    """A multiple-choice benchmark over one image per task, in ``direct`` and ``zoom`` settings."""

    scorers: ClassVar[tuple[str, ...]] = ("vlmevalkit",)
    shuffles: ClassVar[bool] = True
    pin_last: ClassVar[bool] = False
    zoom_rounds: ClassVar[int] = 11
    """DeepEyes' V* loop: up to 11 model calls."""
    vlmevalkit_layout: ClassVar[str | None] = None
    """Under reference with the vlmevalkit scorer, send this VLMEvalKit dataset class's
    ``build_prompt`` text (V*, HR-Bench: ImageMCQDataset; TreeBench: TreeBench)."""

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError(f"{self.name}: option 'path' (the release file or folder) is required")
        self.path = path
        self.fidelity = fidelity_option(options, self.name)
        self.scorer = str(options.get("scorer", self.scorers[0]))
        if self.scorer not in self.scorers:
            raise ValueError(f"{self.name}: scorer must be one of {self.scorers}, got {self.scorer!r}")
        self.limit = limit_option(options, self.name)
        shuffle = options.get("shuffle")
        self.shuffle_option: bool | None = None if shuffle is None else bool(shuffle)
        self.judge_role = str(options.get("judge") or EXACT_MATCHING)
        matcher = str(options.get("matcher", self.default_matcher()))
        if matcher not in MATCHER_VERSIONS:
            raise ValueError(f"{self.name}: matcher must be one of {MATCHER_VERSIONS}, got {matcher!r}")
        self.matcher: MatcherVersion = matcher  # type: ignore[assignment]
        self.max_tokens = int(options.get("max_tokens", DEFAULT_MAX_TOKENS))
        self.strip_answer_tag = bool(options.get("strip_answer_tag", False))
        self.judge_book: TextBook | None = (judge_texts(options, self.fidelity)
                                            if self.judge_role != EXACT_MATCHING else None)
        self.prompt_book: TextBook | None = (prompt_texts(options, self.fidelity, self.vlmevalkit_layout)
                                             if self.vlmevalkit_layout and self.fidelity == "reference"
                                             and self.scorer == "vlmevalkit" else None)

    def default_matcher(self) -> str:
        return "upstream"

    def _books(self) -> list[TextBook]:
        return [b for b in (self.prompt_book, self.judge_book) if b is not None]

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        """The role option ``judge`` names (VLMEvalKit's fallback, HR-Bench's official and lmms-eval
        judges, DeepEyes' V* judge); none with ``exact_matching``, the default."""
        return frozenset() if self.judge_role == EXACT_MATCHING else frozenset({self.judge_role})

    def text_manifest(self) -> dict[str, Any] | None:
        books = self._books()
        if not books:
            return None
        first = books[0].manifest()
        return {**first, "texts": [t for b in books for t in b.manifest()["texts"]]}

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        return [t for b in self._books() for t in b.listing()]

    def default_settings(self) -> list[Setting]:
        return [Setting(name="direct", tools=[], max_rounds=1, fidelity=self.fidelity),
                Setting(name="zoom", tools=[ZOOM_TOOL], max_rounds=self.zoom_rounds, fidelity=self.fidelity),
                Setting(name="code", tools=[CODE_TOOL], max_rounds=self.zoom_rounds, fidelity=self.fidelity,
                        options={"tool_options": CODE_TOOL_OPTIONS})]

    def request_params(self, setting: Setting, model: str) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens}

    def shuffled(self, setting: Setting) -> bool:
        """Whether options are shown in a per-seed order under ``setting``."""
        if self.shuffle_option is not None:
            return self.shuffle_option
        return self.shuffles and setting.fidelity == "fixed"

    def order(self, task: Task, seed: int, setting: Setting) -> list[int]:
        n = len(task.metadata["options"])
        if not self.shuffled(setting):
            return list(range(n))
        return option_order(task.id, seed, n, pin_last=self.pin_last)

    def prompt_text(self, task: Task, options: dict[str, str], setting: Setting) -> str:
        if self.prompt_book is not None and setting.fidelity == "reference":
            return vlmevalkit_prompt(self.prompt_book, task.turns[0].text, options, str(task.metadata.get("hint") or ""))
        tools = self.tools(task, setting)
        mode: Mode = "zoom" if ZOOM_TOOL in tools else "code" if CODE_TOOL in tools else "direct"
        return choice_prompt(task.turns[0].text, options, mode=mode,
                             hint=str(task.metadata.get("hint") or ""), tagged=setting.fidelity == "fixed")

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        """The image first, then the question and options in this seed's order."""
        options = shown(list(task.metadata["options"]), self.order(task, trajectory.seed, setting))
        content: list[dict[str, Any]] = [{"type": "image", "image": ref} for ref in task.turns[0].images]
        content.append({"type": "text", "text": self.prompt_text(task, options, setting)})
        return {"role": "user", "content": content}

    @abstractmethod
    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        """The chosen reference scorer's verdict on ``response`` (None: the model never answered)."""

    def fixed_score(self, task: Task, response: str | None, options: dict[str, str], gold: str) -> Scored:
        letter, where = fixed_choice(response, options)
        return Scored(1.0 if letter == gold else 0.0, {"letter": letter, "found": where})

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        order = self.order(task, trajectory.seed, setting)
        options = shown(list(task.metadata["options"]), order)
        gold = gold_letter(int(task.metadata["answer_index"]), order)
        response = trajectory.answers[0] if trajectory.answers else None
        draw_key = f"{task.id}|{trajectory.seed}"
        prediction = response
        if self.strip_answer_tag and response is not None:
            tag = _ANSWER.first(response)
            prediction = tag.strip() if tag is not None else response
        ref = await self.reference_score(task, prediction, options, gold, ctx, draw_key)
        fixed = self.fixed_score(task, response, options, gold)
        details: dict[str, Any] = {
            "fidelity": setting.fidelity, "scorer": self.scorer, "option_order": order, "gold": gold,
            "shuffled": self.shuffled(setting), "scores": {"reference": ref.value, "fixed": fixed.value},
            "reference": ref.details, "fixed": fixed.details,
        }
        if response is None:
            details["no_response"] = True
        if setting.fidelity == "reference":
            return Score(ref.value, details, error=ref.error)
        return Score(fixed.value, details)
