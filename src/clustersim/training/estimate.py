"""Training estimate: step time with every term, memory, MFU, and the time, cost and energy of a job.

``estimate_training`` answers for one layout; ``evaluate_layouts`` evaluates many layouts in one
vectorized call (what a planner uses); ``choose_layout`` picks the fastest layout that fits.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clustersim.catalog.schema import Dtype
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.memory import MemoryArrays, memory_per_device
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.system import System
from clustersim.training.step import StepTerms, step_terms
from clustersim.workload.transformer import Transformer

PRECISIONS = (Dtype.BF16, Dtype.FP16, Dtype.FP8)
_GIB = 2**30


@dataclass(frozen=True)
class TrainingJob:
    """What to train: sequences of ``seq_len`` tokens, ``global_batch`` sequences per step."""

    global_batch: int
    seq_len: int
    precision: Dtype = Dtype.BF16
    tokens: float | None = None  # training budget, tokens; None = one step only

    def __post_init__(self) -> None:
        if self.global_batch < 1:
            raise ClusterSimError(f"global batch must be at least 1 sequence, got {self.global_batch}")
        if self.seq_len < 1:
            raise ClusterSimError(f"sequence length must be at least 1 token, got {self.seq_len}")
        if self.precision not in PRECISIONS:
            valid = ", ".join(p.value for p in PRECISIONS)
            raise ClusterSimError(f"precision {self.precision.value!r} is not a training precision (valid: {valid})")
        if self.tokens is not None and self.tokens <= 0:
            raise ClusterSimError(f"tokens must be positive, got {self.tokens}")

    @property
    def tokens_per_step(self) -> int:
        """Tokens per optimizer step."""
        return self.global_batch * self.seq_len


@dataclass(frozen=True)
class Term:
    """One term of the step: time on its links or units, and the part on the critical path."""

    name: str
    link_s: float
    exposed_s: float


@dataclass(frozen=True)
class Estimate:
    """The answer for one model, layout, system and job."""

    model: str
    system: str
    layout: Layout
    job: TrainingJob
    step_s: float
    terms: list[Term]
    memory_bytes: dict[str, float]
    capacity_bytes: float
    model_flops_per_step: float
    hardware_flops_per_step: float
    peak_flop_per_s: float
    num_devices: int
    notes: list[str] = field(default_factory=list)
    cost: dict[str, Any] = field(default_factory=dict)
    operations: list[dict[str, Any]] = field(default_factory=list)  # per layer (or head), per micro-batch

    @property
    def fits(self) -> bool:
        """Whether the required memory (with overhead) fits the device."""
        return self.memory_bytes["required"] <= self.capacity_bytes

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization: model FLOPs / (step x devices x dense peak of the precision)."""
        return self.model_flops_per_step / (self.step_s * self.num_devices * self.peak_flop_per_s)

    @property
    def hfu(self) -> float:
        """Hardware FLOPs utilization: as MFU, with the recomputed forward work counted."""
        return self.hardware_flops_per_step / (self.step_s * self.num_devices * self.peak_flop_per_s)

    @property
    def tokens_per_s_per_device(self) -> float:
        """Training throughput per device."""
        return self.job.tokens_per_step / self.step_s / self.num_devices

    @property
    def bottleneck(self) -> str:
        """The largest term, in words."""
        top = max(self.terms, key=lambda t: t.exposed_s)
        share = top.exposed_s / self.step_s
        words = {
            "forward": "compute (forward pass)",
            "backward": "compute (backward pass)",
            "recompute": "activation recompute",
            "pipeline bubble": "the pipeline bubble: more micro-batches or interleaving shrink it",
            "tp comm": "tensor-parallel communication: keep TP inside the scale-up domain or overlap it",
            "dp comm": "data-parallel communication: overlap it or shard with ZeRO",
            "pp comm": "pipeline send/recv",
            "cp comm": "context-parallel exchange",
            "ep comm": "expert all-to-all",
            "optimizer": "the optimizer step",
        }
        return f"{words.get(top.name, top.name)} ({100 * share:.0f}% of the step)"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON with units in the names."""
        return {
            "model": self.model,
            "system": self.system,
            "layout": self.layout.model_dump(mode="json"),
            "micro_batches": self.job.global_batch // (self.layout.dp * self.layout.micro_batch),
            "global_batch_sequences": self.job.global_batch,
            "global_batch_tokens": self.job.tokens_per_step,
            "seq_len": self.job.seq_len,
            "precision": self.job.precision.value,
            "step_s": self.step_s,
            "terms": [{"name": t.name, "link_s": t.link_s, "exposed_s": t.exposed_s} for t in self.terms],
            "memory_bytes": self.memory_bytes,
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "model_tflops_per_device": self.model_flops_per_step / self.step_s / self.num_devices / 1e12,
            "bottleneck": self.bottleneck,
            "notes": self.notes,
            "operations": self.operations,
            "job": self.cost,
        }


def evaluate_layouts(
    model: Transformer,
    system: System,
    layouts: LayoutArrays,
    job: TrainingJob,
    *,
    efficiency: FamilyEfficiency | None = None,
) -> tuple[StepTerms, MemoryArrays]:
    """Step terms and memory of many layouts in one vectorized call (no layout checks); ``efficiency``
    defaults to the accelerator family's fitted fractions."""
    eff = efficiency or efficiency_for(system.accelerator)
    terms = step_terms(
        model, system, eff, layouts, seq_len=job.seq_len, global_batch=job.global_batch, precision=job.precision
    )
    memory = memory_per_device(
        model, layouts, seq_len=job.seq_len, global_batch=job.global_batch, fused_attention=eff.fused_attention
    )
    return terms, memory


