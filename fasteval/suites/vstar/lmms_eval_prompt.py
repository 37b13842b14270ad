"""lmms-eval's V* prompt (``lmms_eval/tasks/vstar_bench``), its parts read from the user's checkout.

The task YAML names its functions with ``!function utils.xxx`` tags and carries the prompt parts
in ``lmms_eval_specific_kwargs.default.{pre_prompt,post_prompt}``. We read the YAML with a safe
loader that keeps a ``!function`` tag as its name (their code is never imported or run), follow
``include:`` as lmms-eval does (the included file first, the task's own keys over it), and build
the text as ``vstar_doc_to_text`` does: the options ``(A) …`` parsed out of ``text`` with its
regex, the question before ``(A)``, then ``question\\nA. opt\\nB. opt…`` (at most four), with
``pre_prompt`` before and ``post_prompt`` after when they are not empty.

The task's ``generation_kwargs`` (``max_new_tokens: 16``, temperature 0) are read too, but sent
only under the suite option ``generation: lmms-eval``: 16 tokens cut every thinking model off, so
our default budget stays.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fasteval.core.yaml_bounds import expansion_problem
from fasteval.suites.reference_texts import (
    ReferenceTextError,
    TextBook,
    TextSpec,
    repo_commit,
    sha256_text,
    text_options,
)
from fasteval.suites.vstar.option_scan import find_options

TASK_FILE = "lmms_eval/tasks/vstar_bench/vstar_bench.yaml"
DEFAULT_REFERENCE_REPO = "data/reference/lmms-eval"
FETCH_HINT = "fasteval data fetch lmms-eval-reference --dest data"
MAX_YAML_BYTES = 1_000_000
MAX_INCLUDES = 4
KWARGS = "lmms_eval_specific_kwargs"
OWN_POST_PROMPT = "\nReply with the letter of the right option only."


@dataclass(frozen=True, slots=True)
class FunctionTag:
    """A ``!function module.name`` value, kept as its name."""

    name: str


class _TaskLoader(yaml.SafeLoader):
    """SafeLoader that reads ``!function`` tags as names instead of refusing the file."""


def _function_tag(loader: yaml.SafeLoader, node: yaml.Node) -> FunctionTag:
    if not isinstance(node, yaml.ScalarNode):
        raise yaml.constructor.ConstructorError(None, None, "!function must name a function", node.start_mark)
    return FunctionTag(str(loader.construct_scalar(node)))


_TaskLoader.add_constructor("!function", _function_tag)


def _read_yaml(path: Path) -> dict[str, Any]:
    text = path.read_bytes()
    if len(text) > MAX_YAML_BYTES:
        raise ValueError(f"{path.name} is {len(text):,} bytes (at most {MAX_YAML_BYTES:,} are read)")
    loader = _TaskLoader(text.decode("utf-8"))
    try:
        root = loader.get_single_node()
        if root is None:
            return {}
        problem = expansion_problem(root)
        if problem:
            raise ValueError(f"{path.name}: {problem}")
        data = loader.construct_document(root)
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise ValueError(f"{path.name} is not a mapping")
    return data


def task_config(root: Path, rel: str = TASK_FILE) -> tuple[dict[str, Any], dict[str, str]]:
    """The task's merged config and, per top-level key, the file (relative to ``root``) it came from."""
    base = root.resolve()

    def load(path: Path, depth: int) -> tuple[dict[str, Any], dict[str, str]]:
        real = path.resolve()
        if base not in real.parents:
            raise ValueError(f"include {path} leaves the checkout")
        if depth > MAX_INCLUDES:
            raise ValueError(f"more than {MAX_INCLUDES} nested includes")
        own = _read_yaml(real)
        merged: dict[str, Any] = {}
        origin: dict[str, str] = {}
        includes = own.pop("include", None)
        for inc in [includes] if isinstance(includes, str) else includes or []:
            cfg, where = load(path.parent / str(inc), depth + 1)
            merged.update(cfg)
            origin.update(where)
        merged.update(own)
        origin.update({k: str(real.relative_to(base)) for k in own})
        return merged, origin

    return load(root / rel, 0)


