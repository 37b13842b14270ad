"""The benchmarks' own texts, read at run time from the user's checkout of the reference harness.

We do not ship the reference harnesses' wording. A suite run with ``texts: reference`` (the
default under ``fidelity: reference``) reads each prompt, tool description, judge or extractor
template, few-shot demo and tool error string from the reference repository's files: Python
modules are parsed with ``ast`` and never imported or executed, YAML files are read with a YAML
parser. The exact strings are used verbatim and every one is recorded (file, symbol, sha256,
reference commit) in the run manifest. ``texts: own`` is the explicit choice of our wording.

A *symbol* addresses one value inside a file, as dot-separated steps:

- ``name``: a class, function or assignment target in the current scope (module, class or
  function body, nested blocks included); ``name@2`` is its third assignment in source order.
  In a dict literal, ``name`` is a key. ``name+@2`` is its third augmented assignment
  (``name += <value>``), for texts a function builds piece by piece.
- ``{key=value}``: the first dict literal below the current node (source order) whose
  ``key`` holds the string ``value``; in YAML, the first mapping in the current list.
- ``[i]``: element ``i`` of a list.
- ``body`` / ``orelse``: a branch of a conditional expression (``a if cond else b``), for a text
  chosen inline (``choice_prompt = "..." if english else "..."``).

An f-string becomes a ``Template`` whose fields are the source text of its expressions
(``{image_list}``), rendered with Python's own conversion and format rules; so does a ``+`` of
literals and variables (``qs + "..."``: the field ``qs``); a plain string used
with ``str.format`` in the reference is read as a Template from its format fields, and so is
``"...".format(x)`` written in place (the literal is the text; the call's arguments are not read).
"""

from __future__ import annotations

import ast
import hashlib
import re
import string
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from fasteval.core.errors import ConfigError
from fasteval.core.yaml_bounds import load_bounded

TextRole = Literal["system_prompt", "tool_spec", "judge_prompt", "extractor_prompt", "demo", "tool_error"]
TextKind = Literal["plain", "format", "data"]
"""How a reference value is used: verbatim, as a ``str.format`` template, or as a data structure."""
TEXT_MODES = ("reference", "own")
MAX_FORMAT_WIDTH = 1000
"""The widest format width or precision a reference template may ask for."""
MAX_REFERENCE_BYTES = 4 << 20
"""The largest reference file we parse (the harnesses' prompt and tool files are tens of KB)."""


class ReferenceTextError(ConfigError):
    """A reference text could not be read; the message says which file and how to get it."""


@dataclass(frozen=True, slots=True)
class Field:
    """A placeholder in a Template: the expression source, its conversion and format spec."""

    expr: str
    conversion: str | None = None
    spec: str = ""

    def __post_init__(self) -> None:
        # A width or precision comes from a file we did not write: ``{q:>50000000}`` would make
        # every prompt 50 MB. No prompt of a benchmark pads a field past a few dozen characters.
        for digits in re.findall(r"\d+", self.spec):
            if len(digits) > 6 or int(digits) > MAX_FORMAT_WIDTH:
                raise ValueError(f"format spec {self.spec[:40]!r} of field {{{self.expr[:40]}}} asks for "
                                 f"{digits[:12]} characters (at most {MAX_FORMAT_WIDTH})")


@dataclass(frozen=True, slots=True)
class Template:
    """Literal text and fields in order; what an f-string or a format string holds."""

    parts: tuple[str | Field, ...]

    @classmethod
    def from_format(cls, text: str) -> Template:
        """A ``str.format`` string as a Template (``{{`` and ``}}`` become literal braces)."""
        parts: list[str | Field] = []
        for literal, name, spec, conv in string.Formatter().parse(text):
            if literal:
                parts.append(literal)
            if name is not None:
                parts.append(Field(name, conv, spec or ""))
        return cls(tuple(parts))

    @property
    def fields(self) -> list[str]:
        return [p.expr for p in self.parts if isinstance(p, Field)]

    def render(self, values: Mapping[str, Any]) -> str:
        """Fill every field as Python would (conversion, then ``format``); KeyError names a missing one."""
        out: list[str] = []
        for p in self.parts:
            if isinstance(p, str):
                out.append(p)
                continue
            try:
                value = values[p.expr]
            except KeyError:
                raise KeyError(f"template field {p.expr!r} has no value; given {sorted(values)}") from None
            if p.conversion == "r":
                value = repr(value)
            elif p.conversion == "a":
                value = ascii(value)
            elif p.conversion == "s":
                value = str(value)
            out.append(format(value, p.spec))
        return "".join(out)

    def source(self) -> str:
        """The template with its fields shown as ``{expr}``: what ``suite prompts`` prints."""
        return "".join(p if isinstance(p, str) else "{" + p.expr + "}" for p in self.parts)


