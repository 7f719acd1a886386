"""A generator's return value, kept for whoever iterates it with a plain `for`.

The listing's stages (selection, planning, `plan.todo.still_to_fetch`) stream files and return what they found once
their input has ended; each passes on what the stage before it returned, so the findings reach the end of the stream
as values, not through holders filled along the way.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

_T = TypeVar("_T")
_R = TypeVar("_R")


class KeepsReturnValue(Generic[_T, _R]):
    """Iterates `items`, keeping the return value a plain `for` drops: `value`, once ended (None if not a generator)."""

    def __init__(self, items: Iterable[_T]) -> None:
        self._items = items
        self._ended = False
        self._value: _R | None = None

    def __iter__(self) -> Iterator[_T]:
        self._value = yield from self._items
        self._ended = True

    @property
    def value(self) -> _R:
        assert self._ended, "the generator has not ended"
        return self._value  # type: ignore[return-value]
