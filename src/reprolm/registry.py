"""One registry mechanism for everything the config names: studies, metrics, dataset builders,
judges, generation backends, prompt builders, source schemas, fixtures, training formats and
training objectives.

A registry maps a name to an entry. Entries are registered with ``@REGISTRY.register(name)``
or ``REGISTRY.register(name, entry)``; looking up an unknown name raises
:class:`UnknownName` (a ``KeyError``) that names the kind, lists what is registered and
suggests the closest names, as lm-eval's task registry does.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError, ValueError):
    def __init__(self, kind: str, name: str, known: list[str], where: str | None = None):
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(str(name), known, n=3, cutoff=0.6)
        hint = f"; did you mean {' or '.join(repr(c) for c in close)}?" if close else ""
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}unknown {kind} {name!r}; registered: {known}{hint}")

    def __str__(self) -> str:
        return self.args[0]


class DuplicateName(ValueError):
    pass


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order."""

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T | None = None):
        """``register(name, entry)``, or ``@register(name)`` as a decorator."""
        if entry is None:

            def decorate(value: T) -> T:
                self._add(name, value)
                return value

            return decorate
        self._add(name, entry)
        return entry

    def _add(self, name: str, entry: T) -> None:
        if name in self._entries and self._entries[name] is not entry:
            raise DuplicateName(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry

    def get(self, name: str, where: str | None = None) -> T:
        """The entry named ``name``; ``where`` (a config key) prefixes the error."""
        try:
            return self._entries[name]
        except KeyError:
            raise UnknownName(self.kind, name, self.names(), where) from None

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def names(self) -> list[str]:
        return list(self._entries)
