"""One training step, term by term, for many layouts at once (numpy arrays, one element per layout).

Compute per micro-batch and layer on one device is the sum of the operations of ``clustersim.workload.ops``
(GEMMs, the attention core, memory traffic) on a roofline at the family's fitted efficiencies; the output head
runs on the last stage (in BF16 for an 8- or 4-bit job unless the profile quantizes it). Recompute repeats the
forward pass (full) or the attention core (selective). Communication goes through ``clustersim.network`` on the
links each group uses (``System``): TP all-reduces (or all-gather + reduce-scatter with SP) of ``T h``
activations, two forward and two backward per layer (two more with full recompute); CP exchanges keys and
values behind the attention core; EP all-to-all dispatch and combine; PP send/recv; DP gradient all-reduce
(ZeRO 0) or reduce-scatter + parameter all-gather (ZeRO >= 1), the routed experts' over the expert data-parallel
ranks, overlapped with the last micro-batch's backward and the first's forward.

The step is ``(m + (pp - 1) / vp) x`` the slowest stage's micro-batch time, plus exposed DP time, the optimizer
(a memory-bound pass over the local shard of parameters) and the host's (``clustersim.training.host_launches``).
Each term is a ``clustersim.training.terms.step_term`` function; ``StepContext`` derives the per-micro-batch times
they share once. Collectives are priced by a ``CollectiveCost`` (the analytic model unless another is given).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar, overload

import numpy as np
import numpy.typing as npt

from clustersim.catalog.schema import Dtype
from clustersim.choices import SelectiveRecompute
from clustersim.compute.dispatch import dispatch_copy_ratios
from clustersim.compute.efficiency import FamilyEfficiency
from clustersim.compute.memory import SyncGroup, data_parallel_groups, gathered_weight_bytes, local_params
from clustersim.compute.precision import head_precision
from clustersim.compute.software import SoftwareProfile, software_for
from clustersim.compute.stages import slowest_stage
from clustersim.execution import LayoutArrays
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.network.topology import ranks_per_domain
from clustersim.recompute_layout import recomputes_moe_layer
from clustersim.system import System
from clustersim.training.host_launches import eager_wait_s, partial_graph_wait_s
from clustersim.training.layer_times import fused_expert_mlp_in, layer_operations_in, mean_layer_times
from clustersim.training.offload import offload_times
from clustersim.training.pricing import OperationTimes, Systems, collective_s, operation_times
from clustersim.training.recompute_modules import share_forward_s, stated_modules_forward_s
from clustersim.training.terms import STEP_TERMS, StepTerms, TermTimes, step_term
from clustersim.training.zero3 import zero3_times
from clustersim.workload.ops import (
    Operation,
    OpKind,
    alternate_matmul_recompute_share,
    head_operations,
)
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

ACT_BYTES = 2.0  # activations and TP/PP messages in 16 bits (FP8 runs too)
OPTIMIZER_BYTES_PER_PARAM = 30.0  # Adam: read grad, master, m, v (16); write master, m, v (12), weight (2)
ATTENTION_NAMES = frozenset({"attention core", "attention scores"})  # what selective recompute repeats
ATTENTION_BLOCK = ATTENTION_NAMES | {"qkv", "output projection"}  # a layer's attention, the rest its MLP


T = TypeVar("T")


class _derived(Generic[T]):
    """A property computed on first use and stored on the instance (functools.cached_property without
    its per-instance lock, which costs a tenth of an estimate on Python 3.11)."""

    def __init__(self, compute: Callable[[Any], T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> _derived[T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> T: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> T | _derived[T]:
        if instance is None:
            return self
        value = self.compute(instance)
        instance.__dict__[self.name] = value
        return value


@dataclass(frozen=True)
class StepContext:
    """What every term reads: the inputs, and per-micro-batch times derived once (cached). The layouts run on
    one system, or each on its own of ``Systems`` with its own global batch (one element per layout)."""

    model: Transformer
    system: System | Systems
    eff: FamilyEfficiency
    sw: SoftwareProfile
    lay: LayoutArrays
    seq_len: int
    global_batch: int | npt.NDArray[np.int64]
    precision: Dtype
    cost: CollectiveCost

    def collective_s(
        self,
        op: Op,
        size_bytes: npt.ArrayLike,
        num_ranks: npt.ArrayLike,
        stride: npt.ArrayLike,
        where: npt.ArrayLike = True,
    ) -> FloatArray:
        """``collective_s`` on this context's system and cost model."""
        return collective_s(self.system, self.cost, op, size_bytes, num_ranks, stride, where)

    @_derived
    def tokens(self) -> FloatArray:
        """Tokens of one micro-batch on one context-parallel rank."""
        return np.asarray(self.lay.micro_batch * self.seq_len / self.lay.cp.astype(float), dtype=np.float64)

    @_derived
    def layer_ops(self) -> list[Operation]:
        """The operations of one layer on one device."""
        return layer_operations_in(self, self.precision)

    @_derived
    def fused_expert_mlp(self) -> bool:  # whether the profile's fused expert MLP runs for this job
        return fused_expert_mlp_in(self, self.precision)

    @_derived
    def layer(self) -> list[OperationTimes]:
        """Roofline times of one layer's operations (the mean layer where some are BF16: ``mean_layer_times``)."""
        return mean_layer_times(self)

    @_derived
    def head(self) -> list[OperationTimes]:
        """Roofline times of the output head (last stage): its logits GEMM in BF16 unless the profile quantizes it."""
        tp, sw = self.lay.tp.astype(float), self.sw
        ops = head_operations(self.model, tokens=self.tokens, tp=tp, eager_elementwise=sw.eager_elementwise)
        logits = head_precision(self.precision, quantized=sw.quantized_head)
        price = partial(operation_times, system=self.system, eff=self.eff, kernel_efficiency=sw.kernel_efficiency)
        return [price([op], precision=logits if op.name == "logits" else self.precision, in_head=True)[0] for op in ops]

    def _layer_sum(self, keep: Callable[[OperationTimes], bool], backward: bool = False) -> FloatArray:
        total = sum(
            ((t.backward_s if backward else t.forward_s) for t in self.layer if keep(t)), np.zeros_like(self.tokens)
        )
        return np.asarray(total, dtype=np.float64)

    @_derived
    def layer_fwd(self) -> FloatArray:
        """Forward time of one layer."""
        return self._layer_sum(lambda t: True)

    @_derived
    def layer_bwd(self) -> FloatArray:
        """Backward time of one layer."""
        return self._layer_sum(lambda t: True, backward=True)

    @_derived
    def linear_fwd(self) -> FloatArray:
        """Forward time of one layer's GEMMs (what TP communication can hide behind)."""
        kinds = {op.name: op.kind for op in self.layer_ops}
        return self._layer_sum(lambda t: kinds[t.name] is OpKind.GEMM)

    @_derived
    def attention_fwd(self) -> FloatArray:
        """Forward time of one layer's attention core (what selective recompute repeats)."""
        return self._layer_sum(lambda t: t.name in ATTENTION_NAMES)

    @_derived
    def attention_fwd_bwd(self) -> FloatArray:
        """Forward and backward time of one layer's attention core (what the CP exchange hides behind)."""
        return self.attention_fwd + self._layer_sum(lambda t: t.name in ATTENTION_NAMES, backward=True)

    @_derived
    def stage(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """The slowest stage's layers, 1 where it runs the head, the layers before the last (``slowest_stage``)."""
        head = sum((t.forward_s + t.backward_s for t in self.head), np.zeros_like(self.tokens))
        return slowest_stage(self.model, self.lay, self.layer_fwd + self.layer_bwd, head)

    @_derived
    def layers_here(self) -> FloatArray:
        """Layers of the slowest pipeline stage."""
        return self.stage[0]

    @_derived
    def fwd_mb(self) -> FloatArray:
        """Forward time of one micro-batch on the slowest stage (its layers, and the head on the last)."""
        return self.layers_here * self.layer_fwd + self.stage[1] * sum(t.forward_s for t in self.head)

    @_derived
    def bwd_mb(self) -> FloatArray:
        """Backward time of one micro-batch on the slowest stage."""
        return self.layers_here * self.layer_bwd + self.stage[1] * sum(t.backward_s for t in self.head)

    @_derived
    def selective_fwd(self) -> FloatArray:
        """Forward time of what one layer's selective recompute runs again: the modules a layout states, else the
        framework's: the attention core, or under its per-op policy every second matmul and the element-wise passes."""
        default = self.attention_fwd
        if self.sw.selective_recompute is not SelectiveRecompute.ATTENTION_CORE:
            default = share_forward_s(self.layer_ops, self.layer, partial(alternate_matmul_recompute_share, self.model))
        return stated_modules_forward_s(
            self.model, self.lay, self.layer_ops, self.layer, default, fused_expert_mlp=self.fused_expert_mlp
        )

    @_derived
    def rec_mb(self) -> FloatArray:
        """Recomputed forward time of one micro-batch: whole layers (full) or what selective recompute repeats."""
        full, selective = self.lay.recompute_full, self.lay.recompute_selective
        return self.layers_here * np.where(full, self.layer_fwd, np.where(selective, self.selective_fwd, 0.0))

    @_derived
    def micro_batches(self) -> FloatArray:
        """Micro-batches per step and pipeline."""
        return np.asarray(np.maximum(self.global_batch // (self.lay.dp * self.lay.micro_batch), 1), dtype=np.float64)

    @_derived
    def act_bytes(self) -> FloatArray:
        """Bytes of one micro-batch's activations at a layer boundary (before any split)."""
        return ACT_BYTES * self.tokens * self.model.hidden

    @_derived
    def tp_mb(self) -> TermTimes:
        """TP link and exposed time per micro-batch.

        Two all-reduces forward, two backward, two more in a fully recomputed forward; sequence
        parallelism swaps each for an all-gather + reduce-scatter (same bytes) and all-gathers the two
        GEMM inputs again in the backward pass (one all-reduce's worth), unless the framework kept them
        gathered (``tp_keeps_gathered_inputs``) and no selective recompute gathers them again.
        """
        lay = self.lay
        per_layer = self.collective_s(Op.ALL_REDUCE, self.act_bytes, lay.tp, np.ones_like(lay.tp))
        regather = lay.sequence_parallel & (lay.recompute_selective | (not self.sw.tp_keeps_gathered_inputs))
        count = 4 + 2 * lay.recompute_full + regather
        link = self.layers_here * count * per_layer
        gemm_time = self.layers_here * (self.linear_fwd * (3 + lay.recompute_full))
        overlap = np.where(np.isnan(lay.tp_overlap), float(self.sw.tp_overlap), lay.tp_overlap) > 0
        return TermTimes(link, np.where(overlap, np.maximum(link - gemm_time, 0.0), link))

    @_derived
    def cp_mb(self) -> TermTimes:
        """CP key/value exchange per micro-batch (one gather forward, two backward), hidden behind the
        attention core's forward and backward: the keys and values the
        attention kernel reads (latent attention's up-projected ones: TE's ring attention passes K and V)."""
        lay, m = self.lay, self.model
        kv_bytes = ACT_BYTES * self.tokens * (m.kv_width + m.kv_heads * m.value_head_dim) / lay.tp * lay.cp
        link = self.layers_here * 3 * self.collective_s(Op.ALL_GATHER, kv_bytes, lay.cp, lay.tp)
        return TermTimes(link, np.maximum(link - self.layers_here * self.attention_fwd_bwd, 0.0))

    @_derived
    def ep_mb(self) -> TermTimes:
        """EP all-to-all per micro-batch: dispatch and combine, forward and backward (the dispatch in
        FP8 where the framework sends it so), and once more where the layout recomputes the MoE layer.

        Overlapped (the layout's ``ep_overlap``, else the framework's), Megatron-Core's combined 1F1B
        runs one micro-batch's forward beside another's backward, layer by layer, each all-to-all
        behind one block of the other pass: the forward dispatch behind the MLP's backward, the forward
        combine behind the attention's backward, the backward's combine and dispatch behind the
        attention's and the MLP's forward. What a block cannot cover stays exposed; of what it could, the
        schedule hides ``ep_overlap_efficiency``, and the hidden time slows the compute by the share of
        the SMs the communication kernels hold (``ep_overlap_sm_share``)."""
        moe = self.model.moe
        if moe is None:
            return TermTimes(np.zeros_like(self.tokens), np.zeros_like(self.tokens))
        lay, sw = self.lay, self.sw
        # Megatron-Core dispatches the sequence-parallel shard, tokens / tp a rank (a latent MoE's latent rows)
        elements = self.tokens / lay.tp.astype(float) * moe.top_k * self.model.expert_input
        dispatch_bytes = sw.ep_dispatch_bytes_fp8 if self.precision is Dtype.FP8 else ACT_BYTES
        group = (lay.ep, lay.ep_stride)
        dispatch, combine = (self._ep_alltoall(b * elements, *group) for b in (dispatch_bytes, ACT_BYTES))
        moe_layers = self.layers_here * self.model.moe_layers / self.model.layers  # dense layers send no tokens
        once = moe_layers * (dispatch + combine)  # one pass's dispatch and combine
        link = 2 * once
        overlap = np.where(np.isnan(lay.ep_overlap), float(sw.ep_overlap), lay.ep_overlap) > 0
        attention = (
            self._layer_sum(lambda t: t.name in ATTENTION_BLOCK),
            self._layer_sum(lambda t: t.name in ATTENTION_BLOCK, backward=True),
        )
        mlp = self.layer_fwd - attention[0], self.layer_bwd - attention[1]
        pairs = ((dispatch, mlp[1]), (combine, attention[1]), (combine, attention[0]), (dispatch, mlp[0]))
        coverable = moe_layers * sum((np.minimum(comm, block) for comm, block in pairs), np.zeros_like(link))
        hidden = np.where(overlap, sw.ep_overlap_efficiency * coverable, 0.0)
        again = once * recomputes_moe_layer(lay)  # a recomputed MoE layer dispatches and combines again, exposed
        return TermTimes(link + again, link - hidden + hidden * sw.ep_overlap_sm_share + again)

    def _ep_alltoall(
        self, size_bytes: FloatArray, ranks: npt.NDArray[np.int64], stride: npt.NDArray[np.int64]
    ) -> FloatArray:
        """One dispatch or combine. Megatron-Core's alltoall dispatcher: NCCL's all-to-all of every token-expert
        copy. DeepEP or HybridEP (the layout's ``ep_dispatcher``, else the framework's ``ep_dispatch_per_node``): a
        token crosses the network once per remote node holding its experts (``network_copy_ratio`` of the bytes) and
        the scale-up fabric, pipelined, once per GPU holding them (``gpu_copy_ratio``): the slower of the two."""
        moe, per_node = self.model.moe, self.ep_per_node
        assert moe is not None  # ep_mb prices no exchange for a dense model
        local = ranks_per_domain(self.system.scaleup_devices, stride, ranks)
        nodes = np.ceil(ranks / local)
        ratio, per_gpu = dispatch_copy_ratios(moe, nodes, ranks)
        spans = per_node & (nodes > 1)
        network = self.collective_s(Op.ALLTOALL, size_bytes * ratio, ranks, stride, where=spans)
        fan_out = self.collective_s(Op.ALLTOALL, size_bytes * per_gpu, local, stride, where=spans)
        inside = self.collective_s(Op.ALLTOALL, size_bytes * per_gpu, ranks, stride, where=per_node & ~spans)
        plain = self.collective_s(Op.ALLTOALL, size_bytes, ranks, stride, where=~per_node)  # only where priced so
        return np.where(spans, np.maximum(network, fan_out), np.where(per_node, inside, plain))

    @_derived
    def ep_per_node(self) -> npt.NDArray[np.bool_]:
        """Whether each layout dispatches per node (DeepEP, HybridEP): its ``ep_dispatcher``, else the
        framework's ``ep_dispatch_per_node``."""
        stated = self.lay.ep_per_node
        assert stated is not None
        return np.where(np.isnan(stated), float(self.sw.ep_dispatch_per_node), stated) > 0

    @_derived
    def pp_mb(self) -> FloatArray:
        """PP sends per micro-batch: the stage's output split over its TP ranks, one each way per chunk."""
        lay = self.lay
        hop = self.collective_s(Op.SENDRECV, self.act_bytes / lay.tp, np.minimum(lay.pp, 2), lay.tp * lay.cp * lay.dp)
        return np.where(lay.pp > 1, 2 * lay.vp.astype(float) * hop, 0.0)

    @_derived
    def grad_bytes_per_element(self) -> float:
        """Bytes per gradient element the framework reduces in this precision."""
        sw = self.sw
        return sw.grad_reduce_bytes_fp16 if self.precision is Dtype.FP16 else sw.grad_reduce_bytes_bf16

    @_derived
    def zero3_mb(self) -> TermTimes:
        """ZeRO-3 / FSDP per micro-batch (``zero3.zero3_times``)."""
        return zero3_times(self)

    @_derived
    def params(self) -> FloatArray:
        """Parameters of the fullest stage on one device (before ZeRO sharding): every group's."""
        return np.asarray(sum(held for held, _, _ in self.dp_groups), dtype=np.float64)

    @_derived
    def dp_groups(self) -> tuple[SyncGroup, ...]:
        """The parameters each data-parallel group reduces (``data_parallel_groups``)."""
        return data_parallel_groups(self.model, self.lay)


def step_terms(
    model: Transformer,
    system: System | Systems,
    eff: FamilyEfficiency,
    lay: LayoutArrays,
    *,
    seq_len: int,
    global_batch: int | npt.NDArray[np.int64],
    precision: Dtype,
    cost: CollectiveCost = ANALYTIC,
    software: SoftwareProfile | None = None,
) -> StepTerms:
    """Every registered term of the step for each layout (see the module docstring); ``software``
    defaults to the Megatron profile on this accelerator family. With ``Systems``, each layout is priced on its
    own system and ``global_batch`` (one per layout) as it would be alone."""
    sw = software or software_for(None, system.accelerator.family)
    ctx = StepContext(model, system, eff, sw, lay, seq_len, global_batch, precision, cost)
    return StepTerms(
        times={term.name: term.compute(ctx) for term in STEP_TERMS},
        micro_batches=ctx.micro_batches,
        operations=ctx.layer + ctx.head,
    )


def _same(times: FloatArray) -> TermTimes:
    return TermTimes(times, times)


@step_term("forward", "compute (forward pass)")
def _forward(ctx: StepContext) -> TermTimes:
    return _same(ctx.micro_batches * ctx.fwd_mb)


@step_term("backward", "compute (backward pass)")
def _backward(ctx: StepContext) -> TermTimes:
    return _same(ctx.micro_batches * ctx.bwd_mb)


@step_term("recompute", "activation recompute")
def _recompute(ctx: StepContext) -> TermTimes:
    return _same(ctx.micro_batches * ctx.rec_mb)


@step_term("activation offload", "activation offload to host memory: fewer offloaded layers, or recompute")
def _offload(ctx: StepContext) -> TermTimes:
    return offload_times(ctx)


@step_term("pipeline bubble", "the pipeline bubble: more micro-batches or interleaving shrink it")
def _bubble(ctx: StepContext) -> TermTimes:
    """The bubble idles for (pp - 1) / vp micro-batch times of the stages before the last (the output head
    runs on the last stage only, inside its own m micro-batches), communication on the critical path included;
    a stated last stage's layers set the others' (``stages``), its per-layer terms scaled to theirs."""
    share = (ctx.lay.pp.astype(float) - 1) / ctx.lay.vp.astype(float)
    layers, on_last, before_last = ctx.stage
    head = on_last * sum((t.forward_s + t.backward_s for t in ctx.head), np.zeros_like(ctx.tokens))
    exposed = ctx.tp_mb.exposed_s + ctx.cp_mb.exposed_s + ctx.ep_mb.exposed_s  # per layer of the stage, as compute
    per_layer = (ctx.fwd_mb + ctx.bwd_mb - head + ctx.rec_mb + exposed) / layers
    return _same(share * (per_layer * before_last + ctx.pp_mb))


TP_COMM = "tp comm"
TP_COMM_INSIDE_WORDS = "tensor-parallel communication, inside the scale-up domain already: a smaller TP, or overlap it"
"""The bottleneck's words where the layout's TP already fits the scale-up domain (keeping it inside is no advice)."""


@step_term(TP_COMM, "tensor-parallel communication: keep TP inside the scale-up domain or overlap it")
def _tp(ctx: StepContext) -> TermTimes:
    return ctx.tp_mb.times(ctx.micro_batches)


@step_term("cp comm", "context-parallel exchange")
def _cp(ctx: StepContext) -> TermTimes:
    return ctx.cp_mb.times(ctx.micro_batches)


@step_term("ep comm", "expert all-to-all")
def _ep(ctx: StepContext) -> TermTimes:
    return ctx.ep_mb.times(ctx.micro_batches)


@step_term("pp comm", "pipeline send/recv")
def _pp(ctx: StepContext) -> TermTimes:
    return _same(ctx.micro_batches * ctx.pp_mb)


@step_term("dp comm", "data-parallel communication: overlap it or shard with ZeRO")
def _dp(ctx: StepContext) -> TermTimes:
    """Gradients (and parameters with ZeRO) across each data-parallel group (``data_parallel_groups``).

    ZeRO 0-2: one all-reduce (or reduce-scatter, then an all-gather of the updated parameters, in 16 bits or
    the job's 8-bit format: ``gathered_weight_bytes``) per step, overlapped with the last micro-batch's backward
    and the first's forward when the layout enables it and the framework does it (``grad_reduce_overlap``; else
    after the backward pass). ZeRO-3 / FSDP: see ``zero3_mb``, every micro-batch."""
    lay = ctx.lay
    once, per_step = (lay.zero >= 1) & (lay.zero < 3), lay.zero < 3
    grad_reduce, param_gather = np.zeros_like(ctx.params), np.zeros_like(ctx.params)
    for params, ranks, stride in ctx.dp_groups:
        grad_bytes = params * ctx.grad_bytes_per_element
        allreduce = ctx.collective_s(Op.ALL_REDUCE, grad_bytes, ranks, stride, where=lay.zero == 0)
        scatter = ctx.collective_s(Op.REDUCE_SCATTER, grad_bytes, ranks, stride, where=once)
        grad_reduce = grad_reduce + np.where(once, scatter, allreduce)
        gathered = params * gathered_weight_bytes(ctx.precision, ctx.sw.fp8_param_gather)
        param_gather = param_gather + ctx.collective_s(Op.ALL_GATHER, gathered, ranks, stride, where=once)
    step_link = grad_reduce + param_gather
    step_exposed = np.where(
        lay.dp_overlap & ctx.sw.grad_reduce_overlap,
        np.maximum(grad_reduce - ctx.bwd_mb, 0.0) + np.maximum(param_gather - ctx.fwd_mb, 0.0),
        step_link,
    )
    m = ctx.micro_batches
    zero3 = ctx.zero3_mb
    return TermTimes(
        np.where(per_step, step_link, m * zero3.link_s), np.where(per_step, step_exposed, m * zero3.exposed_s)
    )


@step_term("optimizer", "the optimizer step")
def _optimizer(ctx: StepContext) -> TermTimes:
    """A memory-bound pass over the local shard of parameters (each group's), and the family's fixed cost per step."""
    local = local_params(ctx.dp_groups, ctx.lay, 1)
    hbm = ctx.system.memory_bandwidth_bytes_per_s * ctx.eff.memory_efficiency
    return _same(local * OPTIMIZER_BYTES_PER_PARAM / hbm + ctx.eff.step_s)


@step_term("framework overhead", "host-side framework overhead per layer and step (hooks, launches)")
def _framework(ctx: StepContext) -> TermTimes:
    """The software's host-side cost: per layer and micro-batch, once per step, and launches the GPU waits for."""
    per_layer = ctx.micro_batches * ctx.layers_here * ctx.sw.layer_overhead_s
    return _same(per_layer + ctx.sw.step_overhead_s + eager_wait_s(ctx) + partial_graph_wait_s(ctx))
