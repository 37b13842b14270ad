"""The VistaHop suite: settings, text tool-call prompts, tool-result format and scoring.

VistaArena speaks the text protocol (Qwen-style ``<tool_call>`` in the reply, results back as
a user message wrapped in ``<tool_response>``), so every setting uses ``tool_protocol="text"``
and this module supplies the prompts and the result messages; the engine parses the calls.
Fidelity switches are named in ``FIDELITY_SWITCHES`` and land in ``Setting.options`` so each
record and the run manifest say which behaviour produced them.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, ClassVar

from fasteval.core.options import Opt
from fasteval.core.tagged import Tagged
from fasteval.core.types import Message, Task, ToolCall, Trajectory
from fasteval.runfolder.blobs import BlobStore
from fasteval.suites.base import LoadError, Score, ScoreContext, Setting, Suite, register_suite
from fasteval.suites.row_checks import image_roots
from fasteval.suites.vistahop import scoring
from fasteval.suites.vistahop.loader import IMAGE_SEARCH_MAX_RESULTS, LoaderConfig, load_tasks
from fasteval.suites.vistahop.metrics import aggregate as metrics_aggregate
from fasteval.suites.vistahop.metrics import score_reference_file
from fasteval.suites.vistahop.prompts import DEFAULT_FORMAT_INSTRUCTION, DEFAULT_SYSTEM_PROMPT
from fasteval.suites.vistahop.texts import unwrap, vistahop_texts
from fasteval.tools.base import ToolResult

SEARCH_TOOLS = ["text_search_tool", "image_search_tool"]
# Reference tools.yaml order: crop first, then text search, then image search.
SEARCH_CROP_TOOLS = ["image_zoom_in_tool", "text_search_tool", "image_search_tool"]

PRESETS: dict[str, dict[str, int]] = {
    "paper": {"max_rounds": 10, "text_search_top_k": 3},
    "script": {"max_rounds": 20, "text_search_top_k": 10},  # run_eval_example.sh / .env
    "cli": {"max_rounds": 50, "text_search_top_k": 10},  # run_vistahop_eval.py defaults
}
"""Round budget and text-search depth: the paper's values and the public code's two defaults."""

FIDELITY_SWITCHES: dict[str, dict[str, bool]] = {
    "reference": {"all_images": False, "judge_on_max_rounds": False, "judge_no_verdict_is_no": True,
                  "non_object_tool_call_is_error": True, "tool_call_arguments_only": True},
    "fixed": {"all_images": True, "judge_on_max_rounds": True, "judge_no_verdict_is_no": False,
              "non_object_tool_call_is_error": False, "tool_call_arguments_only": False},
}
"""all_images: show every image of a record (the runner shows only the first).
judge_on_max_rounds: judge the last assistant text when the budget runs out (the paper's
MaxRounds returns no answer, which scores 0).
judge_no_verdict_is_no: a judge reply without <judge>Yes|No</judge> is a No for that gold and
the next gold is judged (reference); off: retry, then judge_error.
non_object_tool_call_is_error: a <tool_call> whose JSON is not an object (a list, a number) is
a sample error scored 0, as the reference's parser crashes on it; off: it is the final answer.
tool_call_arguments_only: a call's arguments are read from "arguments" alone (the runner), not
from "parameters" as a fallback."""

REFERENCE_SAMPLING: dict[str, Any] = {"temperature": 0.7, "top_p": 0.8, "top_k": 20, "presence_penalty": 1.5}
"""The reference runner's sampling (the Qwen3-VL recommendation); ``sampling`` / ``sampling_by_model`` override it."""

_KNOWN_OPTIONS = frozenset({
    "path", "root", "dataset", "fidelity", "limit", "max_rounds", "preset", "text_search_top_k",
    "image_search_max_results", "judge_retries", "system_prompt", "format_instruction", "config",
    "all_images", "judge_on_max_rounds", "settings", "allow_image_root", "texts", "reference_repo",
    "judge_no_verdict_is_no", "non_object_tool_call_is_error", "sampling", "sampling_by_model", "require_levels",
    "level_field", "tool_call_arguments_only",
})


