"""The VisualToolBench suite: settings, the hooks that shape the conversation, rubric scoring.

``reference`` fidelity reproduces what the reference harness sends (first image only, text-only
multi-turn history with golden answers, tool images in a following user message, the overflow
answer); ``fixed`` sends every image and carries the real history. Each difference is a named
switch in the setting's options, so it lands in the run manifest.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from fasteval.core.options import Opt
from fasteval.core.types import Message, Task, ToolCall, Trajectory
from fasteval.images import ImageError
from fasteval.images.decode import decode, probe, to_srgb8
from fasteval.images.render import png_bytes
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.reference_texts import Template
from fasteval.suites.visualtoolbench.metrics import aggregate as metrics_aggregate
from fasteval.suites.visualtoolbench.reference import score_reference_file
from fasteval.tools.base import ToolResult
from fasteval.tools.python_tools import SAVE_DIR
from sandbox import input_name

from .judge import JudgeError, JudgeModel, Verdict, judge_rubric
from .loader import iter_tasks
from .metrics import rubric_score
from .prompts import OVERFLOW_ANSWER, TOOL_NAMES, system_prompt_for, transformed_images_text
from .texts import REFERENCE_TOOL_NAMES, render_value, vtb_texts

FIDELITIES = ("reference", "fixed")
MAX_ROUNDS = 20
IMAGE_PROFILE = "jpeg85"
"""Every image (input and tool output) is sent as RGB JPEG quality 85, as the reference does."""


def fidelity_switches(fidelity: str) -> dict[str, Any]:
    """The named behaviours that differ between the two fidelity profiles."""
    reference = fidelity == "reference"
    return {
        "first_image_only": reference,
        "golden_history": reference,
        "tool_images_in_user_message": reference,
        "overflow_answer": OVERFLOW_ANSWER if reference else None,
        # Tools see only the current turn's images (input_0 is this turn's image), not every
        # image shown so far.
        "tool_images": "turn" if reference else "all",
        # The multi-turn no-tool baseline sends text only (the reference builds it without images).
        "multi_turn_no_tool_images": not reference,
        "judge_counting": "reference" if reference else "fixed",
    }


@register_suite
class VisualToolBenchSuite(Suite):
    """VisualToolBench (Scale AI): 1,204 single- and multi-turn tasks graded by weighted rubrics.

    Options: ``path`` (parquet, dataset.json or a folder of them), ``fidelity`` (reference |
    fixed), ``prompt_level`` (low | mid | high, default high), ``limit`` (first N rows).
    """

    name: ClassVar[str] = "visualtoolbench"
    options_schema = {
        "path": Opt("path", "the test parquet, a dataset.json or its folder", required=True, exists=True,
                    fetch="visualtoolbench"),
        "fidelity": Opt("str", choices=FIDELITIES), "prompt_level": Opt("str", "high, mid, low or none"),
        "limit": Opt("int"), "judge_timeout_s": Opt("float"), "rubrics": Opt("path"),
        "texts": Opt("str", "reference (the benchmark's own texts, default under fidelity reference) or own",
                     choices=("reference", "own")),
        "reference_repo": Opt("path", "checkout of the reference harness (default data/reference/<repo>)",
                              fetch="visualtoolbench-reference"),
        "exif_orientation": Opt("str", "ignore (reference) or apply", choices=("ignore", "apply")),
    }
    setting_options = {"prompt_level": Opt("str"), "first_image_only": Opt("bool"), "golden_history": Opt("bool"),
                       "tool_images_in_user_message": Opt("bool"), "overflow_answer": Opt("str"),
                       "tool_images": Opt("str", choices=("turn", "all")), "multi_turn_no_tool_images": Opt("bool"),
                       "judge_counting": Opt("str", choices=("reference", "fixed"))}

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """ARS/APR by domain, eval focus and turn case; tool-use metrics."""
        return metrics_aggregate(records)

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """The reference judge output (per-rubric verdicts); ``rubrics`` option supplies weights."""
        return score_reference_file(path, options.get("rubrics"))

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        self.fidelity = str(options.get("fidelity", "reference"))
        if self.fidelity not in FIDELITIES:
            raise ValueError(f"visualtoolbench: fidelity must be one of {FIDELITIES}, not {self.fidelity!r}")
        self.prompt_level = str(options.get("prompt_level", "high"))
        system_prompt_for(self.prompt_level, self.fidelity)  # fail early on an unknown level
        limit = options.get("limit")
        self.limit = int(limit) if limit is not None else None
        self.judge_timeout_s = float(options.get("judge_timeout_s", 600.0))
        self.texts = vtb_texts(options, self.fidelity)
        self._system_prompts = {level: str(self.texts.get(f"system.{level}")) for level in ("low", "mid", "high")}
        system_prompt_for(self.prompt_level, self.fidelity, self._system_prompts)
        self._aliases = {ref: ours for ours, ref in REFERENCE_TOOL_NAMES.items()} if self.texts.mode == "reference" else {}
        self._input_names: dict[str, str] = {}

    def text_manifest(self) -> dict[str, Any] | None:
        return self.texts.manifest()

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        """System prompt of the setting's level, the judge template, and the offered tools' entries."""
        level = str(setting.options.get("prompt_level", self.prompt_level))
        wanted = {f"tool.{n}" for n in (setting.tools or [])} | {"judge"}
        if setting.tools != [] and system_prompt_for(level, setting.fidelity, self._system_prompts) is not None:
            wanted.add(f"system.{level}")
        return [t for t in self.texts.listing() if t["name"] in wanted]

    def tool_specs(
        self, task: Task, turn_index: int, setting: Setting, specs: list[dict[str, Any]]
    ) -> list[dict[str, Any]] | None:
        """The text book's tool entries (reference names and wording), the image tool's description
        listing this turn's (or every shown) input file names, rebuilt every round as the reference does."""
        turns = task.turns[turn_index:turn_index + 1] if _tool_images(setting) == "turn" else task.turns[:turn_index + 1]
        refs: list[str] = []
        for turn in turns:
            shown = turn.images[:1] if _switch(setting, "first_image_only") else turn.images
            refs.extend(r for r in shown if r not in refs)
        fields = {"image_list": [self._input_name(i, ref) for i, ref in enumerate(refs)],
                  "processed_image_save_path": SAVE_DIR}
        out = []
        for spec in specs:
            name = spec["function"]["name"]
            entry = self.texts.values.get(f"tool.{name}")
            out.append(spec if entry is None else {"type": "function", "function": render_value(entry, fields)})
        return out

    def tool_alias(self, name: str, setting: Setting) -> str | None:
        return self._aliases.get(name)

    def _input_name(self, index: int, ref: str) -> str:
        """The sandbox's file name for an input (extension sniffed from the blob's first bytes, once)."""
        ext = self._input_names.get(ref)
        if ext is None:
            try:
                with open(self.blobs.path(ref), "rb") as f:
                    head = f.read(16)
            except OSError:
                head = b""
            ext = input_name(0, head)[len("input_0"):]
            self._input_names[ref] = ext
        return f"input_{index}{ext}"

    def load(self) -> Iterator[Task | LoadError]:
        path = self.options.get("path")
        if not path:
            raise ValueError("visualtoolbench: the 'path' option (parquet, dataset.json or folder) is required")
        mode = str(self.options.get("exif_orientation", "ignore" if self.fidelity == "reference" else "apply"))
        if mode not in ("ignore", "apply"):
            raise ValueError(f"visualtoolbench: exif_orientation must be 'ignore' or 'apply', not {mode!r}")
        seen: dict[str, str] = {}
        for item in iter_tasks(path, self.blobs, self.limit, allow_image_root=self.options.get("allow_image_root")):
            if isinstance(item, Task):
                for turn in item.turns:
                    turn.images = [same_pixels(self.blobs, ref, mode, seen) for ref in turn.images]
            yield item

    def default_settings(self) -> list[Setting]:
        options = {"prompt_level": self.prompt_level, "image_profile": IMAGE_PROFILE,
                   **fidelity_switches(self.fidelity),
                   # the reference keeps the model's saved images between calls of a trajectory
                   "tool_options": {"python_image_processing": {"persist_files": self.fidelity == "reference"}}}
        return [
            Setting(name="with-tool", tools=list(TOOL_NAMES), max_rounds=MAX_ROUNDS, fidelity=self.fidelity,
                    options=dict(options)),
            # The reference's no-tool baseline is one plain call without a system prompt.
            Setting(name="no-tool", tools=[], max_rounds=1, fidelity=self.fidelity,
                    options={**options, "prompt_level": "none"}),
        ]

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        return frozenset({"judge"})  # the rubric judge grades every answer

    def system_prompt(self, task: Task, setting: Setting, tool_specs: list[dict[str, Any]]) -> str | None:
        if setting.tools == []:
            return None
        level = str(setting.options.get("prompt_level", self.prompt_level))
        return system_prompt_for(level, setting.fidelity, self._system_prompts)

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        """Prompt text first, then the turn's images (only the first under ``first_image_only``;
        none in the multi-turn no-tool baseline unless ``multi_turn_no_tool_images``)."""
        turn = task.turns[turn_index]
        images = turn.images[:1] if _switch(setting, "first_image_only") else turn.images
        if setting.tools == [] and len(task.turns) > 1 and not _switch(setting, "multi_turn_no_tool_images"):
            images = []
        content: list[dict[str, Any]] = [{"type": "text", "text": turn.text}]
        content += [{"type": "image", "image": ref} for ref in images]
        return {"role": "user", "content": content}

    def history_before_turn(
        self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory
    ) -> list[Message] | None:
        """Under ``golden_history``: earlier turns as plain text, golden answers as the replies.

        The list holds no system message; the loop keeps its own in front.
        """
        if turn_index == 0 or not _switch(setting, "golden_history"):
            return None
        history: list[Message] = []
        for turn in task.turns[:turn_index]:
            history.append({"role": "user", "content": turn.text})
            history.append({"role": "assistant", "content": "" if turn.reference is None else str(turn.reference)})
        return history

    def tool_result_messages(self, call: ToolCall, result: ToolResult, setting: Setting) -> list[Message] | None:
        """Under ``tool_images_in_user_message``: the tool message, then a user message with new images."""
        if not _switch(setting, "tool_images_in_user_message"):
            return None
        messages: list[Message] = [
            {"role": "tool", "tool_call_id": call.id, "name": call.name, "content": result.output}
        ]
        if call.name == "python_image_processing" and result.images:
            content: list[dict[str, Any]] = [{"type": "text", "text": transformed_images_text(call.id)}]
            content += [{"type": "image", "image": ref} for ref in result.images]
            messages.append({"role": "user", "content": content})
        return messages

    def answer_on_max_rounds(self, task: Task, turn_index: int, setting: Setting) -> str | None:
        overflow = setting.options.get("overflow_answer")
        return str(overflow) if overflow else None

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        judge = ctx.services.get("judge")
        if judge is None:
            return Score(None, error="judge_error: no judge model configured (services['judge'])")
        template = self.texts.get("judge")
        counting = str(setting.options.get("judge_counting", fidelity_switches(setting.fidelity)["judge_counting"]))
        return await score_task(task, trajectory, judge, timeout_s=self.judge_timeout_s, template=template,
                                counting=counting)


