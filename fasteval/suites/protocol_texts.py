"""The texts of the harnesses' own tool protocols (DeepEyes, Mini-o3), read from their checkouts.

A setting with ``options: {protocol: deepeyes-text | mini-o3-grounding}`` runs the model through
that harness's text protocol (``fasteval.tools.text_protocols``). The protocol *is* the harness's
format, so its texts come from the reference checkout whatever the fidelity (a DeepEyes model
was trained on DeepEyes' system prompt); ``texts: own`` is the explicit choice of our wording.

- DeepEyes (``eval/eval_vstar.py``): the system prompt ``instruction_prompt_system``, the user
  template ``instruction_prompt_before`` (a format string joined to ``USER_PROMPT_V2``) and
  ``USER_PROMPT_V2``, which is also the text inside each ``<tool_response>``.
- Mini-o3 (``verl/trainer/constants.py``): ``TOOL_CROP_SYSTEM_PROMPT``,
  ``TOOL_CALL_CROP_MULTI_TRUN_PROMPT`` (after each crop) and ``ERROR_INFO_MULTI_TURN_PROMPT``;
  the error line is the f-string in ``AsyncvLLMEngine.process_tool_call``
  (``verl/workers/rollout/vllm_rollout/vllm_async_engine.py``).

Each book is read once, the first time a setting names its protocol (at planning, through the
suites' ``applies_to``), so a missing checkout stops the sweep before any job runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fasteval.core.options import Opt
from fasteval.suites.base import Setting
from fasteval.suites.reference_texts import (
    Field,
    ReferenceTextError,
    Template,
    TextBook,
    TextSpec,
    load_text_book,
)
from fasteval.tools.text_protocols import (
    PROTOCOLS,
    DeepEyesProtocol,
    DeepEyesTexts,
    MiniO3Protocol,
    MiniO3Texts,
    TextProtocol,
)

DEEPEYES_FILE = "eval/eval_vstar.py"
MINI_O3_CONSTANTS = "verl/trainer/constants.py"
MINI_O3_ENGINE = "verl/workers/rollout/vllm_rollout/vllm_async_engine.py"
DEFAULT_REPOS = {DeepEyesProtocol.name: "data/reference/DeepEyes", MiniO3Protocol.name: "data/reference/Mini-o3"}
FETCH_HINTS = {DeepEyesProtocol.name: "fasteval data fetch deepeyes-reference --dest data",
               MiniO3Protocol.name: "fasteval data fetch mini-o3-reference --dest data"}
FEEDBACK_FIELD = "USER_PROMPT_V2"
USER_FIELDS = {"question", "options"}

OWN_DEEPEYES_SYSTEM = (
    "You can look closer at the image. To zoom in, write\n"
    '<tool_call>{"name": "image_zoom_in_tool", "arguments": {"bbox_2d": [x1, y1, x2, y2]}}</tool_call>\n'
    "with the box in pixels of the original image; the enlarged region comes back in the next turn.")
OWN_DEEPEYES_FEEDBACK = ("\nThink about the region, zoom again if it helps, and give the option's letter "
                         "inside <answer></answer>.")
OWN_MINI_O3_SYSTEM = (
    "Answer the question about the image. Think inside <think></think>. To see a region better, write "
    '<grounding>{"bbox_2d": [x0, y0, x1, y1], "source": "original_image"}</grounding> with coordinates as '
    "fractions (0 to 1) of the width and height of the source, which is original_image or observation_i "
    "(an earlier zoom). Put the final answer inside <answer></answer>.")
OWN_MINI_O3_OBSERVATION = Template.from_format(
    "Zoom {action_turn} gave this region (observation_{observation_turn}):\n"
    "<|vision_start|><|image_pad|><|vision_end|>.\nThink again inside <think></think>; zoom into the "
    "original or any observation if needed, or give the answer inside <answer></answer>.")
OWN_MINI_O3_ERROR = Template.from_format("The zoom failed: {error_info}.\n")
OWN_MINI_O3_ERROR_HINT = "Read the error, fix the grounding and go on reasoning inside <think></think>."


OWN_DEEPEYES_USER = Template(("Question: {question}\nOptions: {options}\n", Field(FEEDBACK_FIELD)))
"""Like the reference value: a format string joined to the feedback text."""
DEEPEYES_SPECS = [
    TextSpec("deepeyes_system", "system_prompt", DEEPEYES_FILE, "instruction_prompt_system", OWN_DEEPEYES_SYSTEM),
    TextSpec("deepeyes_user", "system_prompt", DEEPEYES_FILE, "instruction_prompt_before", OWN_DEEPEYES_USER),
    TextSpec("deepeyes_feedback", "system_prompt", DEEPEYES_FILE, FEEDBACK_FIELD, OWN_DEEPEYES_FEEDBACK),
]


MINI_O3_SPECS = [
    TextSpec("mini_o3_system", "system_prompt", MINI_O3_CONSTANTS, "TOOL_CROP_SYSTEM_PROMPT", OWN_MINI_O3_SYSTEM),
    TextSpec("mini_o3_observation", "system_prompt", MINI_O3_CONSTANTS, "TOOL_CALL_CROP_MULTI_TRUN_PROMPT",
             OWN_MINI_O3_OBSERVATION, kind="format"),
    TextSpec("mini_o3_error_hint", "tool_error", MINI_O3_CONSTANTS, "ERROR_INFO_MULTI_TURN_PROMPT",
             OWN_MINI_O3_ERROR_HINT),
    TextSpec("mini_o3_error", "tool_error", MINI_O3_ENGINE, "AsyncvLLMEngine.process_tool_call.tool_outputs@0",
             OWN_MINI_O3_ERROR),
]


def protocol_option(names: tuple[str, ...] = PROTOCOLS) -> Opt:
    """The setting option naming a protocol (``names``: those the suite's prompts fit)."""
    return Opt("str", f"a harness's own text tool protocol: {' or '.join(names)}", choices=names)


def _check_fields(book: TextBook, name: str, allowed: set[str]) -> None:
    value = book.get(name)
    fields = set(value.fields) if isinstance(value, Template) else set()
    if not fields <= allowed:
        spec = book.specs[name]
        raise ReferenceTextError(f"{book.suite}: {spec.file} :: {spec.symbol} has fields {sorted(fields)}, "
                                 f"expected {sorted(allowed)}; the checkout may be at another commit")


def deepeyes_user_template(book: TextBook) -> Template:
    """DeepEyes' user template: ``instruction_prompt_before`` with ``USER_PROMPT_V2`` joined in,
    read as the format string the harness ``.format``s."""
    raw = book.get("deepeyes_user")
    text = raw.render({FEEDBACK_FIELD: book.get("deepeyes_feedback")}) if isinstance(raw, Template) else str(raw)
    return Template.from_format(text)


def deepeyes_user_prompt(book: TextBook, question: str, options: Mapping[str, str]) -> str:
    """DeepEyes' user text, with the options block it builds (``"\\n"``, then ``"A. text\\n"`` each)."""
    block = "\n" + "".join(f"{k}. {v}\n" for k, v in options.items())
    return deepeyes_user_template(book).render({"question": question, "options": block})


class ProtocolBooks:
    """The protocol texts a suite's settings use, each book read once on first use."""

    def __init__(self, suite: str, options: Mapping[str, Any], repos: Mapping[str, str | None],
                 names: tuple[str, ...] = PROTOCOLS) -> None:
        self.suite = suite
        self.names = names
        self.mode = str(options.get("texts") or "reference")
        self.repos = dict(repos)
        self.books: dict[str, TextBook] = {}

    def name_of(self, setting: Setting) -> str | None:
        name = setting.options.get("protocol")
        if name is None:
            return None
        if name not in self.names:
            raise ReferenceTextError(f"{self.suite}: setting {setting.name!r}: protocol must be one of "
                                     f"{', '.join(self.names)}, got {name!r}")
        return str(name)

    def book(self, name: str) -> TextBook:
        if name not in self.books:
            repo = self.repos.get(name) or DEFAULT_REPOS[name]
            specs = DEEPEYES_SPECS if name == DeepEyesProtocol.name else MINI_O3_SPECS
            book = load_text_book(f"{self.suite}-{name}", specs, self.mode, repo, FETCH_HINTS[name])
            if name == DeepEyesProtocol.name:
                _check_fields(book, "deepeyes_user", {FEEDBACK_FIELD})
                _check_fields(book, "deepeyes_system", set())
                user = deepeyes_user_template(book)
                if not set(user.fields) <= USER_FIELDS:
                    raise ReferenceTextError(f"{book.suite}: {DEEPEYES_FILE} :: instruction_prompt_before formats "
                                             f"{sorted(user.fields)}, expected {sorted(USER_FIELDS)}")
            else:
                _check_fields(book, "mini_o3_observation", {"action_turn", "observation_turn"})
                _check_fields(book, "mini_o3_error", {"error_info"})
            self.books[name] = book
        return self.books[name]

    def check(self, setting: Setting) -> None:
        """Read the setting's protocol texts now (raises ReferenceTextError, a ConfigError)."""
        name = self.name_of(setting)
        if name is not None:
            self.book(name)

    def protocol(self, setting: Setting) -> TextProtocol | None:
        """A new protocol for one job under ``setting`` (None when the setting names none)."""
        name = self.name_of(setting)
        if name is None:
            return None
        book = self.book(name)
        if name == DeepEyesProtocol.name:
            return DeepEyesProtocol(setting.fidelity, DeepEyesTexts(
                system=str(book.get("deepeyes_system")), feedback=str(book.get("deepeyes_feedback"))))
        hint = str(book.get("mini_o3_error_hint"))
        return MiniO3Protocol(setting.fidelity, MiniO3Texts(
            system=str(book.get("mini_o3_system")),
            observation=lambda action, obs: book.render("mini_o3_observation", action_turn=action,
                                                        observation_turn=obs),
            error=lambda info: book.render("mini_o3_error", error_info=info) + hint))

    def manifest_texts(self) -> list[dict[str, Any]]:
        """Each text read so far, with the checkout and commit it came from (a suite's manifest
        names one repository at its top; these come from others)."""
        return [{**t, "reference_repo": m["reference_repo"], "reference_commit": m["reference_commit"]}
                for m in (b.manifest() for b in self.books.values()) for t in m["texts"]]

    def listing(self, setting: Setting) -> list[dict[str, Any]]:
        name = self.name_of(setting)
        return self.book(name).listing() if name else []
