"""One registry mechanism for everything the config names: studies, metrics, dataset builders,
judges, generation backends, prompt builders, source schemas, fixtures, training formats and
training objectives.

A registry maps a name to an entry. Entries are registered with ``@REGISTRY.register(name)``
or ``REGISTRY.register(name, entry)``, or as a ``"module:object"`` reference with
``REGISTRY.register_lazy(name, reference)``, imported when first looked up (as lm-eval's
registry does): a study's folder registers its own entries in a shared registry without the
registry's module importing the study, and naming them loads nothing. Looking up an unknown
name raises
:class:`UnknownName` (a ``KeyError``) that names the kind, lists what is registered and
suggests the closest names, as lm-eval's task registry does.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Iterator
from dataclasses import dataclass
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


@dataclass(frozen=True)
class _Reference:
    """A lazily registered entry, not imported yet."""

    module: str
    attribute: str


class Registry(Generic[T]):
    """Entries of one kind by name, in registration order. ``per_job``: the workflow names the
    entry each job uses (its metric, builder, study, the schemas of what it reads) and adds
    that entry to the job's code fingerprint, so the registry as a whole is in none
    (:mod:`reprolm.provenance.fingerprint` reads the flag from the source)."""

    def __init__(self, kind: str, per_job: bool = False):
        self.kind = kind
        self.per_job = per_job
        self._entries: dict[str, T | _Reference] = {}
        # The reference each lazy entry was registered by, kept once it is imported.
        self._references: dict[str, _Reference] = {}

    def register(self, name: str, entry: T | None = None):
        """``register(name, entry)``, or ``@register(name)`` as a decorator."""
        if entry is None:

            def decorate(value: T) -> T:
                self._add(name, value)
                return value

            return decorate
        self._add(name, entry)
        return entry

    def register_lazy(self, name: str, reference: str) -> None:
        """``name``'s entry is the object ``reference`` (``"module:object"``) names, imported
        when the entry is first looked up."""
        module, _, attribute = reference.partition(":")
        if not module or not attribute:
            raise ValueError(f"{self.kind} {name!r}: {reference!r} is not a 'module:object' reference")
        reference = _Reference(module, attribute)
        if self._references.get(name) != reference:
            self._add(name, reference)
            self._references[name] = reference

    def _add(self, name: str, entry: T | _Reference) -> None:
        if name in self._entries and self._entries[name] != entry:
            raise DuplicateName(f"{self.kind} {name!r} is registered twice")
        self._entries[name] = entry

    def get(self, name: str, where: str | None = None) -> T:
        """The entry named ``name`` (a lazy one imported now); ``where`` (a config key)
        prefixes the error."""
        try:
            entry = self._entries[name]
        except KeyError:
            raise UnknownName(self.kind, name, self.names(), where) from None
        if isinstance(entry, _Reference):
            entry = getattr(importlib.import_module(entry.module), entry.attribute)
            self._entries[name] = entry
        return entry

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
