"""The physics of serving a transformer: bytes held, bytes moved and FLOPs of one engine step.

One step of an in-flight (continuous) batching engine runs every decoding sequence one token
forward and, in the same GEMMs, a chunk of prompt tokens of newly admitted requests (TensorRT-LLM
in-flight batching, vLLM chunked prefill). Each kind of work is a roofline on one device, and the
kinds run one after the other (separate kernels), so the step time is their sum:

* **GEMMs**: ``max(2 x (tokens + half) x matmul params / FLOP/s, weights read / HBM bytes/s)``: a
  GEMM of ``tokens`` rows reaches ``tokens / (tokens + half)`` of the fitted fraction; the weights
  are read once per step whatever the batch, so small batches are memory-bound and large ones
  compute-bound. A MoE layer reads and runs only the routed experts its tokens touch, each a GEMM of
  its share of the rows (``top_k x tokens / experts``), so a step with few tokens per expert is
  slower than its FLOPs; each token also pays ``moe_token_layer_s`` in each MoE layer it passes
  (``moe_token_layers``: routing, permutation, the grouped GEMMs' shortfall, the weighted combine), a
  cost two sources fit alike whatever the top_k, hidden or expert width (calibration.toml);
* **decode attention**: every decoding sequence reads its KV cache (memory-bound): once per KV head
  with a GQA kernel, once per query head with an older per-head kernel (the engine's); a latent
  (MLA) cache once for all heads, a windowed layer at most its window (``clustersim.serving.memory``),
  at the HBM fraction of the family's decode kernels (``kv_read_efficiency_on``: Blackwell's reach less
  of their bandwidth than Hopper's);
* **prefill attention**: causal ``(q_width + context_width) x n^2`` FLOPs per prompt and layer, a windowed
  layer's keys capped at its window, priced as the training step prices its core (``prefill_core_s``: the products
  and a fused kernel's exposed exponentials); a native (non-flash) kernel's n^2 scores through HBM (``score_bytes``);
* **elementwise** work (norms, residuals, rotary): hidden-vector reads and writes per token;
* **tensor-parallel all-reduces**: two per layer of ``tokens x hidden x 2`` bytes, from the
  collectives model (``clustersim.network``), each plus a synchronization cost; pipeline stages add
  one send per step;
* **overheads**: a fixed cost per step, a fixed cost per layer per step (its kernels' launch gaps, ramps and
  tails: what a step at batch 1 costs beyond its weight reads) and a host-side cost per sequence (its host
  CPU's: GB200's Grace).

Achieved fractions of the dense peak and of the HBM bandwidth and the overheads are fitted once on
the reference engine's (TensorRT-LLM's) runs (``benchmarks/calibrate_inference.py``, which writes
them into ``calibration.toml`` beside this module, each with its source) and ``InferenceCalibration``
(``clustersim.serving.calibration``) holds them; a user's file (``CLUSTERSIM_SERVING_CALIBRATION``, paths
separated by ``os.pathsep``, or ``extra=``) replaces the fields it gives. What the engine does (KV
pages and memory share, scheduler caps, its decode kernel, its kernels' share of the reference's
efficiency) is its ``EngineProfile`` (``clustersim.serving.engines``). Compute-bound work runs at
the clock the board power allows (``ServingSystem.board_power_watts``). Number formats are the
catalog's ``Dtype``; the devices are a ``System``'s. Everything is per device and vectorized over
the number of decoding sequences.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Dtype, Instance
from clustersim.compute.attention_kernel import fused_attention_s
from clustersim.compute.efficiency import efficiency_for
from clustersim.compute.scan_kernel import scan_seconds
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.serving.calibration import CALIBRATION as CALIBRATION
from clustersim.serving.calibration import CALIBRATION_FILE as CALIBRATION_FILE
from clustersim.serving.calibration import DEFAULT_CALIBRATION as DEFAULT_CALIBRATION
from clustersim.serving.calibration import ENV_VAR as ENV_VAR
from clustersim.serving.calibration import InferenceCalibration as InferenceCalibration
from clustersim.serving.calibration import calibration_entries as calibration_entries
from clustersim.serving.calibration import default_calibration as default_calibration
from clustersim.serving.calibration import serving_calibration as serving_calibration
from clustersim.serving.eager_launches import eager_floor_s
from clustersim.serving.engines import EngineProfile, engine_profile, mean_bucket_tokens, prompt_bucket_tokens
from clustersim.serving.formats import ServingPrecision, attention_dtype, gemm_dtype
from clustersim.serving.fused_experts import moe_token_cost_s
from clustersim.serving.graphs import graph_rows
from clustersim.serving.memory import ACTIVATION_BYTES as ACTIVATION_BYTES
from clustersim.serving.memory import SERVING_DTYPES as SERVING_DTYPES
from clustersim.serving.memory import FloatArray as FloatArray
from clustersim.serving.memory import bytes_per_element as bytes_per_element
from clustersim.serving.memory import (
    cached_token_layers,
    causal_pairs,
    decode_attention_flops_per_key,
    expert_weight_bytes,
    kv_bytes_per_token_layer,
    kv_heads_per_device,
    layer_weight_bytes,
    matmul_params,
    stage_share,
    state_bytes_per_sequence,
)
from clustersim.serving.memory import kv_bytes_per_token as kv_bytes_per_token
from clustersim.serving.memory import parse_precision as parse_precision
from clustersim.serving.memory import reserved_tokens as reserved_tokens
from clustersim.serving.memory import weight_bytes_per_device as weight_bytes_per_device
from clustersim.serving.memory_plan import MemoryPlan as MemoryPlan
from clustersim.serving.memory_plan import memory_plan as memory_plan
from clustersim.serving.moe_exchange import exchange_s, routed_token_share
from clustersim.serving.serving_system import MoeExchange as MoeExchange
from clustersim.serving.serving_system import ServingSystem as ServingSystem
from clustersim.serving.steps import StepTimes as StepTimes
from clustersim.system import system_for_accelerator, system_for_instance
from clustersim.workload.transformer import Transformer

# ---- one step ------------------------------------------------------------------------------------


def step_times(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    *,
    decode_sequences: npt.ArrayLike,
    decode_context_tokens: npt.ArrayLike,
    prefill_tokens: npt.ArrayLike,
    prefill_sequences: npt.ArrayLike,
    prompt_tokens: float,
    cal: InferenceCalibration | None = None,
    engine: str | EngineProfile | None = None,
    prompt_pairs: float | None = None,
) -> StepTimes:
    """One step of one stage (one device) on ``engine``: ``decode_sequences`` each read
    ``decode_context_tokens`` of KV cache and make one token; ``prefill_tokens`` prompt tokens of
    ``prefill_sequences`` prompts of ``prompt_tokens`` tokens each go through the same GEMMs. Arrays
    broadcast. An engine with static-shape buckets (``EngineProfile.bucket_min_tokens``) runs each prompt
    padded to its bucket, and a decoding sequence, whose mean position ``decode_context_tokens`` is
    halfway from its prompt to its last token, attends over each position's bucket. An engine that never
    mixes prefill and decode (``mixed_steps`` false: the Neuron engines, vLLM V0) runs the step as two launches,
    each reading the weights and paying the step overhead (``StepTimes.launches``). ``prompt_pairs``: a prompt's
    mean causal (query, key) pairs over a request set's lengths (``Request.prompt_pairs``; None: those of
    ``prompt_tokens``); an engine with buckets pads every prompt to the mean's bucket."""
    cal = default_calibration() if cal is None else cal
    profile = engine_profile(engine, system.family)
    b = np.asarray(decode_sequences, dtype=np.float64)
    context = np.asarray(decode_context_tokens, dtype=np.float64)
    prefill = np.asarray(prefill_tokens, dtype=np.float64)
    prompts = np.asarray(prefill_sequences, dtype=np.float64)
    b, context, prefill, prompts = np.broadcast_arrays(b, context, prefill, prompts)
    if not profile.mixed_steps and np.any((b > 0) & (prefill > 0)):
        # Prefill and decode never share a launch: a decode launch, then the prompts' own launch. Fewer than one
        # prompt per step (a mean share) is one launch of one prompt on that share of the steps.
        alone = profile.model_copy(update={"mixed_steps": True})
        none = np.zeros_like(b)
        decode = step_times(
            model,
            system,
            precision,
            kv_precision,
            decode_sequences=b,
            decode_context_tokens=context,
            prefill_tokens=none,
            prefill_sequences=none,
            prompt_tokens=prompt_tokens,
            cal=cal,
            engine=alone,
            prompt_pairs=prompt_pairs,
        )
        per_launch = np.maximum(prompts, 1.0)
        launch = step_times(
            model,
            system,
            precision,
            kv_precision,
            decode_sequences=none,
            decode_context_tokens=context,  # no decode: the sequences' length, for the prompts' bucket
            prefill_tokens=prefill * per_launch / np.maximum(prompts, 1e-300),
            prefill_sequences=per_launch,
            prompt_tokens=prompt_tokens,
            cal=cal,
            engine=alone,
            prompt_pairs=prompt_pairs,
        )
        decoding = np.where((b > 0) | (prefill <= 0), 1.0, 0.0)
        launched = np.where(prefill > 0, prompts / per_launch, 0.0)
        return StepTimes.in_sequence((decode.scaled(decoding), launch.scaled(launched)))
    if profile.bucket_min_tokens is not None:
        last = np.maximum(2.0 * context - prompt_tokens, context)  # the sequences' last positions (compiled)
        padded_prompt = prompt_bucket_tokens(prompt_tokens, profile, float(np.max(last)))
        prefill = prefill * padded_prompt / prompt_tokens
        context = mean_bucket_tokens(np.minimum(prompt_tokens, context), last, profile)
        prompt_tokens, prompt_pairs = padded_prompt, None
    real, b = b, profile.decode_slots(b)  # a compiled batch computes every slot; the host serves the real ones
    # a step of decoders alone replays a captured CUDA graph: its padding rows run the GEMMs, not attention
    rows_b = np.where(prefill > 0, b, graph_rows(profile.graph_batch_sizes, b, system.attention_dp))
    tp, pp = system.tp, system.pp
    own = 1.0 / system.attention_dp  # an attention group's share of the stage's sequences (1: the whole stage)
    stage = stage_share(model, pp)  # of the layers, the largest stage's (1 / pp where they divide)
    layers = model.layers * stage
    tokens = rows_b + prefill
    logits_tokens = rows_b + prompts  # the logits of decode tokens and of each prompt's last token

    # Compute runs at the engine's share of the fitted fraction, at the clock the board power allows.
    kernels = profile.kernel_efficiency_for(system.system.accelerator.id) * system.clock_ratio(cal.power_clock_exponent)
    family = system.system.accelerator.family
    flops_peak = system.peak_flop_per_s(precision) * cal.flop_efficiency_on(family, gemm_dtype(precision)) * kernels
    head_peak = system.peak_flop_per_s(Dtype.BF16) * cal.flop_efficiency_on(family, Dtype.BF16) * kernels
    bandwidth = system.system.memory_bandwidth_bytes_per_s * cal.hbm_efficiency
    dense, expert = matmul_params(model)
    head = float(model.vocab * model.hidden)
    # GEMMs of M rows reach flop_efficiency x M / (M + gemm_half_tokens): tiles and waves left part-empty,
    # and each kernel's fixed cost, weigh more when there are few rows. Dense GEMMs see the step's tokens;
    # each routed expert that some token touches sees its share, top_k x tokens / experts (grouped GEMMs).
    # An attention group's dense GEMMs see its own tokens; the routed experts, split over the groups, see the whole
    # stage's, gathered onto every rank, whose routing and permutation each rank runs (attention data parallel,
    # clustersim.serving.attention_dp; one group: the same rows).
    rows = np.maximum(tokens, 1.0)
    own_rows = np.maximum(tokens * own, 1.0)
    half = cal.gemm_half_tokens if profile.gemm_half_tokens is None else profile.gemm_half_tokens  # the engine's own
    experts = np.zeros_like(rows)  # routed experts some token of the step touches
    routed_rows = np.zeros_like(rows)
    if model.moe is not None:
        # each of the step's tokens picks top_k of E experts: E (1 - (1 - k/E)^tokens) distinct ones
        share = model.moe.top_k / model.moe.experts
        experts = model.moe.experts * (1.0 - (1.0 - share) ** rows)
        routed_rows = model.moe.top_k * rows
    stage_flops = 2.0 * ((own_rows + half) * dense + (routed_rows + experts * half) * own * expert) * stage
    routed = rows * routed_token_share(model, system)  # the tokens whose routing and permutation a rank runs
    compute = stage_flops / tp / flops_peak + routed * moe_token_layers(model) * stage * moe_token_cost_s(profile, cal)
    compute = compute + 2.0 * (np.maximum(logits_tokens * own, 1.0) + half) * head / (tp * pp) / head_peak
    # a recurrent layer's convolution and delta rule or scan, in 16 bits (flash-linear-attention's kernels at the peak,
    # mamba_ssm's SSD kernels at the slower of their measured share of it and of the FP32 rate:
    # clustersim.compute.scan_kernel)
    mixing = tokens * own * model.linear_mixing_flops_per_token() * stage / tp
    if model.linear_attention is not None and model.linear_attention.mamba2:  # its FP32 bound derated as the peak is
        fp32_rate = system.system.fp32_flop_per_s * cal.flop_efficiency_on(family, Dtype.BF16) * kernels
        compute = compute + scan_seconds(mixing, head_peak, fp32_rate, family)
    else:
        compute = compute + mixing / head_peak

    # Weights read once per step: the dense ones and the routed experts some token touches (a group's share).
    routed_bytes = experts * own * expert
    layer_bytes = dense * layer_weight_bytes(model, precision) + routed_bytes * expert_weight_bytes(model, precision)
    weights = (layer_bytes * stage + head * ACTIVATION_BYTES / pp) / tp
    memory = weights / bandwidth

    # Decode attention reads each sequence's cached token-layers (a window caps a windowed layer's) and
    # writes the step's new tokens; a GQA kernel reads each KV head once for its query group, a
    # per-head kernel once per query head.
    kv_layer = kv_bytes_per_token_layer(model, kv_precision, tp)
    keys = cached_token_layers(model, context, pp)
    group = 1.0 if profile.gqa_decode_kernel else model.heads / tp / kv_heads_per_device(model, tp)
    kv_read = (b * keys * group + tokens * layers) * own * kv_layer
    state = state_bytes_per_sequence(model, tp, pp, profile.state_pool.ssm_bytes)
    kv_read = kv_read + b * own * 2.0 * state  # a recurrent layer's state, read and written
    attention_flops = decode_attention_flops_per_key(model) / tp * keys * b * own
    # Attention computes in its cache's format, at most fp8; latent attention's decode kernels are attention
    # kernels in 16 bits (decode_attention_peak_flop_per_s).
    decode_peak = decode_attention_peak_flop_per_s(model, system, kv_precision, cal) * kernels
    kv_bandwidth = system.system.memory_bandwidth_bytes_per_s * cal.kv_read_efficiency_on(family)
    decode_attention = np.maximum(kv_read / kv_bandwidth, attention_flops / decode_peak)
    pair_flops = 2.0 * (model.q_width + model.context_width) / tp  # scores and context of one (query, key) pair
    pairs = causal_pairs(model, prompt_tokens) if prompt_pairs is None else prompt_pairs
    causal = pairs * stage * pair_flops  # per prompt, this stage's layers
    native = profile.native_score_bytes(prompt_tokens, model.heads / tp * layers)  # a non-flash kernel's scores
    core = prefill_core_s(model, system, kv_precision, cal, profile, pairs, causal, stage, kernels)
    prefill_attention = prompts * own * (core + native / bandwidth)

    rowwise = rows_b + prefill / tp if profile.sequence_parallel_prefill else tokens  # tokens each rank norms and adds
    elementwise = rowwise * own * layers * cal.activation_passes * model.hidden * ACTIVATION_BYTES / bandwidth

    comm = np.zeros_like(b)
    payload = tokens * own * model.hidden * ACTIVATION_BYTES
    if tp > 1 and system.tp_fabric is not None:
        all_reduce = system.cost.time_s(Op.ALL_REDUCE, payload.ravel(), system.tp_fabric)
        comm = comm + 2.0 * layers * (all_reduce.reshape(b.shape) + cal.sync_overhead_s)
    comm = comm + exchange_s(model, system, tokens)  # the experts' tokens under attention data parallel
    if pp > 1 and system.pp_fabric is not None:
        comm = comm + system.cost.time_s(Op.SENDRECV, payload.ravel(), system.pp_fabric).reshape(b.shape)
    step_overhead = cal.step_overhead_s if profile.step_overhead_s is None else profile.step_overhead_s
    per_sequence = cal.sequence_overhead_s if profile.sequence_overhead_s is None else profile.sequence_overhead_s
    if not profile.cpp_sampler:  # the Python sampler's per-request work, slower on a non-x86 host
        per_sequence = profile.host_sequence_overhead_s.get(system.system.accelerator.id, per_sequence)
    per_layer = cal.layer_overhead_s if profile.layer_overhead_s is None else profile.layer_overhead_s
    overhead = step_overhead + layers * per_layer + per_sequence * (real + prompts) * own
    if profile.eager_launch_s is not None:
        # a step with prompts runs eagerly past the captured graphs: at least its kernels' launches (host-bound)
        eager = (prefill > 0) & (tokens > profile.graphed_prompt_tokens)
        floor = eager_floor_s(model, layers, precision, tp, profile.eager_launch_s)
        device = np.maximum(compute, memory) + decode_attention + prefill_attention + elementwise + comm + overhead
        overhead = overhead + np.where(eager, np.maximum(floor - device, 0.0), 0.0)
    return StepTimes(
        gemm_compute_s=compute,
        gemm_memory_s=np.broadcast_to(memory, b.shape).astype(np.float64),
        decode_attention_s=decode_attention,
        prefill_attention_s=prefill_attention,
        elementwise_s=elementwise,
        communication_s=comm,
        overhead_s=overhead,
    )


