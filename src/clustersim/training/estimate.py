"""Training estimate: step time with every term, memory, MFU, and the time, cost and energy of a job.

``estimate_training`` answers for one layout; ``evaluate_layouts`` evaluates many layouts in one
vectorized call (what ``clustersim.plan`` searches with).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from clustersim.catalog.schema import Dtype
from clustersim.choices import SelectiveRecompute
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.memory import MemoryArrays, memory_per_device
from clustersim.compute.scan_kernel import fp32_bound_note
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.execution import Layout, LayoutArrays, Recompute
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.recompute_layout import check_overlap_recompute
from clustersim.system import System
from clustersim.training.job import JobTotals, TrainingJob, job_totals
from clustersim.training.step import TP_COMM, TP_COMM_INSIDE_WORDS, step_terms
from clustersim.training.terms import StepTerms, bottleneck_words
from clustersim.workload.ops import (
    OpKind,
    alternate_matmul_recompute_flops_per_token,
    module_recompute_flops_per_token,
)
from clustersim.workload.transformer import Transformer

_GIB = 2**30


@dataclass(frozen=True)
class Term:
    """One term of the step: time on its links or units, and the part on the critical path."""

    name: str
    link_s: float
    exposed_s: float


@dataclass(frozen=True)
class MemoryBreakdown:
    """Bytes per device of the fullest pipeline stage, by kind."""

    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    overhead_bytes: float  # framework buffers and fragmentation (assumed)
    fragmentation_bytes: float = 0.0  # of the overhead, the caching allocator's (assumed)

    @property
    def total_bytes(self) -> float:
        """Model state and activations (what Korthikanti et al. count)."""
        return self.weights_bytes + self.gradients_bytes + self.optimizer_bytes + self.activations_bytes

    @property
    def reserved_bytes(self) -> float:
        """What a caching allocator reserves at the peak (PyTorch's ``max_memory_reserved``): the total and its
        fragmentation, not the framework's buffers outside it."""
        return self.total_bytes + self.fragmentation_bytes

    @property
    def required_bytes(self) -> float:
        """What a run needs: total plus overhead."""
        return self.total_bytes + self.overhead_bytes

    def to_json(self) -> dict[str, float]:
        """By kind, as the CLI's JSON has always named them."""
        return {
            "weights": self.weights_bytes,
            "gradients": self.gradients_bytes,
            "optimizer": self.optimizer_bytes,
            "activations": self.activations_bytes,
            "total": self.total_bytes,
            "overhead": self.overhead_bytes,
            "required": self.required_bytes,
        }


@dataclass(frozen=True)
class OperationTime:
    """One operation's seconds per micro-batch, in one layer or in the head (last stage)."""

    name: str
    scope: str  # "layer" or "head (last stage)"
    forward_s: float
    backward_s: float
    kind: OpKind  # what bounds it: GEMM, attention core or memory traffic


@dataclass(frozen=True)
class Estimate:
    """The answer for one model, layout, system and job."""

    model: str
    system: str
    layout: Layout
    job: TrainingJob
    step_s: float
    terms: tuple[Term, ...]
    memory: MemoryBreakdown
    capacity_bytes: float
    model_flops_per_step: float
    hardware_flops_per_step: float
    peak_flop_per_s: float
    num_devices: int
    bottleneck: str  # the largest term, in words
    network_model: str = ANALYTIC.name
    framework: str = ""  # the software profile's name
    notes: tuple[str, ...] = ()
    totals: JobTotals | None = None  # None: no token budget
    operations: tuple[OperationTime, ...] = ()  # per layer (or head), per micro-batch
    # of model_flops_per_step, the attention's two matmuls over the whole sequence (a causal count halves them)
    attention_flops_per_step: float = 0.0

    @property
    def fits(self) -> bool:
        """Whether the required memory (with overhead) fits the device."""
        return self.memory.required_bytes <= self.capacity_bytes

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
            "network_model": self.network_model,
            "framework": self.framework,
            "step_s": self.step_s,
            "terms": [asdict(t) for t in self.terms],
            "memory_bytes": self.memory.to_json(),
            "capacity_bytes": self.capacity_bytes,
            "fits": self.fits,
            "mfu": self.mfu,
            "hfu": self.hfu,
            "tokens_per_s_per_device": self.tokens_per_s_per_device,
            "model_tflops_per_device": self.model_flops_per_step / self.step_s / self.num_devices / 1e12,
            "bottleneck": self.bottleneck,
            "notes": list(self.notes),
            "operations": [asdict(op) for op in self.operations],
            "job": {} if self.totals is None else self.totals.to_json(),
        }


