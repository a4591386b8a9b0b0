"""The batch caps trtllm-bench gives TensorRT-LLM when a run states none.

``trtllm-bench throughput`` on the PyTorch backend, given neither ``--max_batch_size`` nor
``--max_num_tokens``, sizes the engine from the dataset's mean lengths and its own rough count of the
memory (NVIDIA/TensorRT-LLM ``tensorrt_llm/bench/benchmark/utils/general.py`` get_settings, then
``bench/build/build.py`` get_benchmark_engine_settings and ``bench/build/tuning.py`` calc_engine_setting
and finetune_setting; the perf-overview tables are measured so):

1. Engine size: the checkpoint's safetensors element count times the bytes of an element of its
   quantization (NVFP4 0.5, FP8 1, none 2). An NVFP4 checkpoint stores two 4-bit values per byte plus an
   FP8 scale per 16, so its layer weights count as ``1/2 + 1/16`` elements each.
2. KV bytes per token: ``2 x layers x max(tp, kv heads) x head size x`` bytes per KV element (FP8 1, NVFP4
   0.5, else 2). The head size is the config's ``head_dim``, else ``hidden / heads``: a latent-attention
   config (DeepSeek-V3) names none, so its cache counts as 128 heads of 56, 25x its 576-wide latent.
3. Requests that fit: ``(devices x memory - engine) x kv fraction / (KV bytes per token x (ISL + OSL))``.
4. Batch ``min(requests, 4096) / pp`` rounded up (to 32 from 64 below 256, to 128 below 1,024, else to 256);
   tokens per step ``min(batch x (1 + ISL / OSL), 32768)`` rounded up (at least 2,048; to 256 below 4,096,
   512 below 8,192, else 1,024); chunked prefill off (its default), at least the longest prompt plus the batch.

Quantizations it does not tune (integer weight-only checkpoints, MXFP4) take TensorRT-LLM's BuildConfig
defaults, 2,048 sequences and 8,192 tokens. Under attention data parallel the bench's ``--tp`` is the whole
group (``tp x attention_dp``) and each rank's scheduler takes the caps.
"""

from __future__ import annotations

import math

from clustersim.catalog.schema import Dtype
from clustersim.memo import IdentityMemo
from clustersim.serving.engine import ServingSystem
from clustersim.serving.engines import EngineProfile, engine_profile
from clustersim.serving.formats import BlockFp4, ServingPrecision
from clustersim.serving.memory import matmul_params
from clustersim.serving.state_pool import check_recurrent_engine
from clustersim.workload.transformer import QuantMethod, Transformer

BENCH_MAX_SEQUENCES = 4096  # finetune_setting's cap on the batch (decoder buffers)
BENCH_MAX_TOKENS = 32768  # and on the tokens per step (activation buffers)
BENCH_MIN_TOKENS = 2048  # its floor on the tokens per step (context and generation overlap)
UNTUNED_CAPS = (2048, 8192)  # BuildConfig's max_batch_size and max_num_tokens for a quantization it does not tune
_SIZED: IdentityMemo[EngineProfile] = IdentityMemo(keep=256)


def _element_bytes(precision: ServingPrecision) -> float:
    """tuning.py's BYTES_PER_ELEM: NVFP4 0.5, FP8 1, anything else 2."""
    if precision is BlockFp4.NVFP4:
        return 0.5
    return 1.0 if precision is Dtype.FP8 else 2.0


def tuned(model: Transformer, precision: ServingPrecision) -> bool:
    """Whether trtllm-bench's heuristic sizes this checkpoint (none, FP8 or NVFP4), not BuildConfig's defaults."""
    if model.quantization is not None:
        return model.quantization.method is QuantMethod.FP8
    return precision is not BlockFp4.MXFP4