def prefill_core_s(
    model: Transformer,
    system: ServingSystem,
    kv_precision: ServingPrecision,
    cal: InferenceCalibration,
    profile: EngineProfile,
    pairs: FloatArray | float,
    causal_flop: FloatArray | float,
    stage: float,
    kernels: float,
) -> FloatArray:
    """One prompt's causal attention core on one device (``pairs`` of its (query, key) pairs over the layers,
    ``causal_flop`` this stage's products), as the training step prices its core (``fused_attention_s``): the products
    in the cache's format at the family's ``attention_flop_efficiency_on`` of its peak, and a fused kernel's
    exponentials, one per score and query head, the family's exposed share at the device's ``exp_per_s`` (a chip with
    none recorded pays its core whole at its family's fraction); a native kernel's softmax is its scores' pass through
    HBM instead (``EngineProfile.native_score_bytes``). Both grow with the pairs (the request
    simulator's steps take a cost per pair). ``kernels``: the engine's share of the kernels and the clock."""
    fused = not profile.score_bytes
    exps = np.asarray(pairs, dtype=np.float64) * stage * model.heads / system.tp if fused else 0.0
    return fused_attention_s(
        causal_flop,
        exps,
        peak_flop_per_s=system.peak_flop_per_s(attention_dtype(kv_precision)) * kernels,
        exp_per_s=system.system.exp_per_s * kernels,
        softmax_exposed=efficiency_for(system.system.accelerator).softmax_exposed,
        fraction=cal.attention_flop_efficiency_on(system.family),
    )