TextValue = str | Template | dict[str, Any] | list[Any]


def text_of(value: Any) -> str:
    """The canonical text of a value: the string, the template source, or sorted JSON for data."""
    if isinstance(value, str):
        return value
    if isinstance(value, Template):
        return value.source()
    import json

    return json.dumps(_plain(value), ensure_ascii=False, sort_keys=True)


def _plain(value: Any) -> Any:
    if isinstance(value, Template):
        return value.source()
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def sha256_text(value: Any) -> str:
    return hashlib.sha256(text_of(value).encode("utf-8")).hexdigest()


# ---------------------------------------------------------------------------------------------
# Symbol paths
# ---------------------------------------------------------------------------------------------

_STEP = re.compile(r"\{(?P<key>[^=}]+)=(?P<val>[^}]*)\}|\[(?P<idx>\d+)\]|"
                   r"(?P<name>[A-Za-z_][\w-]*)(?:@(?P<nth>\d+)|\+@(?P<aug>\d+))?")


@dataclass(frozen=True, slots=True)
class Step:
    kind: Literal["name", "match", "index"]
    name: str = ""
    nth: int = 0
    key: str = ""
    value: str = ""
    index: int = 0
    aug: bool = False
    """``name+@N``: count ``name += ...`` statements instead of assignments."""


def parse_symbol(symbol: str) -> list[Step]:
    """Split a symbol into steps; ValueError on anything the grammar does not cover."""
    steps: list[Step] = []
    pos = 0
    while pos < len(symbol):
        if symbol[pos] == ".":
            pos += 1
            continue
        m = _STEP.match(symbol, pos)
        if m is None:
            raise ValueError(f"bad symbol {symbol!r} at {pos}")
        if m.group("name") is not None:
            aug = m.group("aug") is not None
            steps.append(Step("name", name=m.group("name"), nth=int((m.group("aug") if aug else m.group("nth")) or 0),
                              aug=aug))
        elif m.group("idx") is not None:
            steps.append(Step("index", index=int(m.group("idx"))))
        else:
            steps.append(Step("match", key=m.group("key"), value=m.group("val")))
        pos = m.end()
    if not steps:
        raise ValueError("empty symbol")
    return steps


# ---------------------------------------------------------------------------------------------
# Python files, through ast only
# ---------------------------------------------------------------------------------------------


def _scope_walk(node: ast.AST) -> Iterator[ast.AST]:
    """Statements of a scope in source order, entering blocks but not nested classes/functions."""
    for child in ast.iter_child_nodes(node):
        yield child
        if not isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _scope_walk(child)


def _dict_get(node: ast.Dict, key: str) -> ast.AST | None:
    for k, v in zip(node.keys, node.values, strict=True):
        if isinstance(k, ast.Constant) and k.value == key:
            return v
    return None


