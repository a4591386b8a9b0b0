"""The time of one serving engine step, by kind of work, and a step made of separate launches.

A step's kinds of work run one after the other, so its time is their sum; its GEMMs take the larger
of their compute and their weight reads. An engine that never mixes prefill and decode in one launch
(the Neuron engines: separately compiled context-encoding and token-generation graphs) runs a step
with prompts as two launches, each bound on its own (:meth:`StepTimes.in_sequence`), and a launch
that runs on a share of the steps only (a steady state's fraction of a prompt per step) counts that
share of its time (:meth:`StepTimes.scaled`). ``clustersim.serving.engine.step_times`` computes them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from clustersim.serving.memory import FloatArray


@dataclass(frozen=True)
class StepTimes:
    """Time of one step of one pipeline stage by kind of work, seconds, one entry per batch."""

    gemm_compute_s: FloatArray
    gemm_memory_s: FloatArray
    decode_attention_s: FloatArray
    prefill_attention_s: FloatArray
    elementwise_s: FloatArray
    communication_s: FloatArray
    overhead_s: FloatArray
    launches: tuple[StepTimes, ...] = ()  # separate graph launches one after the other; the fields are their sums

    @property
    def gemm_s(self) -> FloatArray:
        """GEMMs: the larger of their compute and weight-read times (of each launch, summed)."""
        if self.launches:
            return np.asarray(sum(launch.gemm_s for launch in self.launches), dtype=np.float64)
        return np.maximum(self.gemm_compute_s, self.gemm_memory_s)

    def scaled(self, factor: FloatArray) -> StepTimes:
        """Every time times ``factor`` (per batch entry): a launch that runs on that share of the steps."""
        values = {f.name: getattr(self, f.name) * factor for f in fields(self) if f.name != "launches"}
        return StepTimes(**values, launches=tuple(launch.scaled(factor) for launch in self.launches))

    @classmethod
    def in_sequence(cls, parts: Sequence[StepTimes]) -> StepTimes:
        """Launches run one after the other: each kind of work summed, each launch's GEMM bound its own."""
        values = {f.name: sum(getattr(part, f.name) for part in parts) for f in fields(cls) if f.name != "launches"}
        return cls(**values, launches=tuple(parts))

    @property
    def step_s(self) -> FloatArray:
        """The whole step: the kinds of work one after the other."""
        work = self.gemm_s + self.decode_attention_s + self.prefill_attention_s + self.elementwise_s
        return work + self.communication_s + self.overhead_s

    @property
    def memory_bound_s(self) -> FloatArray:
        """Time spent in work bound by HBM bandwidth: memory-bound GEMMs, decode attention, elementwise."""
        if self.launches:
            return np.asarray(sum(launch.memory_bound_s for launch in self.launches), dtype=np.float64)
        gemm = np.where(self.gemm_memory_s >= self.gemm_compute_s, self.gemm_memory_s, 0.0)
        return gemm + self.decode_attention_s + self.elementwise_s