def moe_token_layers(model: Transformer) -> float:
    """The MoE layers a token passes through (each pays ``moe_token_layer_s``); 0 without MoE."""
    return 0.0 if model.moe is None else float(model.moe_layers)


# ---- systems from the catalog ----------------------------------------------------------------------


def decode_attention_peak_flop_per_s(
    model: Transformer, system: ServingSystem, kv_precision: ServingPrecision, cal: InferenceCalibration
) -> float:
    """The FLOP rate decode attention's math reaches on one device (before the engine's kernel share).

    Grouped-query and multi-head kernels: the peak of the cache's format (``attention_dtype``) at the GEMMs'
    fraction (their reads bind at any batch). Latent attention (MLA, the up-projections absorbed): a query's heads
    (DeepSeek-V3's 128) share one latent per key (576 wide), so its decode is compute-bound, and its kernels are
    attention kernels in 16 bits: the 16-bit peak at ``latent_decode_flop_efficiency``. FlashMLA reaches 660 TFLOP/s on
    an H800 (0.67 of the dense BF16 peak; its README, 2025-04-22); CUTLASS MLA moves 4.1 TB/s of 16-bit latent on a
    B200 at batch 256 and 8,192 tokens (sgl-project/sglang PR #6929), about 1.0 PFLOP/s (0.44); TensorRT-LLM's
    trtllm-gen kernel with an FP8 cache reaches 0.59 PFLOP/s at 16 heads and 4 queries (vllm-project/vllm PR
    #41778). At the FP8 peak and the GEMMs' fraction (2.6 PFLOP/s on a B200) DeepSeek-R1's longest-output runs were
    47-110% too fast."""
    family = system.system.accelerator.family
    if model.mla is None:
        attention = attention_dtype(kv_precision)
        return system.peak_flop_per_s(attention) * cal.flop_efficiency_on(family, attention)
    return system.peak_flop_per_s(Dtype.BF16) * cal.latent_decode_flop_efficiency