def _py_step(node: ast.AST, step: Step) -> ast.AST:
    if step.kind == "index":
        if not isinstance(node, ast.List | ast.Tuple) or step.index >= len(node.elts):
            raise LookupError(f"[{step.index}]: not a list with that many elements")
        return node.elts[step.index]
    if step.kind == "match":
        for sub in _source_order(node):
            if isinstance(sub, ast.Dict):
                v = _dict_get(sub, step.key)
                if isinstance(v, ast.Constant) and v.value == step.value:
                    return sub
        raise LookupError(f"no dict literal with {step.key!r}: {step.value!r}")
    if isinstance(node, ast.IfExp) and step.name in ("body", "orelse"):
        return node.body if step.name == "body" else node.orelse
    if isinstance(node, ast.Dict):
        v = _dict_get(node, step.name)
        if v is None:
            raise LookupError(f"dict literal has no key {step.name!r}")
        return v
    found = 0
    for sub in _scope_walk(node):
        target: ast.AST | None = None
        if step.aug:
            if (isinstance(sub, ast.AugAssign) and isinstance(sub.op, ast.Add) and isinstance(sub.target, ast.Name)
                    and sub.target.id == step.name):
                target = sub.value
        elif isinstance(sub, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and sub.name == step.name:
            target = sub
        elif isinstance(sub, ast.Assign) and any(isinstance(t, ast.Name) and t.id == step.name for t in sub.targets):
            target = sub.value
        elif isinstance(sub, ast.AnnAssign) and isinstance(sub.target, ast.Name) and sub.target.id == step.name:
            target = sub.value
        if target is not None:
            if found == step.nth:
                return target
            found += 1
    what = "augmented assignment" if step.aug else "definition or assignment"
    raise LookupError(f"no {what} #{step.nth} of {step.name!r}")


def _source_order(node: ast.AST) -> list[ast.AST]:
    nodes = list(ast.walk(node))
    nodes.sort(key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0)))
    return nodes


def _py_value(node: ast.AST) -> Any:
    """A literal node as a value: strings, f-strings (Templates), numbers, dicts, lists."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.JoinedStr):
        parts: list[str | Field] = []
        for v in node.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                spec = ""
                if v.format_spec is not None:
                    spec_val = _py_value(v.format_spec)
                    if isinstance(spec_val, Template):
                        if spec_val.fields:
                            raise ValueError("f-string format specs with fields are not supported")
                        spec_val = "".join(p for p in spec_val.parts if isinstance(p, str))
                    spec = str(spec_val)
                conv = None if v.conversion == -1 else chr(v.conversion)
                parts.append(Field(ast.unparse(v.value), conv, spec))
        return Template(tuple(parts))
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"
            and isinstance(node.func.value, ast.Constant) and isinstance(node.func.value.value, str)):
        return node.func.value.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _concat_operand(node.left), _concat_operand(node.right)
        if isinstance(left, str | Template) and isinstance(right, str | Template):
            lp = left.parts if isinstance(left, Template) else (left,)
            rp = right.parts if isinstance(right, Template) else (right,)
            joined = Template((*lp, *rp))
            return joined if joined.fields else "".join(p for p in joined.parts if isinstance(p, str))
    if isinstance(node, ast.Dict):
        out: dict[Any, Any] = {}
        for k, v in zip(node.keys, node.values, strict=True):
            if k is None:
                raise ValueError("dict unpacking (**) is not a literal")
            out[_py_value(k)] = _py_value(v)
        return out
    if isinstance(node, ast.List | ast.Tuple):
        return [_py_value(e) for e in node.elts]
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _py_value(node.operand)
        if isinstance(inner, int | float):
            return -inner
    raise ValueError(f"not a literal: {ast.unparse(node)[:80]!r}")


def _concat_operand(node: ast.AST) -> Any:
    """One side of a ``+`` of texts: a literal, or a variable (``qs``, ``item["question"]``) that
    becomes a field named by its source, so ``qs + "\nSelect ..."`` reads as a Template."""
    if isinstance(node, ast.Name | ast.Subscript | ast.Attribute) and not isinstance(node, ast.Constant):
        return Template((Field(ast.unparse(node)),))
    return _py_value(node)


def _read_reference(path: Path) -> str:
    """A reference file's text, refused past ``MAX_REFERENCE_BYTES`` before it is read."""
    size = path.stat().st_size
    if size > MAX_REFERENCE_BYTES:
        raise ValueError(f"{size:,} bytes is too large for a reference text file (at most {MAX_REFERENCE_BYTES:,})")
    return path.read_text(encoding="utf-8")


def python_value(path: Path, symbol: str) -> Any:
    """The literal at ``symbol`` in a Python file, read with ``ast`` (never imported or run)."""
    tree = ast.parse(_read_reference(path), filename=str(path))
    node: ast.AST = tree
    for step in parse_symbol(symbol):
        node = _py_step(node, step)
    return _py_value(node)


# ---------------------------------------------------------------------------------------------
# YAML files
# ---------------------------------------------------------------------------------------------


