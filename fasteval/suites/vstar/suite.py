"""The V* Bench suite: 191 questions over ~2K SA-1B images, two categories.

Scorers: ``vlmevalkit`` (``can_infer``, then the judge fallback; §1.3), ``lmms-eval``
(``extract_answer_letter``) or ``deepeyes``. Under ``fidelity: reference`` the options keep the
release's order, so with the official folders the answer is always A, as DeepEyes' V* script
sends it; under ``fixed`` they are shuffled per seed. Under reference the prompt is the chosen
scorer's harness layout (VLMEvalKit's ``build_prompt``, lmms-eval's ``vstar_doc_to_text``).

A setting may run a harness's own text tool protocol (``options: {protocol: deepeyes-text}`` or
``mini-o3-grounding``): the system prompt, the call format, the crop and the feedback turn are the
harness's (``fasteval.suites.protocol_texts``); DeepEyes' user text with it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from fasteval.core.options import Opt
from fasteval.core.types import Task
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, ScoreContext, Setting, register_suite
from fasteval.suites.mcq import aggregate as agg
from fasteval.suites.mcq.judge import EXACT_MATCHING, vlmevalkit_option
from fasteval.suites.mcq.matching import lmms_eval_letter
from fasteval.suites.mcq.prompt import choice_prompt
from fasteval.suites.mcq.suite import ChoiceSuite, Scored, common_options
from fasteval.suites.protocol_texts import ProtocolBooks, deepeyes_user_prompt, protocol_option
from fasteval.suites.vstar.deepeyes import deepeyes_score, deepeyes_texts
from fasteval.suites.vstar.lmms_eval_prompt import generation_params, lmms_eval_prompt, lmms_eval_texts
from fasteval.suites.vstar.loader import load_vstar
from fasteval.suites.vstar.reference_file import score_reference_file
from fasteval.tools.text_protocols import DeepEyesProtocol, MiniO3Protocol, TextProtocol

SCORERS = ("vlmevalkit", "lmms-eval", "deepeyes")
GENERATIONS = ("ours", "lmms-eval")


@register_suite
class VStar(ChoiceSuite):
    """V* Bench: 191 questions on small details of ~2K images (attributes, spatial relations).

    Options: ``common_options``; ``scorer`` vlmevalkit (default), lmms-eval or deepeyes;
    ``generation`` ours (default) or lmms-eval (its task's generation_kwargs: 16 tokens);
    ``deepeyes_repo``/``mini_o3_repo``: the checkouts holding the protocols' texts.
    Setting option ``protocol``: deepeyes-text or mini-o3-grounding.
    """

    name = "vstar"
    scorers = SCORERS
    vlmevalkit_layout = "ImageMCQDataset"
    options_schema = {
        **common_options("vstar", SCORERS),
        "generation": Opt("str", "ours (default: max_tokens, never capped) or lmms-eval (its generation_kwargs, "
                          "max_new_tokens 16: cuts thinking models off; scorer lmms-eval only)", choices=GENERATIONS),
        "deepeyes_repo": Opt("path", "DeepEyes checkout for protocol deepeyes-text (default: reference_repo under "
                             "scorer deepeyes, else data/reference/DeepEyes)", fetch="deepeyes-reference"),
        "mini_o3_repo": Opt("path", "Mini-o3 checkout for protocol mini-o3-grounding (default data/reference/Mini-o3)",
                            fetch="mini-o3-reference"),
    }
    setting_options = {"protocol": protocol_option()}

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        self.generation = str(options.get("generation", "ours"))
        if self.generation not in GENERATIONS:
            raise ValueError(f"vstar: generation must be one of {GENERATIONS}, got {self.generation!r}")
        if self.generation == "lmms-eval" and options.get("scorer") != "lmms-eval":
            raise ValueError("vstar: generation lmms-eval goes with scorer lmms-eval")
        if self.generation == "lmms-eval" and options.get("texts") == "own":
            raise ValueError("vstar: generation lmms-eval reads the task's generation_kwargs from the lmms-eval "
                             "checkout, so not with texts: own")
        deepeyes = options.get("scorer") == "deepeyes"
        role = str(options.get("judge") or "judge")
        # DeepEyes' judge is its own (texts from its checkout), not VLMEvalKit's fallback.
        super().__init__({**options, "judge": EXACT_MATCHING} if deepeyes else options, blobs)
        self.deepeyes_book = deepeyes_texts(options, self.fidelity) if deepeyes else None
        if deepeyes:
            self.judge_role = role
        lmms = self.scorer == "lmms-eval" and (self.fidelity == "reference" or self.generation == "lmms-eval")
        self.lmms_book = lmms_eval_texts(options, "reference" if self.generation == "lmms-eval" else self.fidelity) \
            if lmms else None
        deepeyes_repo = options.get("deepeyes_repo") or (options.get("reference_repo") if deepeyes else None)
        self.protocols = ProtocolBooks("vstar", options, {DeepEyesProtocol.name: deepeyes_repo,
                                                          MiniO3Protocol.name: options.get("mini_o3_repo")})

    def text_manifest(self) -> dict[str, Any] | None:
        """The scorer's texts, then lmms-eval's prompt parts and the protocols' texts read so far."""
        books = [b.manifest() for b in (self.deepeyes_book, self.lmms_book) if b is not None]
        base = books[0] if books else super().text_manifest()
        extra = [{**t, "reference_repo": m["reference_repo"], "reference_commit": m["reference_commit"]}
                 for m in books[1:] for t in m["texts"]] + self.protocols.manifest_texts()
        if base is None:
            return {"mode": self.protocols.mode, "texts": extra} if extra else None
        return {**base, "texts": list(base["texts"]) + extra}

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        base = self.deepeyes_book.listing() if self.deepeyes_book else super().text_listing(setting)
        return base + (self.lmms_book.listing() if self.lmms_book else []) + self.protocols.listing(setting)

    def applies_to(self, task: Task, setting: Setting) -> bool:
        # The setting's protocol texts are read here, at planning, so a missing checkout stops the sweep early.
        self.protocols.check(setting)
        return True

    def text_protocol(self, task: Task, setting: Setting) -> TextProtocol | None:
        return self.protocols.protocol(setting)

    def request_params(self, setting: Setting, model: str) -> dict[str, Any]:
        if self.generation == "lmms-eval" and self.lmms_book is not None:
            return generation_params(self.lmms_book)
        return super().request_params(setting, model)

    def prompt_text(self, task: Task, options: dict[str, str], setting: Setting) -> str:
        protocol = self.protocols.name_of(setting)
        if protocol == DeepEyesProtocol.name:
            return deepeyes_user_prompt(self.protocols.book(protocol), task.turns[0].text, options)
        if protocol == MiniO3Protocol.name:  # its system prompt carries the tool; the question in our layout
            return choice_prompt(task.turns[0].text, options, hint=str(task.metadata.get("hint") or ""))
        if self.lmms_book is not None and setting.fidelity == "reference":
            in_order = list(options.values()) == list(task.metadata["options"])
            raw = task.metadata.get("lmms_text") if in_order else None
            return lmms_eval_prompt(self.lmms_book, task.turns[0].text, options, raw)
        return super().prompt_text(task, options, setting)

    def load(self) -> Iterator[Task | LoadError]:
        return load_vstar(self.path, self.blobs, limit=self.limit)

    async def reference_score(self, task: Task, response: str | None, options: dict[str, str], gold: str,
                              ctx: ScoreContext, draw_key: str) -> Scored:
        text = "" if response is None else response
        if self.deepeyes_book is not None:
            value, found, error = await deepeyes_score(text, options, gold, task.turns[0].text,
                                                       judge=ctx.services.get(self.judge_role),
                                                       texts=self.deepeyes_book)
            return Scored(value, found, error)
        if self.scorer == "lmms-eval":
            letter = lmms_eval_letter(text)
            return Scored(1.0 if letter == gold else 0.0, {"letter": letter})
        judge = ctx.services.get(self.judge_role) if self.judge_book else None
        matched = await vlmevalkit_option(text, options, task.turns[0].text, judge=judge, texts=self.judge_book,
                                          version=self.matcher, draw_key=draw_key)
        details: dict[str, Any] = {"letter": matched.letter, "matched": matched.how}
        if matched.judge_replies:
            details["judge_replies"] = matched.judge_replies
        if self.judge_book and judge is None:
            details["judge_missing"] = True  # VLMEvalKit falls back to exact matching silently; we say so
        return Scored(1.0 if matched.letter == gold else 0.0, details)

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Overall (micro mean over questions) and per category, reference and fixed side by side."""
        return agg.by_category(records, "category")

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        return score_reference_file(Path(path), fidelity, options)
