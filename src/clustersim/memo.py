"""Results kept by the objects they were made from: a bounded memo keyed by those objects' identities and by plain
values. An identity is an address, which another object may take once the first is gone, so the memo holds the
objects beside the result and a hit must find the very same ones."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

T = TypeVar("T")


class IdentityMemo(Generic[T]):
    """The last ``keep`` results, each made once per (objects, values)."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self._found: OrderedDict[tuple[Hashable, ...], tuple[tuple[object, ...], T]] = OrderedDict()

    def get(self, objects: tuple[object, ...], values: tuple[Hashable, ...], make: Callable[[], T]) -> T:
        """The result for ``objects`` (by identity) and ``values`` (by equality): kept, or ``make()`` and kept."""
        key = (*(id(part) for part in objects), *values)
        found = self._found.get(key)
        if found is not None and all(a is b for a, b in zip(found[0], objects, strict=True)):
            self._found.move_to_end(key)
            return found[1]
        result = make()
        self._found[key] = (objects, result)
        if len(self._found) > self.keep:
            self._found.popitem(last=False)
        return result

    def clear(self) -> None:
        self._found.clear()

    def __len__(self) -> int:
        return len(self._found)