def serving_system_for_instance(
    catalog: Catalog,
    instance: str | Instance,
    *,
    tp: int,
    pp: int = 1,
    dp: int | None = None,
    attention_dp: int = 1,
    moe_exchange: MoeExchange = "gather",
    nodes: int = 1,
) -> ServingSystem:
    """``dp`` replicas (default: as many as fill them) of ``tp x pp x attention_dp`` devices on ``nodes`` instances
    (``moe_exchange``: how attention-DP ranks reach the experts). A replica wider than one instance spans several:
    its TP all-reduces or PP sends between them run on the network (``System.group_fabric``)."""
    entry = catalog.instance(instance) if isinstance(instance, str) else instance
    if nodes < 1:
        raise ClusterSimError(f"nodes: must be at least 1, got {nodes}", field="nodes", value=nodes)
    devices = int(entry.num_accelerators.value) * nodes
    where = f"one {entry.id} (the scale-up domain; --nodes for more)" if nodes == 1 else f"{nodes} x {entry.id}"
    if tp < 1 or pp < 1 or tp * pp > devices:
        raise ClusterSimError(
            f"tp x pp: {tp} x {pp} must fit the {devices} devices of {where}",
            field="tp" if tp < 1 or tp > devices else "pp",
            value=tp if tp < 1 or tp > devices else pp,
        )
    if attention_dp < 1 or tp * pp * attention_dp > devices:
        raise ClusterSimError(
            f"attention_dp: {attention_dp} groups of tp {tp} x pp {pp} must fit the {devices} devices of {where}",
            field="attention_dp",
            value=attention_dp,
        )
    per_replica = tp * pp * attention_dp
    replicas = devices // per_replica if dp is None else dp
    if replicas < 1 or replicas * per_replica > devices:
        groups = f" x attention dp {attention_dp}" if attention_dp > 1 else ""
        raise ClusterSimError(
            f"dp: {replicas} replicas of tp {tp} x pp {pp}{groups} do not fit the {devices} devices",
            field="dp",
            value=replicas,
        )
    system = system_for_instance(catalog, entry.id, nodes)
    return ServingSystem.on(
        system, entry.id, tp=tp, pp=pp, dp=replicas, attention_dp=attention_dp, moe_exchange=moe_exchange
    )


