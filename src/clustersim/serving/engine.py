"""The physics of serving a transformer: bytes held, bytes moved and FLOPs of one engine step.

One step of an in-flight (continuous) batching engine runs every decoding sequence one token
forward and, in the same GEMMs, a chunk of prompt tokens of newly admitted requests (TensorRT-LLM
in-flight batching, vLLM chunked prefill). Each kind of work is a roofline on one device, and the
kinds run one after the other (separate kernels), so the step time is their sum:

* **GEMMs**: ``max(2 x tokens x matmul params / FLOP/s, weights read / HBM bytes/s)``; the weights
  are read once per step whatever the batch, so small batches are memory-bound and large ones
  compute-bound;
* **decode attention**: every decoding sequence reads its whole KV cache (memory-bound);
* **prefill attention**: causal ``2 x layers x q_width x n^2`` FLOPs per prompt (compute-bound);
* **elementwise** work (norms, residuals, rotary): hidden-vector reads and writes per token;
* **tensor-parallel all-reduces**: two per layer of ``tokens x hidden x 2`` bytes, from the
  collectives model (``clustersim.network``), each plus a synchronization cost; pipeline stages add
  one send per step;
* **overheads**: a fixed cost per step and a host-side cost per sequence.

Achieved fractions of the dense peak and of the HBM bandwidth and the overheads are fitted once
(``benchmarks/calibrate_inference.py``) and live in ``InferenceCalibration``. Everything is per
device and vectorized over the number of decoding sequences.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
import numpy.typing as npt

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Instance
from clustersim.errors import ClusterSimError
from clustersim.network.analytic import predict_collective
from clustersim.network.collectives import Op
from clustersim.network.fabric import Fabric
from clustersim.system import System, system_for_instance, system_from_case
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]
GIB = 2**30
ACTIVATION_BYTES = 2  # activations and all-reduce payloads stay bf16, also with fp8 GEMMs


class Precision(StrEnum):
    """Number format of the weights and GEMM inputs (``fp8``: fp8 weights and activations)."""

    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"

    @property
    def num_bytes(self) -> int:
        """Bytes per element."""
        return 1 if self is Precision.FP8 else 2


def parse_precision(value: str, field_name: str = "precision") -> Precision:
    """A ``Precision`` from text; ``ClusterSimError`` naming the field and the valid values."""
    try:
        return Precision(value.strip().lower())
    except ValueError:
        valid = ", ".join(p.value for p in Precision)
        raise ClusterSimError(f"{field_name}: unknown value {value!r} (valid: {valid})") from None


@dataclass(frozen=True, slots=True)
class InferenceCalibration:
    """Achieved efficiencies and engine limits; fitted once on ../shared/validation/inference.jsonl."""

    # Fitted: achieved fraction of the dense peak on GEMMs (TensorRT-LLM fp8 on H100).
    flop_efficiency: float = 0.59
    # Assumed: achieved fraction of the HBM bandwidth on weight and KV-cache reads; STREAM-like
    # copies reach about 0.9 of an H100's 3.35 TB/s, and the fit runs into that bound.
    hbm_efficiency: float = 0.90
    # Fitted: achieved fraction of the dense peak on causal prefill attention (flash attention).
    attention_flop_efficiency: float = 0.26
    # Counted: reads and writes of a token's hidden vector per layer outside the GEMMs (two norms
    # read and write, two residual adds read two and write one, rotary and activation I/O): 10.
    # Not split by TP: each rank holds the full vector.
    activation_passes: float = 10.0
    # Fitted: fixed cost per step (kernel launches, scheduling).
    step_overhead_s: float = 1.67e-3
    # Fitted: time each tensor-parallel all-reduce adds beyond the collective itself (the ranks
    # wait for the slowest one: kernel skew at every synchronization).
    sync_overhead_s: float = 4.4e-5
    # Fitted: host-side cost per sequence per step (scheduling, sampling, detokenizing).
    sequence_overhead_s: float = 1.9e-6
    # Share of the memory left after weights and workspace that the engine gives the KV cache:
    # trtllm-bench's kv_cache_free_gpu_mem_fraction, 0.95 (TensorRT-LLM's runtime default is 0.9).
    kv_memory_fraction: float = 0.95
    # Assumed: activations for the largest step, CUDA graphs, NCCL/custom all-reduce buffers and
    # the CUDA context, per device.
    workspace_bytes: float = 3.0 * GIB
    # Paged KV cache block (TensorRT-LLM tokens_per_block = 32; vLLM uses 16).
    kv_block_tokens: int = 32
    # trtllm-bench caps (tensorrt_llm/bench/build/tuning.py finetune_setting): 4096 sequences per
    # engine (decoder buffers) and 32768 tokens per step (activation buffers).
    max_batch_sequences: int = 4096
    max_tokens_per_step: int = 32768


DEFAULT_CALIBRATION = InferenceCalibration()


@dataclass(frozen=True, slots=True)
class Device:
    """One device as serving sees it: capacity, bandwidth and dense peak per number format."""

    name: str
    memory_bytes: float
    memory_bandwidth_bytes_per_s: float
    dense_flop_per_s: dict[str, float] = field(default_factory=dict)

    def peak_flop_per_s(self, precision: Precision | str) -> float:
        """Dense peak for ``precision``; ``ClusterSimError`` listing the formats the device has."""
        key = str(precision)
        if key not in self.dense_flop_per_s:
            known = ", ".join(sorted(self.dense_flop_per_s))
            raise ClusterSimError(f"precision: {self.name} has no dense {key} figure (valid: {known})")
        return self.dense_flop_per_s[key]

    def scaled(self, factor: float, name: str | None = None) -> Device:
        """The device with capacity, bandwidth and FLOP/s multiplied by ``factor`` (a core of a chip)."""
        return Device(
            name or self.name,
            self.memory_bytes * factor,
            self.memory_bandwidth_bytes_per_s * factor,
            {k: v * factor for k, v in self.dense_flop_per_s.items()},
        )


@dataclass(frozen=True, slots=True)
class ServingSystem:
    """``dp`` replicas of a ``tp x pp`` model on ``device``; fabrics for the TP group and PP sends."""

    name: str
    device: Device
    tp: int = 1
    pp: int = 1
    dp: int = 1
    tp_fabric: Fabric | None = None
    pp_fabric: Fabric | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp"):
            if getattr(self, name) < 1:
                raise ClusterSimError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.tp > 1 and self.tp_fabric is None:
            raise ClusterSimError(f"tp {self.tp} needs a fabric for its all-reduces")

    @property
    def num_devices(self) -> int:
        """Devices of all replicas."""
        return self.tp * self.pp * self.dp


def check_layout(model: Transformer, tp: int, pp: int) -> None:
    """``ClusterSimError`` unless tp divides the heads (and kv heads, or kv heads divide tp) and pp the layers."""
    if model.heads % tp:
        raise ClusterSimError(f"tp: {tp} does not divide heads {model.heads} of {model.name}")
    if model.kv_heads % tp and tp % model.kv_heads:
        raise ClusterSimError(f"tp: {tp} and kv_heads {model.kv_heads} of {model.name} must divide one another")
    if model.layers % pp:
        raise ClusterSimError(f"pp: {pp} does not divide layers {model.layers} of {model.name}")


# ---- bytes -------------------------------------------------------------------------------------


def kv_heads_per_device(model: Transformer, tp: int) -> int:
    """KV heads each TP rank holds: kv_heads / tp, or one replicated head when kv_heads < tp."""
    return max(model.kv_heads // tp, 1)


def kv_bytes_per_token(model: Transformer, kv_precision: Precision, tp: int = 1, pp: int = 1) -> float:
    """KV-cache bytes one token adds on one device: K and V, its layers, its kv heads."""
    return 2.0 * (model.layers / pp) * kv_heads_per_device(model, tp) * model.head_dim * kv_precision.num_bytes


def _layer_matmul_params(model: Transformer) -> tuple[float, float]:
    """(dense matmul params of one layer, matmul params of one expert MLP); the expert part is 0 without MoE."""
    attention = model.hidden * (model.q_width + 2 * model.kv_width) + model.q_width * model.hidden
    mlp = model.ffn_type.num_matrices * model.hidden * model.expert_ffn
    if model.moe is None:
        return float(attention + mlp), 0.0
    shared = model.moe.shared_experts * mlp
    return float(attention + shared + model.router_params()), float(mlp)


def weight_bytes_per_device(model: Transformer, precision: Precision, tp: int = 1, pp: int = 1) -> float:
    """Weights held by one device: layer matmuls at ``precision``, the rest (embeddings, logits, norms) in bf16."""
    dense, expert = _layer_matmul_params(model)
    routed = model.moe.experts if model.moe else 0
    quantized = model.layers * (dense + routed * expert)
    rest = model.num_params() - quantized
    return (quantized * precision.num_bytes + rest * ACTIVATION_BYTES) / (tp * pp)


@dataclass(frozen=True, slots=True)
class MemoryPlan:
    """Memory of one device: what is held, what is left for the KV cache, and how many tokens that is."""

    memory_bytes: float
    weights_bytes: float
    workspace_bytes: float
    kv_budget_bytes: float
    kv_bytes_per_token: float
    kv_capacity_tokens: float


def memory_plan(
    model: Transformer,
    system: ServingSystem,
    precision: Precision,
    kv_precision: Precision,
    cal: InferenceCalibration = DEFAULT_CALIBRATION,
) -> MemoryPlan:
    """Split one device's memory; ``ClusterSimError`` when the weights and workspace do not fit."""
    usable = system.device.memory_bytes
    weights = weight_bytes_per_device(model, precision, system.tp, system.pp)
    budget = (usable - weights - cal.workspace_bytes) * cal.kv_memory_fraction
    if budget <= 0:
        raise ClusterSimError(
            f"model: {model.name} at {precision.value} needs {weights / GIB:.1f} GiB of weights + "
            f"{cal.workspace_bytes / GIB:.1f} GiB workspace per device, more than the "
            f"{usable / GIB:.1f} GiB of {system.device.name} at tp {system.tp} x pp {system.pp}; "
            f"use a larger tp or pp, fp8, or a device with more memory"
        )
    per_token = kv_bytes_per_token(model, kv_precision, system.tp, system.pp)
    return MemoryPlan(usable, weights, cal.workspace_bytes, budget, per_token, budget / per_token)