def same_pixels(blobs: BlobStore, ref: str, mode: str, seen: dict[str, str]) -> str:
    """An image whose EXIF orientation is baked in (``apply``) or dropped (``ignore``, the reference,
    which never rotates), so the model's encoder and the tool's file hold the same pixels.

    Images without an orientation tag (nearly all) keep their bytes; tagged ones become PNG.
    """
    if ref in seen:
        return seen[ref]
    out = ref
    try:
        data = blobs.get(ref)
        if probe(data).orientation != 1:
            img = decode(data) if mode == "apply" else to_srgb8(_open_unrotated(data))
            out = blobs.put(png_bytes(img))
    except (ImageError, OSError, KeyError):
        out = ref  # unreadable images fail later, where the error lands on the record
    seen[ref] = out
    return out


def _open_unrotated(data: bytes) -> Any:
    import pyvips

    return pyvips.Image.new_from_buffer(data, "")


def _switch(setting: Setting, name: str) -> bool:
    if name in setting.options:
        return bool(setting.options[name])
    return bool(fidelity_switches(setting.fidelity)[name])


def _tool_images(setting: Setting) -> str:
    return str(setting.options.get("tool_images", fidelity_switches(setting.fidelity)["tool_images"]))


async def score_task(task: Task, trajectory: Trajectory, judge: JudgeModel, *, timeout_s: float = 600.0,
                     template: Template | None = None, counting: str = "fixed") -> Score:
    """Judge every rubric of every turn concurrently and pool them into ARS and APR.

    A turn without a final answer fails its rubrics without a judge call; any rubric the judge
    could not decide makes the whole Score a ``judge_error`` (partial verdicts kept in details).
    """
    rubrics: list[list[dict[str, Any]]] = task.metadata["rubrics"]
    slots: list[tuple[int, dict[str, Any]]] = []
    calls: list[Any] = []
    for t, turn in enumerate(task.turns):
        answer = trajectory.answers[t] if t < len(trajectory.answers) else None
        for rubric in rubrics[t]:
            slots.append((t, rubric))
            if answer is None:
                calls.append(_no_answer())
            else:
                golden = "" if turn.reference is None else str(turn.reference)
                calls.append(judge_rubric(judge, turn.text, golden, str(rubric["description"]), answer,
                                          timeout_s=timeout_s, template=template, counting=counting))
    results = await asyncio.gather(*calls, return_exceptions=True)

    verdicts: list[list[dict[str, Any]]] = [[] for _ in task.turns]
    errors: list[str] = []
    judged = 0
    for (t, rubric), res in zip(slots, results, strict=True):
        row: dict[str, Any] = {"rubric_id": rubric["id"], "weight": rubric["weight"]}
        if isinstance(res, Verdict):
            row |= {"met": res.met, "reason": res.reason}
            judged += res.reason != _NO_ANSWER
        elif isinstance(res, Exception):
            kind = "" if isinstance(res, JudgeError) else f"{type(res).__name__}: "
            errors.append(f"turn {t} rubric {rubric['id']}: {kind}{res}")
            row |= {"met": None, "reason": None, "error": str(res)}
        else:
            raise res  # cancellation and other BaseExceptions are not ours to swallow
        verdicts[t].append(row)

    details: dict[str, Any] = {"verdicts": verdicts, "judge_calls": judged}
    if errors:
        return Score(None, details=details, error=f"judge_error: {len(errors)} rubric(s) undecided; {errors[0]}")
    summary = rubric_score([[(float(v["weight"]), v["met"]) for v in turn] for turn in verdicts])
    return Score(summary["apr"], details={**summary, **details})


_NO_ANSWER = "no final answer for this turn"


async def _no_answer() -> Verdict:
    return Verdict(met=False, reason=_NO_ANSWER)