def serving_system_for_accelerator(
    catalog: Catalog,
    accelerator: str,
    *,
    tp: int,
    pp: int = 1,
    dp: int = 1,
    devices_per_node: int | None = None,
    instance: str | None = None,
    board_power_watts: float | None = None,
    attention_dp: int = 1,
    moe_exchange: MoeExchange = "gather",
) -> ServingSystem:
    """A system from an accelerator id, as ground-truth cases give it: one node of ``devices_per_node``
    devices (default: the replicas' devices), each chip at ``board_power_watts`` (default: its TDP).

    Where ``devices_per_node`` counts the cores of a catalogued instance's chips (NeuronCores on
    Trainium), each device is a core's share of a chip (see ``clustersim.system``).
    """
    per_node = devices_per_node or max(tp * pp * attention_dp * dp, 1)
    system = system_for_accelerator(
        catalog, accelerator, devices=per_node, devices_per_node=per_node, instance=instance
    )
    adp = f" adp{attention_dp}" if attention_dp > 1 else ""
    name = f"{dp} x tp{tp} pp{pp}{adp} {system.accelerator.id}"
    return ServingSystem.on(
        system, name, tp=tp, pp=pp, dp=dp, board_power_watts=board_power_watts, attention_dp=attention_dp,
        moe_exchange=moe_exchange,
    )  # fmt: skip