def yaml_value(path: Path, symbol: str) -> Any:
    """The value at ``symbol`` (key path) in a YAML file, read safely and bounded (no alias bombs)."""
    value: Any = load_bounded(_read_reference(path))[0]
    for step in parse_symbol(symbol):
        if step.kind == "index":
            if not isinstance(value, list) or step.index >= len(value):
                raise LookupError(f"[{step.index}]: not a list with that many elements")
            value = value[step.index]
        elif step.kind == "match":
            if not isinstance(value, list):
                raise LookupError(f"{{{step.key}={step.value}}}: not a list")
            value = next((v for v in value if isinstance(v, dict) and v.get(step.key) == step.value), None)
            if value is None:
                raise LookupError(f"no mapping with {step.key}: {step.value!r}")
        else:
            if not isinstance(value, dict) or step.name not in value:
                raise LookupError(f"no key {step.name!r}")
            value = value[step.name]
    return value


# ---------------------------------------------------------------------------------------------
# Repositories and a suite's text book
# ---------------------------------------------------------------------------------------------


_SHA = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")
_REF_NAME = re.compile(r"refs/[A-Za-z0-9._/-]{1,200}")


def _sha(text: str) -> str | None:
    """``text`` when it is a commit id (SHA-1 or SHA-256 hex), else None: the manifest records
    nothing else as ``reference_commit``."""
    text = text.strip()
    return text if _SHA.fullmatch(text) else None


def _ref_name(name: str) -> str | None:
    """A ref HEAD may name (``refs/heads/main``); None for ``../../file`` and other paths out of ``.git``."""
    ok = _REF_NAME.fullmatch(name) and ".." not in name and "//" not in name and not name.endswith("/")
    return name if ok else None


def _first_kb(path: Path) -> str:
    with path.open(encoding="utf-8", errors="replace") as f:
        return f.read(4096)


def repo_commit(root: Path) -> str | None:
    """HEAD's commit of a git checkout, read from ``.git`` (no git process); None when unknown.
    The checkout is not ours: a HEAD naming a ref outside ``refs/`` or a file that is no commit
    id is unknown, never recorded."""
    git = root / ".git"
    if git.is_file():  # a worktree or submodule: "gitdir: <path>"
        line = _first_kb(git).strip()
        if line.startswith("gitdir:"):
            git = (root / line.split(":", 1)[1].strip()).resolve()
    head = git / "HEAD"
    if not head.is_file():
        return None
    ref = _first_kb(head).strip()
    if not ref.startswith("ref:"):
        return _sha(ref)
    name = _ref_name(ref.split(":", 1)[1].strip())
    if name is None:
        return None
    loose = git / name
    if loose.is_file():
        return _sha(_first_kb(loose))
    packed = git / "packed-refs"
    if packed.is_file() and packed.stat().st_size <= MAX_REFERENCE_BYTES:
        for line in packed.read_text(encoding="utf-8", errors="replace").splitlines():
            sha, _, refname = line.partition(" ")
            if refname == name:
                return _sha(sha)
    return None


@dataclass(frozen=True, slots=True)
class TextSpec:
    """Where one text lives in the reference, and our own wording of it."""

    name: str
    role: TextRole
    file: str
    symbol: str
    own: Any
    kind: TextKind = "plain"