def _value(cfg: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    value: Any = cfg
    for k in keys:
        if not isinstance(value, Mapping) or k not in value:
            raise LookupError(f"no {'.'.join(keys)}")
        value = value[k]
    return value


def lmms_eval_texts(options: Mapping[str, Any], fidelity: str) -> TextBook:
    """``pre_prompt``, ``post_prompt`` and ``generation_kwargs`` of the task: the checkout's, or ours."""
    mode, repo = text_options(options, fidelity)
    names = {"pre_prompt": (KWARGS, "default", "pre_prompt"), "post_prompt": (KWARGS, "default", "post_prompt"),
             "generation": ("generation_kwargs",)}
    own: dict[str, Any] = {"pre_prompt": "", "post_prompt": OWN_POST_PROMPT, "generation": {}}
    specs = {n: TextSpec(n, "system_prompt", TASK_FILE, ".".join(keys), own[n], kind="data" if n == "generation"
                         else "plain") for n, keys in names.items()}
    if mode == "own":
        return TextBook("vstar-lmms-eval", mode, None, None, own, specs, {n: sha256_text(v) for n, v in own.items()})
    root = Path(repo or DEFAULT_REFERENCE_REPO)
    how = (f"get it with `{FETCH_HINT}`, set the suite option reference_repo, or choose our wording with "
           "`texts: own`")
    if not (root / TASK_FILE).is_file():
        raise ReferenceTextError(f"vstar: {TASK_FILE} is missing from the lmms-eval checkout {root}; {how}")
    try:
        cfg, origin = task_config(root)
        values = {n: _value(cfg, keys) for n, keys in names.items()}
    except (OSError, ValueError, LookupError, yaml.YAMLError) as e:
        raise ReferenceTextError(f"vstar: cannot read lmms-eval's V* task from {root}: {e}; {how}") from None
    for n in ("pre_prompt", "post_prompt"):
        if values[n] is None:
            values[n] = ""
        if not isinstance(values[n], str):
            raise ReferenceTextError(f"vstar: {KWARGS}.default.{n} in {root} is not a string")
    if not isinstance(values["generation"], dict):
        raise ReferenceTextError(f"vstar: generation_kwargs in {root} is not a mapping")
    specs = {n: TextSpec(n, s.role, origin.get(names[n][0], TASK_FILE), s.symbol, s.own, s.kind)
             for n, s in specs.items()}
    return TextBook("vstar-lmms-eval", mode, root, repo_commit(root), values, specs,
                    {n: sha256_text(v) for n, v in values.items()})


def lmms_eval_prompt(texts: TextBook, question: str, options: Mapping[str, str], raw_text: str | None = None) -> str:
    """``vstar_doc_to_text``: from the release's ``text`` when given (options in its order), else
    from the question and the options shown."""
    if raw_text is not None:
        # vstar_doc_to_text's option pattern, read in one pass (option_scan); the last option runs to the end
        found = [body for _, body in find_options(raw_text)]
        lines = [f"{k}. {o.strip()}" for k, o in zip("ABCD", found, strict=False)]  # at most four, as theirs
        text = f"{raw_text.split('(A)')[0].strip()}\n" + "\n".join(lines) if found else raw_text
    else:
        text = f"{question.strip()}\n" + "\n".join(f"{k}. {v.strip()}" for k, v in list(options.items())[:4])
    pre, post = str(texts.get("pre_prompt")), str(texts.get("post_prompt"))
    return (pre if pre else "") + text + (post if post else "")


def generation_params(texts: TextBook) -> dict[str, Any]:
    """The task's ``generation_kwargs`` as request parameters (``max_new_tokens`` → ``max_tokens``)."""
    gen: dict[str, Any] = texts.get("generation")
    out: dict[str, Any] = {}
    if "max_new_tokens" in gen:
        out["max_tokens"] = int(gen["max_new_tokens"])
    for key in ("temperature", "top_p"):
        if key in gen:
            out[key] = float(gen[key])
    return out