def estimate_training(
    model: Transformer,
    system: System,
    layout: Layout,
    job: TrainingJob,
    *,
    offer: str = "on_demand",
    efficiency: FamilyEfficiency | None = None,
) -> Estimate:
    """The estimate for one layout; ``ClusterSimError`` if the layout is impossible."""
    layout.check(model, num_devices=system.num_devices, global_batch=job.global_batch, seq_len=job.seq_len)
    terms, memory = evaluate_layouts(model, system, LayoutArrays.of([layout]), job, efficiency=efficiency)
    notes = [system.network_note] if system.network_note else []
    if layout.tp > system.scaleup_devices:
        notes.append(
            f"tp {layout.tp} is wider than the {system.scaleup_devices} devices of the scale-up domain: "
            "tensor-parallel traffic crosses the network"
        )
    model_flops = model.model_flops_per_token(job.seq_len) * job.tokens_per_step
    recompute_per_token = {
        Recompute.NONE: 0.0,
        Recompute.SELECTIVE: model.attention_flops_per_token(job.seq_len),
        Recompute.FULL: model.forward_flops_per_token(job.seq_len) - 2.0 * model.vocab * model.hidden,
    }[layout.recompute]
    pairs = [
        ("forward", terms.forward_s, terms.forward_s),
        ("backward", terms.backward_s, terms.backward_s),
        ("recompute", terms.recompute_s, terms.recompute_s),
        ("pipeline bubble", terms.bubble_s, terms.bubble_s),
        ("tp comm", terms.tp_link_s, terms.tp_exposed_s),
        ("cp comm", terms.cp_link_s, terms.cp_exposed_s),
        ("ep comm", terms.ep_link_s, terms.ep_link_s),
        ("pp comm", terms.pp_link_s, terms.pp_link_s),
        ("dp comm", terms.dp_link_s, terms.dp_exposed_s),
        ("optimizer", terms.optimizer_s, terms.optimizer_s),
    ]
    step_s = float(terms.step_s[0])
    mem = {
        "weights": float(memory.weights[0]),
        "gradients": float(memory.gradients[0]),
        "optimizer": float(memory.optimizer[0]),
        "activations": float(memory.activations[0]),
        "total": float(memory.total[0]),
        "overhead": float(memory.overhead[0]),
        "required": float(memory.required[0]),
    }
    estimate = Estimate(
        model=model.name,
        system=system.name,
        layout=layout,
        job=job,
        step_s=step_s,
        terms=[Term(name, float(link[0]), float(exposed[0])) for name, link, exposed in pairs],
        memory_bytes=mem,
        capacity_bytes=system.memory_bytes,
        model_flops_per_step=model_flops,
        hardware_flops_per_step=model_flops + recompute_per_token * job.tokens_per_step,
        peak_flop_per_s=system.peak_flop_per_s(job.precision),
        num_devices=system.num_devices,
        notes=notes,
        operations=[
            {
                "name": op.name,
                "scope": "head (last stage)" if op.in_head else "layer",
                "forward_s": float(op.forward_s[0]),
                "backward_s": float(op.backward_s[0]),
            }
            for op in terms.operations
        ],
    )
    if not estimate.fits:
        notes.append(
            f"does not fit: needs {mem['required'] / _GIB:.1f} GiB per device of {system.memory_bytes / _GIB:.1f} GiB"
        )
    estimate.cost.update(job_cost(system, job, step_s, offer))
    return estimate


