"""Declaration by decorator: the wire rules (:mod:`udtconf.udt.checks`,
:mod:`udtconf.sabul.checks`, :mod:`udtconf.frtp.checks`) and the probes of the active testers
(the modules of :mod:`udtconf.udt.tester`, :mod:`udtconf.sabul.tester`,
:mod:`udtconf.frtp.tester`) are functions whose decorator puts them, in the order they are
written, into a module-level :class:`Registry` — a list, so the catalogue and the tests read it
as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, Protocol, TypeVar


class _Named(Protocol):
    @property
    def id(self) -> str: ...


T = TypeVar("T", bound=_Named)
F = TypeVar("F")


class Registry(list[T], Generic[T]):
    """Declared items of one kind, in declaration order; each has a unique ``id``."""

    def declare(self, make: Callable[[F], T]) -> Callable[[F], F]:
        """A decorator that appends ``make(fn)`` and returns ``fn`` unchanged."""

        def deco(fn: F) -> F:
            self.append(make(fn))
            return fn

        return deco

    def by_id(self, id: str) -> T:
        for item in self:
            if item.id == id:
                return item
        raise KeyError(id)