@register_suite
class VistaHopSuite(Suite):
    """VistaHop / VistaArena: multi-hop visual deep search, judged by a multimodal model."""

    name: ClassVar[str] = "vistahop"
    options_schema = {
        "path": Opt("path", "subset1.parquet, or the runner's JSON/JSONL records", required=True, exists=True,
                    fetch="vistahop"),
        "root": Opt("path", "folder the records' image paths are relative to (default: path's folder)"),
        "dataset": Opt("str"), "fidelity": Opt("str", choices=tuple(FIDELITY_SWITCHES)), "limit": Opt("int"),
        "max_rounds": Opt("int"), "preset": Opt("str", choices=tuple(PRESETS)), "text_search_top_k": Opt("int"),
        "image_search_max_results": Opt("int"), "judge_retries": Opt("int"), "system_prompt": Opt("str"),
        "format_instruction": Opt("str"), "config": Opt("path", "the runner's dataset config JSON"),
        "all_images": Opt("bool"), "judge_on_max_rounds": Opt("bool"),
        "settings": Opt("str_list", "default settings to keep"),
        "texts": Opt("str", "reference (the benchmark's own texts, default under fidelity reference) or own",
                     choices=("reference", "own")),
        "reference_repo": Opt("path", "checkout of the reference harness (default data/reference/<repo>)",
                              fetch="vistahop-reference"),
        "judge_no_verdict_is_no": Opt("bool"), "non_object_tool_call_is_error": Opt("bool"),
        "tool_call_arguments_only": Opt("bool"),
        "sampling": Opt("dict", "sampling parameters sent with every request"),
        "sampling_by_model": Opt("dict", "model name -> sampling parameters", values=Opt("dict")),
        "require_levels": Opt("bool", "stop at a record without level fields"),
        "level_field": Opt("str", "the one field holding evidence steps or the level"),
    }
    setting_options = {"all_images": Opt("bool"), "judge_on_max_rounds": Opt("bool"), "text_search_top_k": Opt("int"),
                       "image_search_max_results": Opt("int"), "judge_retries": Opt("int"), "direct": Opt("bool"),
                       "judge_no_verdict_is_no": Opt("bool"), "non_object_tool_call_is_error": Opt("bool"),
                       "tool_call_arguments_only": Opt("bool")}

    @classmethod
    def aggregate(cls, records: list[dict[str, Any]]) -> dict[str, Any] | None:
        """Pass@1 over runs, L1/L2/L3, calls, rounds, utilisation, terminations."""
        return metrics_aggregate(records)

    @classmethod
    def score_file(cls, path: Path, fidelity: str, options: dict[str, Any]) -> dict[str, Any]:
        """The public runner's results.jsonl (its em/llm scores)."""
        return score_reference_file(path)

    def __init__(self, options: dict[str, Any], blobs: BlobStore) -> None:
        super().__init__(options, blobs)
        unknown = sorted(set(options) - _KNOWN_OPTIONS)
        if unknown:
            raise ValueError(f"vistahop: unknown options {unknown}; known: {sorted(_KNOWN_OPTIONS)}")
        if "path" not in options:
            raise ValueError("vistahop: option 'path' (JSON, JSONL or parquet file) is required")
        self.fidelity = str(options.get("fidelity", "reference"))
        if self.fidelity not in FIDELITY_SWITCHES:
            raise ValueError(f"vistahop: fidelity must be one of {sorted(FIDELITY_SWITCHES)}")
        preset_name = str(options.get("preset", "paper"))
        if preset_name not in PRESETS:
            raise ValueError(f"vistahop: preset must be one of {sorted(PRESETS)}")
        preset = PRESETS[preset_name]
        self.max_rounds = int(options.get("max_rounds", preset["max_rounds"]))
        self.top_k = int(options.get("text_search_top_k", preset["text_search_top_k"]))
        self.switches = {k: bool(options.get(k, v)) for k, v in FIDELITY_SWITCHES[self.fidelity].items()}
        base, fmt = _dataset_prompts(options)
        self.base_system_prompt = base
        self.format_instruction = fmt
        self.texts = vistahop_texts(options, self.fidelity)
        default_sampling = REFERENCE_SAMPLING if self.fidelity == "reference" else {}
        self.sampling = dict(options.get("sampling", default_sampling) or {})
        by_model = options.get("sampling_by_model") or {}
        if not isinstance(by_model, dict) or not all(isinstance(v, dict) for v in by_model.values()):
            raise ValueError("vistahop: sampling_by_model must map model names to parameter objects")
        self.sampling_by_model: dict[str, dict[str, Any]] = by_model

    def text_manifest(self) -> dict[str, Any] | None:
        return self.texts.manifest()

    def text_listing(self, setting: Setting) -> list[dict[str, Any]]:
        """The judge texts, the error strings, and in tool settings the tool system prompt as sent."""
        listing = [t for t in self.texts.listing()
                   if t["role"] in ("judge_prompt", "tool_error")
                   or t["name"] in {f"tool.{n}" for n in (setting.tools or [])}]
        if not _direct(setting):
            from fasteval.tools.base import TOOLS

            specs = [TOOLS[n]().spec() for n in setting.tools or []]
            source = next(t["source"] for t in self.texts.listing() if t["name"] == "tools_section")
            listing.insert(0, {"role": "system_prompt", "name": "tool_system_prompt",
                               "text": self.system_prompt(Task(id="-", turns=[]), setting, specs), "source": source})
        return listing

    def request_params(self, setting: Setting, model: str) -> dict[str, Any]:
        """The reference's sampling (or the ``sampling`` option), replaced per model by ``sampling_by_model``."""
        return dict(self.sampling_by_model.get(model, self.sampling))

    # --- loading -------------------------------------------------------------------------
    def loader_config(self) -> LoaderConfig:
        path = Path(self.options["path"])
        limit = self.options.get("limit")
        return LoaderConfig(
            path=path,
            root=Path(self.options.get("root") or path.parent),
            dataset=str(self.options.get("dataset", "vistahop")),
            limit=None if limit is None else int(limit),
            all_images=self.switches["all_images"],
            image_search_max_results=int(self.options.get("image_search_max_results", IMAGE_SEARCH_MAX_RESULTS)),
            image_roots=image_roots(self.options, Path(self.options.get("root") or path.parent)),
            require_levels=bool(self.options.get("require_levels", True)),
            level_field=str(self.options["level_field"]) if self.options.get("level_field") else None,
        )

    def load(self) -> Iterator[Task | LoadError]:
        """Tasks in file order; ids ``{dataset}-{row}`` match the reference's sample ids."""
        return load_tasks(self.loader_config(), self.blobs)

    # --- settings ------------------------------------------------------------------------
    def default_settings(self) -> list[Setting]:
        """No-Tool, Search and Search+Crop (paper Table 3), or those named in option ``settings``."""
        common: dict[str, Any] = {
            **self.switches,
            "text_search_top_k": self.top_k,
            "image_search_max_results": int(self.options.get("image_search_max_results", IMAGE_SEARCH_MAX_RESULTS)),
            "judge_retries": int(self.options.get("judge_retries", 3)),
            # The runner sends the model PNGs after Qwen smart_resize (factor 32, 65,536..8,294,400 px).
            "image_profile": "png_smart",
            "tool_options": {
                "text_search_tool": {"top_k": self.top_k},
                "image_search_tool": {"max_results": int(self.options.get("image_search_max_results", 5))},
            },
        }
        settings = [
            Setting(name="no_tool", tools=[], max_rounds=1, fidelity=self.fidelity, tool_protocol="text",
                    options={**common, "direct": True}),
            Setting(name="search", tools=list(SEARCH_TOOLS), max_rounds=self.max_rounds, fidelity=self.fidelity,
                    tool_protocol="text", options={**common, "direct": False}),
            Setting(name="search_crop", tools=list(SEARCH_CROP_TOOLS), max_rounds=self.max_rounds,
                    fidelity=self.fidelity, tool_protocol="text", options={**common, "direct": False}),
        ]
        wanted = self.options.get("settings")
        if wanted:
            settings = [s for s in settings if s.name in set(wanted)]
        return settings

    # --- prompts -------------------------------------------------------------------------
    def roles_needed(self, setting: Setting) -> frozenset[str]:
        return frozenset({"judge"})  # every answer exact match misses goes to the judge

    def system_prompt(self, task: Task, setting: Setting, tool_specs: list[dict[str, Any]]) -> str | None:
        """Direct mode: the dataset prompt alone (if any). Tool mode: base + blank line + '# Tools'."""
        if _direct(setting) or not tool_specs:
            return self.base_system_prompt or None
        # One JSON line per schema, json.dumps(ensure_ascii=False) as the reference renders tools.yaml.
        schemas = [self.texts.values.get(f"tool.{spec['function']['name']}", spec) for spec in tool_specs]
        lines = "\n".join(json.dumps(schema, ensure_ascii=False) for schema in schemas)
        section = self.texts.render("tools_section", tool_def_str=lines)
        return f"{self.base_system_prompt or DEFAULT_SYSTEM_PROMPT}\n\n{section}"

    def user_message(self, task: Task, turn_index: int, setting: Setting, trajectory: Trajectory) -> Message:
        """Image(s) first, then the question; direct mode appends the format instruction."""
        turn = task.turns[turn_index]
        images = list(task.metadata.get("all_images") or turn.images) if setting.options.get("all_images") \
            else turn.images[:1]
        text = turn.text
        if _direct(setting) and self.format_instruction:
            text = f"{text}\n{self.format_instruction}"
        content: list[dict[str, Any]] = [{"type": "image", "image": ref} for ref in images]
        content.append({"type": "text", "text": text})
        return {"role": "user", "content": content}

    def tool_result_messages(self, call: ToolCall, result: ToolResult, setting: Setting) -> list[Message] | None:
        """One user message ``<tool_response>\\n...\\n</tool_response>`` with images in place;
        the error strings are the text book's (the reference's under ``texts: reference``)."""
        if call.name not in (setting.tools or []):
            result = ToolResult.fail(unwrap(self.texts.render("error.unknown_tool", tool_name=call.name)))
        elif call.name == "image_zoom_in_tool" and result.status == "error":
            # The reference's only crop error; anything else would crash its sample.
            result = ToolResult.fail(unwrap(self.texts.render("error.invalid_bbox")))
        elif call.name == "image_search_tool" and result.extra.get("results") == 0:
            result = ToolResult(status="ok", output=unwrap(self.texts.render("error.no_results")), extra=result.extra)
        return [{"role": "user", "content": tool_response_content(result)}]

    def extract_answer(self, text: str, setting: Setting) -> str:
        return scoring.extract_answer(text)

    # --- scoring -------------------------------------------------------------------------
    async def score(self, task: Task, trajectory: Trajectory, setting: Setting, ctx: ScoreContext) -> Score:
        """EM first, then the judge; a judge failure is Score.error, never a 0."""
        golds = [str(g) for g in (task.reference or [])]
        details: dict[str, Any] = {"termination": trajectory.termination, "golds": golds}
        answer = final_answer(trajectory, bool(setting.options.get("judge_on_max_rounds")))
        details["answer"] = answer
        if trajectory.termination in ("error", "context_overflow") and not answer:
            details["method"] = "trajectory_error"
            return Score(0.0, details)  # counts 0 like the reference; the record keeps status error
        if _switch(setting, "non_object_tool_call_is_error", self.fidelity) and _non_object_tool_call(trajectory):
            details["method"] = "sample_error"
            details["sample_error"] = "<tool_call> holds JSON that is not an object (the reference's parser fails)"
            return Score(0.0, details)
        if not answer:
            details["method"] = "no_answer"
            return Score(0.0, details)
        if scoring.exact_match(answer, golds):
            details["method"] = "em"
            return Score(1.0, details)
        judge = ctx.services.get("judge")
        if judge is None:
            return Score(None, details, error="judge_error: no 'judge' service configured")
        image = task.turns[0].images[0] if task.turns and task.turns[0].images else None
        if image is not None:
            image = await asyncio.to_thread(scoring.judge_image, ctx.blobs, image)
        question = str(task.metadata.get("question") or task.turns[0].text)
        retries = int(setting.options.get("judge_retries", 3))
        no_verdict = "no" if _switch(setting, "judge_no_verdict_is_no", self.fidelity) else "retry"
        try:
            ok, calls = await scoring.judge_answer(judge, question, golds, answer, image, retries,
                                                   texts=self.texts, no_verdict=no_verdict)
        except scoring.JudgeError as e:
            details["method"] = "judge"
            return Score(None, details, error=f"judge_error: {e}")
        details["method"] = "judge"
        details["judge"] = [{"gold": c.gold, "verdict": c.verdict, "attempts": c.attempts} for c in calls]
        return Score(1.0 if ok else 0.0, details)