def job_cost(system: System, job: TrainingJob, step_s: float, offer: str) -> dict[str, Any]:
    """Time to train the token budget, device-hours, cost at the instance price, energy at TDP."""
    if job.tokens is None:
        return {}
    steps = int(-(-job.tokens // job.tokens_per_step))
    seconds = steps * step_s
    device_hours = seconds / 3600 * system.num_devices
    out: dict[str, Any] = {"tokens": job.tokens, "steps": steps, "time_s": seconds, "device_hours": device_hours}
    power = system.power_watts
    out["energy_kwh"] = None if power is None else power * system.num_devices * seconds / 3.6e6
    price = system.price(offer)
    out["price_offer"] = offer
    if price is not None and price.usd_per_hour is not None:
        out["cost_usd"] = price.usd_per_hour * system.num_nodes * seconds / 3600
        out["price_usd_per_hour"] = price.usd_per_hour
        out["price_as_of"] = price.as_of.isoformat()
        out["price_region"] = price.region
    else:
        out["cost_usd"] = None
        out["price_note"] = (
            f"no {offer.replace('_', ' ')} price for {system.instance.id}"
            if system.instance
            else "no instance given: no price"
        )
    return out


LONG_SEQUENCE_TOKENS = 16_384  # from here on, context parallelism joins the candidates


def candidate_layouts(model: Transformer, system: System, job: TrainingJob) -> list[Layout]:
    """Plausible layouts: TP inside the scale-up domain, PP (interleaved or not) dividing the layers,
    CP for long sequences, EP for MoE models, a few micro-batches, recompute modes and ZeRO stages."""
    out: list[Layout] = []
    devices = system.num_devices
    tps = [t for t in (1, 2, 4, 8, 16, 32, 64) if t <= system.scaleup_devices and devices % t == 0]
    cps = (1, 2, 4, 8, 16) if job.seq_len >= LONG_SEQUENCE_TOKENS else (1,)
    eps = tuple(e for e in (1, 2, 4, 8, 16, 32, 64) if model.moe and model.moe.experts % e == 0) or (1,)
    for tp, pp, vp, cp, ep, mb, recompute, zero in itertools.product(
        tps, (1, 2, 4, 8, 16, 32), (1, 2, 4), cps, eps, (1, 2, 4), tuple(Recompute), (0, 1, 3)
    ):
        if devices % (tp * pp * cp) or (vp > 1 and pp == 1):
            continue
        dp = devices // (tp * pp * cp)
        layout = Layout(
            tp=tp, pp=pp, vp=vp, cp=cp, ep=ep, dp=dp, micro_batch=mb, recompute=recompute, zero=zero,
            sequence_parallel=tp > 1,
        )  # fmt: skip
        try:
            layout.check(model, num_devices=devices, global_batch=job.global_batch, seq_len=job.seq_len)
        except ClusterSimError:
            continue
        out.append(layout)
    return out


def choose_layout(
    model: Transformer, system: System, job: TrainingJob, *, efficiency: FamilyEfficiency | None = None
) -> Layout:
    """The fastest candidate layout that fits in memory (``ClusterSimError`` when none fits)."""
    layouts = candidate_layouts(model, system, job)
    if not layouts:
        raise ClusterSimError(
            f"no layout of {model.name} fits the rules on {system.num_devices} devices with global batch "
            f"{job.global_batch}; try another device count or batch"
        )
    terms, memory = evaluate_layouts(model, system, LayoutArrays.of(layouts), job, efficiency=efficiency)
    step = np.where(memory.required <= system.memory_bytes, terms.step_s, np.inf)
    best = int(np.argmin(step))
    if not np.isfinite(step[best]):
        need = float(memory.required.min()) / _GIB
        raise ClusterSimError(
            f"{model.name} does not fit on {system.name}: the leanest layout needs {need:.1f} GiB per device, "
            f"the device has {system.memory_bytes / _GIB:.1f} GiB; use more devices or a larger-memory accelerator"
        )
    return layouts[best]