def reserved_tokens(
    input_tokens: float, output_tokens: float, cal: InferenceCalibration = DEFAULT_CALIBRATION
) -> float:
    """KV tokens a sequence reserves: its full length in whole paged blocks (no eviction)."""
    block = cal.kv_block_tokens
    return float(math.ceil((input_tokens + output_tokens) / block) * block)


# ---- one step ------------------------------------------------------------------------------------


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

    @property
    def gemm_s(self) -> FloatArray:
        """GEMMs: the larger of their compute and weight-read times."""
        return np.maximum(self.gemm_compute_s, self.gemm_memory_s)

    @property
    def step_s(self) -> FloatArray:
        """The whole step: the kinds of work one after the other."""
        work = self.gemm_s + self.decode_attention_s + self.prefill_attention_s + self.elementwise_s
        return work + self.communication_s + self.overhead_s

    @property
    def memory_bound_s(self) -> FloatArray:
        """Time spent in work bound by HBM bandwidth: memory-bound GEMMs, decode attention, elementwise."""
        gemm = np.where(self.gemm_memory_s >= self.gemm_compute_s, self.gemm_memory_s, 0.0)
        return gemm + self.decode_attention_s + self.elementwise_s


def step_times(
    model: Transformer,
    system: ServingSystem,
    precision: Precision,
    kv_precision: Precision,
    *,
    decode_sequences: npt.ArrayLike,
    decode_context_tokens: npt.ArrayLike,
    prefill_tokens: npt.ArrayLike,
    prefill_sequences: npt.ArrayLike,
    prompt_tokens: float,
    cal: InferenceCalibration = DEFAULT_CALIBRATION,
) -> StepTimes:
    """One step of one stage (one device): ``decode_sequences`` each read ``decode_context_tokens`` of
    KV cache and make one token; ``prefill_tokens`` prompt tokens of ``prefill_sequences`` prompts of
    ``prompt_tokens`` tokens each go through the same GEMMs. Arrays broadcast."""
    b = np.asarray(decode_sequences, dtype=np.float64)
    context = np.asarray(decode_context_tokens, dtype=np.float64)
    prefill = np.asarray(prefill_tokens, dtype=np.float64)
    prompts = np.asarray(prefill_sequences, dtype=np.float64)
    b, context, prefill, prompts = np.broadcast_arrays(b, context, prefill, prompts)
    tp, pp, device = system.tp, system.pp, system.device
    layers = model.layers / pp
    tokens = b + prefill
    logits_tokens = b + prompts  # the logits of decode tokens and of each prompt's last token

    flops_peak = device.peak_flop_per_s(precision) * cal.flop_efficiency
    head_peak = device.peak_flop_per_s(Precision.BF16) * cal.flop_efficiency
    bandwidth = device.memory_bandwidth_bytes_per_s * cal.hbm_efficiency
    dense, expert = _layer_matmul_params(model)
    head = float(model.vocab * model.hidden)
    active = dense + (model.moe.top_k * expert if model.moe else 0.0)
    compute = 2.0 * tokens * layers * active / tp / flops_peak + 2.0 * logits_tokens * head / (tp * pp) / head_peak

    # Weights read once per step; of the routed experts, the share some token of the step touches.
    touched = np.zeros_like(tokens)
    if model.moe is not None:
        share = model.moe.top_k / model.moe.experts
        touched = model.moe.experts * expert * (1.0 - (1.0 - share) ** np.maximum(tokens, 1.0))
    weights = (layers * (dense + touched) * precision.num_bytes + head * ACTIVATION_BYTES / pp) / tp
    memory = weights / bandwidth

    kv_token = kv_bytes_per_token(model, kv_precision, tp, pp)
    heads = model.heads / tp
    kv_read = b * context * kv_token + tokens * kv_token
    attention_flops = 4.0 * layers * heads * model.head_dim * context * b
    decode_attention = np.maximum(kv_read / bandwidth, attention_flops / flops_peak)
    causal = 2.0 * layers * heads * model.head_dim * prompt_tokens * prompt_tokens  # per prompt
    prefill_attention = prompts * causal / (device.peak_flop_per_s(precision) * cal.attention_flop_efficiency)

    elementwise = tokens * layers * cal.activation_passes * model.hidden * ACTIVATION_BYTES / bandwidth

    comm = np.zeros_like(b)
    payload = tokens * model.hidden * ACTIVATION_BYTES
    if tp > 1 and system.tp_fabric is not None:
        all_reduce = predict_collective(Op.ALL_REDUCE, payload.ravel(), system.tp_fabric).time_s
        comm = comm + 2.0 * layers * (all_reduce.reshape(b.shape) + cal.sync_overhead_s)
    if pp > 1 and system.pp_fabric is not None:
        comm = comm + predict_collective(Op.SENDRECV, payload.ravel(), system.pp_fabric).time_s.reshape(b.shape)
    overhead = cal.step_overhead_s + cal.sequence_overhead_s * (b + prompts)
    return StepTimes(
        gemm_compute_s=compute,
        gemm_memory_s=np.broadcast_to(memory, b.shape).astype(np.float64),
        decode_attention_s=decode_attention,
        prefill_attention_s=prefill_attention,
        elementwise_s=elementwise,
        communication_s=comm,
        overhead_s=overhead,
    )


