"""An array that keeps each block's minimum, so that its minimum and the indices at or below a value
cost a pass over the blocks plus the blocks that qualify, not a pass over every element: the event
loop asks both at every event, and with a million flows a full pass each time would dominate."""

from __future__ import annotations

import numpy as np

from clustersim.network.flowsim.filling import distinct
from clustersim.network.flowsim.topology import FloatArray, IntArray

BLOCK = 64  # elements per block: an event sets and finds a few hundred scattered flows of up to millions
ONE_BLOCK = 4096  # up to this many elements, one block: a pass over them is cheaper than the bookkeeping


class BlockMin:
    """``values`` (read it, write it through ``set``) with the minimum of each block of ``block``."""

    __slots__ = ("_blocks", "_min", "block", "values")

    def __init__(self, values: FloatArray, block: int | None = None) -> None:
        n = values.size
        self.block = (max(n, 1) if n <= ONE_BLOCK else BLOCK) if block is None else block
        self._blocks = np.full((max(1, -(-n // self.block)), self.block), np.inf)  # inf past the last element
        self.values = self._blocks.reshape(-1)[:n]
        self.values[:] = values
        self._min = self._blocks.min(axis=1)

    def set(self, idx: IntArray, new: FloatArray | float) -> None:
        """``values[idx] = new``, keeping the block minima."""
        if not idx.size:
            return
        self.values[idx] = new
        if idx.size * self.block >= self.values.size:
            self._min = np.minimum.reduce(self._blocks, axis=1)
            return
        blocks = distinct(idx // self.block)
        self._min[blocks] = np.minimum.reduce(self._blocks[blocks], axis=1)

    def min(self) -> float:
        return float(np.minimum.reduce(self._min))

    def at_most(self, bound: float) -> IntArray:
        """The indices whose value is at most ``bound``, sorted."""
        if self._min.size == 1:
            return (self.values <= bound).nonzero()[0]
        blocks = (self._min <= bound).nonzero()[0]  # not np.flatnonzero: its Python wrapper costs as much
        if not blocks.size:
            return np.zeros(0, dtype=np.int64)
        k = (self._blocks[blocks] <= bound).ravel().nonzero()[0]
        idx: IntArray = blocks[k // self.block] * self.block + k % self.block
        return idx[idx < self.values.size]  # not the padding (inf) past the last element