def final_answer(trajectory: Trajectory, judge_on_max_rounds: bool) -> str:
    """The answer the engine recorded, or (switch on) the last assistant text of a MaxRounds run."""
    recorded = trajectory.answers[-1] if trajectory.answers else None
    if recorded:
        return recorded
    if trajectory.termination == "answered" or (trajectory.termination == "max_rounds" and judge_on_max_rounds):
        for msg in reversed(trajectory.messages):
            if msg.get("role") == "assistant":
                return scoring.extract_answer(_text_of(msg))
    return ""


def tool_response_content(result: ToolResult) -> list[dict[str, Any]]:
    """Text and images of a tool result, wrapped as the reference does; errors read ``Error: ...``."""
    text = result.output or result.error or ""
    if result.status == "error" and not text.startswith("Error"):
        text = f"Error: {text}"
    parts: list[dict[str, Any]] = []
    offsets = result.extra.get("image_offsets")
    if not (isinstance(offsets, list) and len(offsets) == len(result.images)):
        offsets = [len(text)] * len(result.images)  # images after the text ("Here is the zoomed image:" + crop)
    buffer, start = "<tool_response>\n", 0
    for ref, offset in zip(result.images, offsets, strict=True):
        buffer += text[start:offset]
        parts.append({"type": "text", "text": buffer})
        parts.append({"type": "image", "image": ref})
        buffer, start = "", offset
    buffer += text[start:] + "\n</tool_response>"
    parts.append({"type": "text", "text": buffer})
    return parts


