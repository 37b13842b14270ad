"""The VisualProbe suite (``level: easy|medium|hard|all``): open-ended questions on
high-resolution images, judged by an LLM, reported as Avg@k over the seeds (Mini-o3's
``val_n = 32``: run 32 seeds for the paper's number).

Settings: ``direct`` and ``zoom`` (image_zoom_in_tool, 12 rounds as Mini-o3's
``val_max_generation_round``). Sampling at temperature 1.0 by default, as Mini-o3's validation
rollouts.

Mini-o3's own protocol: a setting with ``options: {protocol: mini-o3-grounding}`` (e.g.
``{name: grounding, extends: zoom, tools: [], options: {protocol: mini-o3-grounding}}``) has the
model write ``<grounding>`` calls on the original image or earlier observations, with Mini-o3's
system prompt and turns read from the checkout (``reference_repo``), and the user turn the bare
question, as Mini-o3 sends ``problem``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson

from fasteval.core.options import Opt
from fasteval.core.types import Message, Task, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.suite import CODE_TOOL, CODE_TOOL_OPTIONS, DEFAULT_MAX_TOKENS, ZOOM_TOOL
from fasteval.suites.option_checks import FIDELITIES, fidelity_option, limit_option
from fasteval.suites.protocol_texts import ProtocolBooks, protocol_option
from fasteval.suites.visualprobe import judge as probe_judge
from fasteval.suites.visualprobe.judge import fixed_answer, judge_answer, judge_texts, reference_answer
from fasteval.suites.visualprobe.loader import LEVELS, load_visualprobe
from fasteval.tools.text_protocols import MiniO3Protocol, TextProtocol

ZOOM_ROUNDS = 12
DIRECT_INSTRUCTION = "Give your final answer inside <answer></answer>."
ZOOM_INSTRUCTION = ("You may call image_zoom_in_tool to look closer at a region of the original image. "
                    "Think first, then give your final answer inside <answer></answer>.")
CODE_INSTRUCTION = ("You may run Python code on the image with python_image_processing (crop, enlarge, enhance). "
                    "Think first, then give your final answer inside <answer></answer>.")


def _assistant_turns(trajectory: Trajectory) -> list[str]:
    return [m["content"] for m in trajectory.messages
            if m.get("role") == "assistant" and isinstance(m.get("content"), str) and m["content"]]


@register_suite
class VisualProbe(Suite):
    """VisualProbe (Mini-o3): open questions on high-resolution images, LLM-judged, Avg@k over seeds.

    Options: path, level, fidelity, limit, judge (role, default "judge"), texts, reference_repo (a
    Mini-o3 checkout), image_root, max_tokens, temperature.
    """

    name = "visualprobe"
    options_schema = {
        "path": Opt("path", "val.json, or the folder holding the level folders", required=True, exists=True,
                    fetch="visualprobe"),
        "level": Opt("str", "easy, medium, hard or all (default all)", choices=LEVELS),
        "fidelity": Opt("str", "reference or fixed (default fixed)", choices=FIDELITIES),
        "limit": Opt("int", "first N tasks"),
        "judge": Opt("str", "the judge role's name (default judge)"),
        "texts": Opt("str", "judge texts: reference (Mini-o3's) or own", choices=("reference", "own")),
        "reference_repo": Opt("path", "checkout of Mini-o3 holding the judge and protocol texts",
                              fetch="mini-o3-reference"),
        "image_root": Opt("path", "BASE_IMAGE_DIR the rows' image paths start from"),
        "max_tokens": Opt("int", f"output budget per round (default {DEFAULT_MAX_TOKENS})"),
        "temperature": Opt("float", "sampling temperature (default 1.0, Mini-o3's validation rollouts)"),
    }
    setting_options = {"protocol": protocol_option((MiniO3Protocol.name,))}

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        path = options.get("path")
        if not isinstance(path, str) or not path:
            raise ValueError("visualprobe: option 'path' (val.json or its folder) is required")
        self.path = path
        self.level = str(options.get("level", "all"))
        if self.level not in LEVELS:
            raise ValueError(f"visualprobe: level must be one of {LEVELS}, got {self.level!r}")
        self.fidelity = fidelity_option(options, "visualprobe")
        self.limit = limit_option(options, "visualprobe")
        self.judge_role = str(options.get("judge") or "judge")
        self.max_tokens = int(options.get("max_tokens", DEFAULT_MAX_TOKENS))
        self.temperature = float(options.get("temperature", 1.0))
        self.texts = judge_texts(options, self.fidelity)
        repo = options.get("reference_repo") or probe_judge.DEFAULT_REFERENCE_REPO
        self.protocols = ProtocolBooks("visualprobe", options, {MiniO3Protocol.name: str(repo)},
                                       names=(MiniO3Protocol.name,))

    def text_manifest(self) -> dict[str, Any] | None:
        manifest = self.texts.manifest()
        return {**manifest, "texts": list(manifest["texts"]) + self.protocols.manifest_texts()}

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        return self.texts.listing() + self.protocols.listing(setting)

    def applies_to(self, task: Task, setting: Setting) -> bool:
        # The setting's protocol texts are read here, at planning, so a missing checkout stops the sweep early.
        self.protocols.check(setting)
        return True

    def roles_needed(self, setting: Setting) -> frozenset[str]:
        return frozenset({self.judge_role})  # Mini-o3's judge grades every answer

    def text_protocol(self, task: Task, setting: Setting) -> TextProtocol | None:
        return self.protocols.protocol(setting)

    def load(self) -> Iterator[Task | LoadError]:
        root = self.options.get("image_root")
        return load_visualprobe(self.path, self.blobs, level=self.level, limit=self.limit,
                                image_root=str(root) if root else None)

    def default_settings(self) -> list[Setting]:
        return [Setting(name="direct", tools=[], max_rounds=1, fidelity=self.fidelity),
                Setting(name="zoom", tools=[ZOOM_TOOL], max_rounds=ZOOM_ROUNDS, fidelity=self.fidelity),
                Setting(name="code", tools=[CODE_TOOL], max_rounds=ZOOM_ROUNDS, fidelity=self.fidelity,
                        options={"tool_options": CODE_TOOL_OPTIONS})]

    def request_params(self, setting: Setting, model: str) -> dict[str, Any]:
        return {"max_tokens": self.max_tokens, "temperature": self.temperature}

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        if self.protocols.name_of(setting) is not None:  # Mini-o3 sends ``problem``: the image, then the question
            return {"role": "user", "content": [{"type": "image", "image": ref} for ref in task.turns[0].images]
                    + [{"type": "text", "text": task.turns[0].text}]}
        tools = self.tools(task, setting)
        instruction = ZOOM_INSTRUCTION if ZOOM_TOOL in tools else CODE_INSTRUCTION if tools else DIRECT_INSTRUCTION
        content: list[dict[str, Any]] = [{"type": "image", "image": ref} for ref in task.turns[0].images]
        content.append({"type": "text", "text": f"{task.turns[0].text}\n{instruction}"})
        return {"role": "user", "content": content}

    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        judge = ctx.services.get(self.judge_role)
        if judge is None:
            return Score(None, {"fidelity": setting.fidelity}, error=f"judge_error: no {self.judge_role!r} role")
        final = trajectory.answers[0] if trajectory.answers else None
        answers = {"reference": reference_answer(_assistant_turns(trajectory)), "fixed": fixed_answer(final)}
        problem, solution = str(task.metadata.get("problem") or task.turns[0].text), str(task.reference)
        scores: dict[str, float | None] = {}
        details: dict[str, Any] = {"fidelity": setting.fidelity, "answers": answers}
        error = None
        for fid in ("reference", "fixed"):
            answer = answers[fid]
            if answer is None:  # no <answer>: 0 without a judge call (both rules)
                scores[fid] = 0.0
                continue
            verdict = await judge_answer(judge, self.texts, problem, solution, answer, fidelity=fid)
            scores[fid] = verdict.value
            details[f"{fid}_judge_replies"] = verdict.replies
            if verdict.error and fid == setting.fidelity:
                error = verdict.error
        details["scores"] = scores
        return Score(scores[setting.fidelity], details, error=error)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Avg@k per level (k = seeds run): the mean over every rollout, both fidelities."""
        return agg.by_category(records, "data_source")

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """Mini-o3's ``stats.json``: per item Avg@k = mean rollout ``acc_reward`` (its
        ``pass_at_k``), per ``data_source`` the mean over items × rollouts. Scores come from the
        file's own judge rewards; no model is called."""
        data = orjson.loads(Path(path).read_bytes())
        if not isinstance(data, list):
            raise ValueError(f"{path}: expected Mini-o3's stats.json (a list of items)")
        level = str(options.get("level", "all"))
        items: dict[str, float] = {}
        by: dict[str, list[float]] = defaultdict(list)
        for n, item in enumerate(data):
            if not isinstance(item, dict) or not isinstance(item.get("rollouts"), list) or not item["rollouts"]:
                raise ValueError(f"{path}: item {n} has no rollouts")
            source = str(item.get("data_source", "unknown"))
            if level != "all" and not source.endswith(level):
                continue
            rewards = [float(r.get("acc_reward", 0.0) == 1.0) if fidelity == "reference"
                       else float(r.get("acc_reward", 0.0)) for r in item["rollouts"] if isinstance(r, dict)]
            key = f"{source}/{item.get('doc_id', n)}"
            items[key] = sum(rewards) / len(rewards)
            by[source].extend(rewards)
        if not items:
            raise ValueError(f"{path}: no items at level {level!r}")
        return {"items": items, "by_category": {k: sum(v) / len(v) for k, v in sorted(by.items())}}