def engine_gib(model: Transformer, precision: ServingPrecision) -> float:
    """The engine size trtllm-bench counts, GiB: safetensors elements x its bytes per element."""
    elements = float(model.num_params())
    if model.quantization is not None:  # an FP8 checkpoint (the only quantized one it tunes)
        return elements / 2**30
    if precision is BlockFp4.NVFP4:  # the layer matmuls packed two per byte with an FP8 scale per 16
        dense, expert = matmul_params(model)
        layer = dense + (model.moe.experts if model.moe else 0) * expert
        elements -= layer * (1.0 - 0.5 - 1.0 / 16.0)
    return elements * _element_bytes(precision) / 2**30


def kv_gib_per_token(model: Transformer, kv_precision: ServingPrecision, bench_tp: int) -> float:
    """The KV cache per token trtllm-bench counts, GiB (its config view: an MLA model's head is hidden / heads)."""
    head = model.hidden // model.heads if model.mla is not None else model.head_dim
    return 2.0 * model.layers * max(bench_tp, model.kv_heads) * head * _element_bytes(kv_precision) / 2**30


def _round_batch(raw: float) -> int:
    if raw < 256:
        return max(64, 32 * math.ceil(raw / 32))
    if raw < 1024:
        return 128 * math.ceil(raw / 128)
    return 256 * math.ceil(raw / 256)


def _round_tokens(raw: float) -> int:
    if raw < 4096:
        return max(BENCH_MIN_TOKENS, 256 * math.ceil(raw / 256))
    if raw < 8192:
        return 512 * math.ceil(raw / 512)
    return 1024 * math.ceil(raw / 1024)


def bench_caps(
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    lengths: tuple[float, float, float],
    kv_fraction: float,
) -> tuple[int, int]:
    """(max_batch_size, max_num_tokens) per rank as trtllm-bench sizes them for ``lengths``: the mean input and
    output (its dataset's averages) and the longest prompt."""
    if not tuned(model, precision):
        return UNTUNED_CAPS
    input_tokens, output_tokens, longest_input_tokens = lengths
    bench_tp = system.tp * system.attention_dp
    devices = bench_tp * system.pp
    free_gib = devices * system.system.memory_bytes / 2**30 - engine_gib(model, precision)
    per_request = kv_gib_per_token(model, kv_precision, bench_tp) * (input_tokens + output_tokens)
    requests = max(free_gib, 0.0) * kv_fraction / per_request
    raw_batch = min(requests, BENCH_MAX_SEQUENCES) / system.pp
    raw_tokens = min(raw_batch * (1.0 + input_tokens / output_tokens), BENCH_MAX_TOKENS)
    batch = _round_batch(raw_batch)
    return batch, max(_round_tokens(raw_tokens), math.ceil(longest_input_tokens) + batch)


def sized_engine(
    engine: str | EngineProfile | None,
    model: Transformer,
    system: ServingSystem,
    precision: ServingPrecision,
    kv_precision: ServingPrecision,
    lengths: tuple[float, float, float],
) -> EngineProfile:
    """The profile of ``engine`` on ``system``, its caps as the engine's benchmark sizes them for this deployment and
    its ``lengths`` (mean input, mean output, longest input; ``benchmark_sizing``): trtllm-bench's for
    ``trtllm-bench``, within the profile's own caps (the packaged ones are the bench's 4,096 and 32,768; a profile
    that lowers them is honoured); the profile as it is for ``fixed``."""
    profile = engine_profile(engine, system.family)
    check_recurrent_engine(model, profile.framework, profile.name)
    if profile.benchmark_sizing != "trtllm-bench":
        return profile

    def size() -> EngineProfile:
        batch, tokens = bench_caps(model, system, precision, kv_precision, lengths, profile.kv_memory_fraction)
        chip = system.system.accelerator.id
        return profile.model_copy(
            update={
                "max_batch_sequences": min(batch, profile.sequence_cap(chip)),
                "max_tokens_per_step": min(tokens, profile.token_budget(chip)),
                "max_batch_sequences_on": {},
                "max_tokens_per_step_on": {},
                "benchmark_sizing": "fixed",
            }
        )

    # one sized profile per deployment: memos keyed by the profile's identity (the server curve) hit again
    shape = (system.tp, system.pp, system.attention_dp, precision, kv_precision, lengths)
    return _SIZED.get((profile, model, system.system), shape, size)
