"""The space of training layouts a planner searches, generated as arrays and filtered by masks.

Every combination of the degrees below is one element of a set of parallel numpy arrays; the layout
rules (``clustersim.execution.LAYOUT_RULES``) are evaluated as boolean masks over all of them at
once, so no per-candidate object is built until a winner is picked.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from clustersim.execution import LayoutArrays, RuleInputs, layout_mask
from clustersim.system import System
from clustersim.training.job import TrainingJob
from clustersim.workload.transformer import Transformer

LONG_SEQUENCE_TOKENS = 16_384  # from here on, context parallelism joins the candidates
POWERS_OF_TWO = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True)
class SearchSpace:
    """The values each layout dimension may take; ``None`` lets the space pick its defaults."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] = (1, 2, 4, 8, 16, 32)
    vp: tuple[int, ...] = (1, 2, 4)
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    micro_batch: tuple[int, ...] = (1, 2, 4)
    recompute: tuple[str, ...] = ("none", "selective", "full")
    zero: tuple[int, ...] = (0, 1, 3)

    def resolved(self, model: Transformer, system: System, job: TrainingJob) -> SearchSpace:
        """Defaults filled in: TP inside the scale-up domain, CP for long sequences, EP for MoE models."""
        devices = system.num_devices
        tp = self.tp or tuple(t for t in POWERS_OF_TWO if t <= system.scaleup_devices and devices % t == 0)
        cp = self.cp or ((1, 2, 4, 8, 16) if job.seq_len >= LONG_SEQUENCE_TOKENS else (1,))
        moe = model.moe
        ep = self.ep or (tuple(e for e in POWERS_OF_TWO if moe and moe.experts % e == 0) or (1,))
        return SearchSpace(tp, self.pp, self.vp, cp, ep, self.micro_batch, self.recompute, self.zero)


def candidate_layouts(
    model: Transformer, system: System, job: TrainingJob, space: SearchSpace | None = None
) -> LayoutArrays:
    """Every layout of ``space`` (the default space when None) that keeps the layout rules on ``system``,
    data parallelism filling the devices and sequence parallelism on wherever tp > 1."""
    dims = (space or SearchSpace()).resolved(model, system, job)
    recompute_codes = tuple(("none", "selective", "full").index(r) for r in dims.recompute)
    axes = (dims.tp, dims.pp, dims.vp, dims.cp, dims.ep, dims.micro_batch, recompute_codes, dims.zero)
    grid = [g.ravel() for g in np.meshgrid(*(np.asarray(a, dtype=np.int64) for a in axes), indexing="ij")]
    tp, pp, vp, cp, ep, mb, recompute, zero = grid
    devices = system.num_devices
    covered = (devices % (tp * pp * cp) == 0) & ~((vp > 1) & (pp == 1))
    tp, pp, vp, cp, ep, mb, recompute, zero = (g[covered] for g in grid)
    n = len(tp)
    arrays = LayoutArrays(
        tp=tp,
        pp=pp,
        dp=devices // (tp * pp * cp),
        cp=cp,
        ep=ep,
        vp=vp,
        micro_batch=mb,
        zero=zero,
        sequence_parallel=tp > 1,
        recompute_full=recompute == 2,
        recompute_selective=recompute == 1,
        tp_overlap=np.full(n, np.nan),
        dp_overlap=np.ones(n, dtype=bool),
        uneven_stages=np.zeros(n, dtype=bool),
    )
    rules = RuleInputs(model, devices, job.global_batch, job.seq_len)
    return arrays.select(layout_mask(arrays, rules))