def _text_of(msg: Message) -> str:
    content = msg.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text") or "" for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def _switch(setting: Setting, name: str, fidelity: str) -> bool:
    if name in setting.options:
        return bool(setting.options[name])
    return FIDELITY_SWITCHES.get(setting.fidelity, FIDELITY_SWITCHES[fidelity])[name]


_TOOL_CALL = Tagged("<tool_call>", "</tool_call>")


def _non_object_tool_call(trajectory: Trajectory) -> bool:
    """Whether the last assistant reply holds a <tool_call> whose JSON parses to a truthy non-object."""
    for msg in reversed(trajectory.messages):
        if msg.get("role") == "assistant":
            call = _TOOL_CALL.first(_text_of(msg))
            if call is None:
                return False
            try:
                obj = json.loads(call.strip())
            except json.JSONDecodeError:
                return False
            return bool(obj) and not isinstance(obj, dict)
    return False


def _direct(setting: Setting) -> bool:
    return bool(setting.options.get("direct")) or not setting.tools


def _dataset_prompts(options: dict[str, Any]) -> tuple[str, str]:
    """system_prompt / format_instruction from options, else from a reference datasets config."""
    base, fmt = "", DEFAULT_FORMAT_INSTRUCTION
    if options.get("config"):
        config = json.loads(Path(options["config"]).read_text(encoding="utf-8"))
        name = options.get("dataset")
        entry = config.get(name) if name else next(iter(config.values()), {})
        args = ((entry or {}).get("input_template") or {}).get("arguments") or {}
        base = str(args.get("system_prompt") or "")
        fmt = str(args.get("format_instruction") or fmt)
    base = str(options.get("system_prompt", base))
    fmt = str(options.get("format_instruction", fmt))
    return base, fmt