def evaluate_layouts(
    model: Transformer,
    system: System,
    layouts: LayoutArrays,
    job: TrainingJob,
    *,
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> tuple[StepTerms, MemoryArrays]:
    """Step terms and memory of many layouts in one vectorized call (no layout checks); ``efficiency``
    defaults to the accelerator family's fitted fractions, ``software`` to the Megatron profile."""
    eff = efficiency or efficiency_for(system.accelerator)
    sw = software or software_for(None, system.accelerator.family)
    terms = step_terms(
        model,
        system,
        eff,
        layouts,
        seq_len=job.seq_len,
        global_batch=job.global_batch,
        precision=job.precision,
        cost=cost,
        software=sw,
    )
    return terms, layouts_memory(model, layouts, job, sw)


def layouts_memory(model: Transformer, layouts: LayoutArrays, job: TrainingJob, sw: SoftwareProfile) -> MemoryArrays:
    """Memory per device of each layout of ``job`` under the framework ``sw`` (its attention kernel and the
    bytes it keeps per parameter): the one place the estimate and the layout search size it."""
    return memory_per_device(
        model,
        layouts,
        seq_len=job.seq_len,
        global_batch=job.global_batch,
        fused_attention=sw.fused_attention,
        state_bytes=sw.state_bytes,
        float8_inputs=sw.keeps_float8_inputs(job.precision),
        selective=sw.selective_recompute,
        loss_bytes_per_logit=sw.loss_bytes_per_logit,
        zero3_gathered_layers=sw.zero3_gathered_units / sw.zero3_collectives_per_layer,
        gathered_inputs=sw.tp_keeps_gathered_inputs,
        pipeline_unsharded=sw.pipeline_unsharded_state,
    )


def estimate_training(
    model: Transformer,
    system: System,
    layout: Layout,
    job: TrainingJob,
    *,
    offer: str = "on_demand",
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
    notes: tuple[str, ...] = (),
) -> Estimate:
    """The estimate for one layout; ``ClusterSimError`` if the layout is impossible. ``notes`` lead
    the estimate's own notes (e.g. how the layout was chosen)."""
    found = estimate_layouts(
        model, system, [layout], job, offer=offer, efficiency=efficiency, cost=cost, software=software, notes=notes
    )
    return found[0]


def estimate_layouts(
    model: Transformer,
    system: System,
    layouts: Sequence[Layout],
    job: TrainingJob,
    *,
    offer: str = "on_demand",
    efficiency: FamilyEfficiency | None = None,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
    notes: tuple[str, ...] = (),
    evaluated: tuple[StepTerms, MemoryArrays] | None = None,
) -> list[Estimate]:
    """``estimate_training`` of each of ``layouts`` on one system and job, their terms evaluated in one
    vectorized call (what a planner does for the few layouts it keeps of each system); ``evaluated``: their
    step terms and memory (one element each, ``evaluate_layouts``'s) where a search has them already (its layouts
    kept the rules and run on the framework: not checked again)."""
    sw = software or software_for(None, system.accelerator.family)
    for layout in layouts if evaluated is None else ():
        layout.check(model, num_devices=system.num_devices, global_batch=job.global_batch, seq_len=job.seq_len)
        sw.check_zero(layout.zero)
        sw.check_offload(layout.offload_layers, system.host_bytes_per_s, system.accelerator.id)
        if model.moe is not None:
            check_overlap_recompute(layout, sw.ep_overlap)
    terms, memory = evaluated or evaluate_layouts(
        model, system, LayoutArrays.of(list(layouts)), job, efficiency=efficiency, cost=cost, software=sw
    )
    eff = efficiency or efficiency_for(system.accelerator)
    model_flops = model.model_flops_per_token(job.seq_len) * job.tokens_per_step
    recompute_per_token = {
        Recompute.NONE: 0.0,
        Recompute.FULL: model.forward_flops_per_token(job.seq_len) - 2.0 * model.vocab * model.hidden,
    }
    if any(layout.recompute is Recompute.SELECTIVE for layout in layouts):  # what the framework's policy repeats
        recompute_per_token[Recompute.SELECTIVE] = (
            model.attention_flops_per_token(job.seq_len)
            if sw.selective_recompute is SelectiveRecompute.ATTENTION_CORE
            else alternate_matmul_recompute_flops_per_token(model, job.seq_len)
        )
    # each array read as Python floats once (a float of one element at a time costs more than the estimate's
    # arithmetic when a planner estimates a few layouts of each of many systems)
    weights, gradients, optimizer = memory.weights.tolist(), memory.gradients.tolist(), memory.optimizer.tolist()
    activations, overhead = memory.activations.tolist(), memory.overhead.tolist()
    fragmentation = memory.fragmentation.tolist()
    steps = terms.step_s.tolist()
    times = [(name, t.link_s.tolist(), t.exposed_s.tolist()) for name, t in terms.times.items()]
    scopes = [("head (last stage)" if op.in_head else "layer") for op in terms.operations]
    passes = [(op.forward_s.tolist(), op.backward_s.tolist()) for op in terms.operations]
    peak = system.peak_flop_per_s(job.precision)
    found = []
    for i, layout in enumerate(layouts):
        breakdown = MemoryBreakdown(
            weights_bytes=weights[i],
            gradients_bytes=gradients[i],
            optimizer_bytes=optimizer[i],
            activations_bytes=activations[i],
            overhead_bytes=overhead[i],
            fragmentation_bytes=fragmentation[i],
        )
        step_s = steps[i]
        top, _, top_exposed = max(times, key=lambda item: item[2][i])
        words = bottleneck_words(top)
        if top == TP_COMM and layout.tp <= system.scaleup_devices:
            words = TP_COMM_INSIDE_WORDS
        bottleneck = f"{words} ({100 * top_exposed[i] / step_s:.0f}% of the step)"
        found.append(
            Estimate(
                model=model.name,
                system=system.name,
                layout=layout,
                job=job,
                step_s=step_s,
                terms=tuple(Term(name, link[i], exposed[i]) for name, link, exposed in times),
                memory=breakdown,
                capacity_bytes=system.memory_bytes,
                model_flops_per_step=model_flops,
                attention_flops_per_step=3.0 * model.attention_flops_per_token(job.seq_len) * job.tokens_per_step,
                hardware_flops_per_step=model_flops
                + _recomputed_per_token(layout, recompute_per_token, model, job) * job.tokens_per_step,
                peak_flop_per_s=peak,
                num_devices=system.num_devices,
                bottleneck=bottleneck,
                network_model=cost.name,
                framework=sw.name,
                notes=notes + _notes(system, layout, breakdown, eff, model),
                totals=job_totals(system, job, step_s, offer),
                operations=tuple(
                    OperationTime(op.name, scope, forward[i], backward[i], op.kind)
                    for op, scope, (forward, backward) in zip(terms.operations, scopes, passes, strict=True)
                ),
            )
        )
    return found


def _recomputed_per_token(
    layout: Layout, policy_per_token: dict[Recompute, float], model: Transformer, job: TrainingJob
) -> float:
    """Forward matmul FLOPs per token that ``layout``'s recompute runs again: the modules it states, or the
    framework's policy (``policy_per_token``, by recompute kind)."""
    if layout.recompute is Recompute.SELECTIVE and layout.recompute_modules:
        return module_recompute_flops_per_token(model, job.seq_len, layout.recompute_modules)
    return policy_per_token[layout.recompute]


def _notes(
    system: System, layout: Layout, memory: MemoryBreakdown, eff: FamilyEfficiency, model: Transformer
) -> tuple[str, ...]:
    """What a reader should know: compute fractions not fitted to runs of this chip family, an assumed
    network, TP across the network, a layout that does not fit, a Mamba-2 scan at its FP32 bound."""
    notes = [system.network_note] if system.network_note else []
    clock = system.compute_clock_ratio
    peak = system.peak_flop_per_s(Dtype.BF16) * clock
    chip = system.accelerator
    if (scan := fp32_bound_note(model, chip.id, chip.family, peak, system.fp32_flop_per_s * clock)) is not None:
        notes.append(scan)
    if eff.fitted is None:
        notes.append(
            f"the {system.accelerator.family} compute fractions are not fitted to measured runs of the family: "
            f"{eff.source}"
        )
    if layout.tp > system.scaleup_devices:
        notes.append(
            f"tp {layout.tp} is wider than the {system.scaleup_devices} devices of the scale-up domain: "
            "tensor-parallel traffic crosses the network"
        )
    if memory.required_bytes > system.memory_bytes:
        notes.append(
            f"does not fit: needs {memory.required_bytes / _GIB:.1f} GiB per device of "
            f"{system.memory_bytes / _GIB:.1f} GiB"
        )
    return tuple(notes)