@dataclass(slots=True)
class TextBook:
    """A suite's texts, resolved once at construction from the reference or from our wording."""

    suite: str
    mode: str
    repo: Path | None
    commit: str | None
    values: dict[str, Any]
    specs: dict[str, TextSpec]
    sha: dict[str, str] = field(default_factory=dict)

    def get(self, name: str) -> Any:
        return self.values[name]

    def render(self, name: str, **values: Any) -> str:
        """A template text filled in (fields keyed by their expression source), or a plain text."""
        v = self.values[name]
        if isinstance(v, Template):
            return v.render(values)
        if not isinstance(v, str):
            raise TypeError(f"text {name!r} is data, not a string")
        return v

    def check_fields(self, allowed: Mapping[str, set[str]]) -> None:
        """Each named template uses only the fields the code that fills it has (``allowed``): a
        checkout at another commit whose template names others is refused at load, not mid-run."""
        for name, fields in allowed.items():
            value = self.values.get(name)
            if isinstance(value, Template) and not set(value.fields) <= fields:
                raise ReferenceTextError(f"{self.suite}: {name} in {self.repo} uses fields {value.fields}, "
                                         f"expected some of {sorted(fields)}; the checkout may be at another commit")

    def manifest(self) -> dict[str, Any]:
        """What the run manifest records: the mode, the reference commit, each text's origin."""
        return {
            "mode": self.mode,
            "reference_repo": str(self.repo) if self.repo else None,
            "reference_commit": self.commit,
            "texts": [
                {"name": s.name, "role": s.role, "file": s.file if self.mode == "reference" else None,
                 "symbol": s.symbol if self.mode == "reference" else None, "sha256": self.sha[s.name]}
                for s in self.specs.values()
            ],
        }

    def listing(self) -> list[dict[str, Any]]:
        """Every text in ``suite prompts`` form (templates with their fields as ``{expr}``)."""
        out = []
        for s in self.specs.values():
            v = self.values[s.name]
            text = text_of(v) if not isinstance(v, dict | list) else _json(v)
            source = {"file": s.file, "symbol": s.symbol} if self.mode == "reference" else {"own": True}
            out.append({"role": s.role, "name": s.name, "text": text, "source": source})
        return out


def _json(value: Any) -> str:
    import json

    return json.dumps(_plain(value), ensure_ascii=False)


def load_text_book(suite: str, specs: list[TextSpec], mode: str, repo: str | Path | None,
                   fetch_hint: str) -> TextBook:
    """Resolve every spec; in ``reference`` mode a missing repo, file or symbol stops here.

    ``fetch_hint`` is the command that gets the reference checkout (``fasteval data fetch ...``).
    """
    if mode not in TEXT_MODES:
        raise ReferenceTextError(f"{suite}: texts must be one of {TEXT_MODES}, not {mode!r}")
    by_name = {s.name: s for s in specs}
    if mode == "own":
        values = {s.name: s.own for s in specs}
        return TextBook(suite, mode, None, None, values, by_name, {n: sha256_text(v) for n, v in values.items()})
    how = (f"get it with `{fetch_hint}` (or clone it there), set the suite option reference_repo, "
           "or choose our wording explicitly with `texts: own`")
    if not repo:
        raise ReferenceTextError(f"{suite}: texts: reference needs the option reference_repo; {how}")
    root = Path(repo)
    if not root.is_dir():
        raise ReferenceTextError(f"{suite}: reference repository {root} is missing; {how}")
    values = {}
    for s in specs:
        path = root / s.file
        if not path.is_file():
            raise ReferenceTextError(f"{suite}: {s.file} is missing from the reference repository {root}; {how}")
        try:
            raw = yaml_value(path, s.symbol) if path.suffix in (".yaml", ".yml") else python_value(path, s.symbol)
            values[s.name] = _as_kind(raw, s, root)
        except (LookupError, ValueError, SyntaxError, yaml.YAMLError) as e:
            raise ReferenceTextError(f"{suite}: cannot read {s.name} ({s.file} :: {s.symbol}) from {root}: "
                                     f"{e}; the checkout may be at another commit; {how}") from None
    return TextBook(suite, mode, root, repo_commit(root), values, by_name,
                    {n: sha256_text(v) for n, v in values.items()})


def _as_kind(raw: Any, spec: TextSpec, root: Path) -> Any:
    if spec.kind == "data":
        if not isinstance(raw, dict | list):
            raise ReferenceTextError(f"{spec.name}: {spec.file} :: {spec.symbol} in {root} is not a dict or list")
        return raw
    if isinstance(raw, Template):
        return raw
    if not isinstance(raw, str):
        raise ReferenceTextError(f"{spec.name}: {spec.file} :: {spec.symbol} in {root} is not a string")
    return Template.from_format(raw) if spec.kind == "format" else raw


def text_options(options: Mapping[str, Any], fidelity: str) -> tuple[str, str | None]:
    """The ``texts`` mode (default: reference under ``fidelity: reference``) and ``reference_repo``."""
    mode = str(options.get("texts") or ("reference" if fidelity == "reference" else "own"))
    repo = options.get("reference_repo")
    return mode, (str(repo) if repo else None)
