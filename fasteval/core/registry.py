"""Name -> component registries that import a built-in component's module on first lookup.

Naming a suite or a tool must not import every suite and tool (their images, sandbox and HTTP
code: ~0.15 s), and filling a registry by side-effect imports made the config, the suites and the
tools import each other in a cycle. So a registry knows its built-ins by module path and imports
one only when it is asked for, as inspect-ai's registry does. Third-party components still
register themselves with ``register`` (a decorator) once their module is imported.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class LazyRegistry(Mapping[str, T], Generic[T]):
    """A read-only mapping of registered components; built-ins load on a miss, iteration loads all."""

    def __init__(self, kind: str, builtins: Mapping[str, str], key: Callable[[T], str]) -> None:
        self.kind = kind
        self._builtins = dict(builtins)  # name -> module that registers it
        self._key = key
        self._items: dict[str, T] = {}

    def register(self, item: T) -> T:
        """Decorator: make ``item`` available under its name."""
        self._items[self._key(item)] = item
        return item

    def add_builtins(self, builtins: Mapping[str, str]) -> None:
        """Name more built-ins by module (a higher layer telling where its own components live)."""
        self._builtins.update(builtins)

    def _load(self, name: str) -> None:
        module = self._builtins.get(name)
        if module is not None and name not in self._items:
            importlib.import_module(module)

    def __getitem__(self, name: str) -> T:
        self._load(name)
        try:
            return self._items[name]
        except KeyError:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {sorted(self.names())}") from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and (name in self._items or name in self._builtins)

    def names(self) -> list[str]:
        """Every known name, without importing anything."""
        return sorted({*self._builtins, *self._items})

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        return len(self.names())

    def loaded(self, name: str) -> T | None:
        """The component if its module is already imported (never imports)."""
        return self._items.get(name)