# ---- systems from the catalog ----------------------------------------------------------------------


def device_from_system(system: System) -> Device:
    """The serving view of one device of ``system`` (a NeuronCore's share where cores count as devices)."""
    peaks = {dtype.value: system.peak_flop_per_s(dtype) for dtype in system.accelerator.dense_flop_per_s}
    name = system.accelerator.id if system.share == 1 else f"{system.share:g} of {system.accelerator.id}"
    return Device(name, system.memory_bytes, system.memory_bandwidth_bytes_per_s, peaks)


def _serving(system: System, name: str, *, tp: int, pp: int, dp: int) -> ServingSystem:
    """Replicas of tp x pp devices inside one node of ``system``: TP all-reduces and PP sends on its links."""
    return ServingSystem(
        name=name,
        device=device_from_system(system),
        tp=tp,
        pp=pp,
        dp=dp,
        tp_fabric=system.group_fabric(tp, 1),
        pp_fabric=system.group_fabric(2 if pp > 1 else 1, tp),
    )


def serving_system_for_instance(
    catalog: Catalog, instance: str | Instance, *, tp: int, pp: int = 1, dp: int | None = None
) -> ServingSystem:
    """``dp`` replicas (default: as many as fill the instance) of ``tp x pp`` devices in one instance."""
    entry = catalog.instance(instance) if isinstance(instance, str) else instance
    devices = int(entry.num_accelerators.value)
    if tp < 1 or pp < 1 or tp * pp > devices:
        raise ClusterSimError(
            f"tp x pp: {tp} x {pp} must fit the {devices} devices of one {entry.id} (the scale-up domain)"
        )
    replicas = devices // (tp * pp) if dp is None else dp
    if replicas < 1 or replicas * tp * pp > devices:
        raise ClusterSimError(f"dp: {replicas} replicas of tp {tp} x pp {pp} do not fit the {devices} devices")
    return _serving(system_for_instance(catalog, entry.id, 1), entry.id, tp=tp, pp=pp, dp=replicas)


def serving_system_for_accelerator(
    catalog: Catalog,
    accelerator: str,
    *,
    tp: int,
    pp: int = 1,
    dp: int = 1,
    devices_per_node: int | None = None,
    instance: str | None = None,
) -> ServingSystem:
    """A system from an accelerator id, as ground-truth cases give it.

    Where ``devices_per_node`` counts the cores of a catalogued instance's chips (NeuronCores on
    Trainium), each device is a core's share of a chip (see ``clustersim.system``).
    """
    per_node = devices_per_node or max(tp * pp * dp, 1)
    system = system_from_case(
        catalog, {"accelerator": accelerator, "devices": per_node, "devices_per_node": per_node, "instance": instance}
    )
    return _serving(system, f"{dp} x tp{tp} pp{pp} {system.accelerator.id}", tp=tp, pp=pp, dp=dp)
