"""The share of a device's memory a serving engine leaves unused: the share a profile or a run states, or the
engine's own rule where neither does (``EngineProfile.reserved_memory_rule``).

SGLang sizes ``mem_fraction_static`` (the weights' and KV pool's share of the device) itself when it is not
given, by two rules over its releases:

* ``sglang-tp``, its 0.3 releases: by tensor parallel size alone, 0.88 at TP1, 0.87 at 2 or 3, 0.85 at 4 to 7,
  0.81 at 8 to 15, 0.79 from 16 (``ServerArgs.__post_init__``: 'Set mem fraction static, which depends on the
  tensor parallelism size').
* ``sglang-gpu-memory``, from 0.5.3 (sgl-project/sglang PR #10975, merged 2025-09-27, 'Use more general
  heuristics to set the default value of --mem-fraction-static'; 0.5.3 was tagged 2025-10-06): the memory it
  keeps back, in MiB, is 512 for its constant metadata, 1.5 per token of ``max(chunked_prefill_size, 2048)`` for
  a large prefill's activations, 2 per sequence of ``cuda_graph_max_bs`` for the CUDA graphs' buffers and
  ``1024 x tp x pp / 8`` for large parallel sizes; with DP attention also ``3 x cuda_graph_max_bs x dp`` (and
  half that again above a graph batch of 300); at least 10 GiB on a device of more than 60 GiB
  (``ServerArgs._handle_gpu_memory_settings``, python/sglang/srt/server_args.py). ``cuda_graph_max_bs`` follows
  the device's memory there: 8 below 20 GiB, 24 (80 from TP4) below 35 GiB, 32 (160) below 60 GiB, 256 (512)
  below 160 GiB, 512 above. Its ``tp_size`` counts every rank of a DP-attention replica. An 80 GiB H100 at TP1
  keeps 13,440 MiB back (0.836 of it static; sgl-project/sglang issue #29092 reads 0.828 on an H100 from a later
  release, which keeps more back for its piecewise CUDA graphs).

The chunk is the profile's step budget on the device (``EngineProfile.token_budget``): SGLang's
``chunked_prefill_size`` follows the same memory classes (8,192 from 60 GiB, 16,384 from 160 GiB).
"""

from __future__ import annotations

from typing import Literal, get_args

MIB = 2**20
GIB = 2**30
ReservedMemoryRule = Literal["sglang-tp", "sglang-gpu-memory"]
RESERVED_MEMORY_RULES: tuple[str, ...] = get_args(ReservedMemoryRule)
NO_RESERVED_MEMORY = f"give reserved_memory_fraction or reserved_memory_rule ({', '.join(RESERVED_MEMORY_RULES)})"
# sglang-tp: (smallest tensor parallel size, static share), the largest that applies
_TP_STATIC_SHARE = ((16, 0.79), (8, 0.81), (4, 0.85), (2, 0.87), (1, 0.88))
# sglang-gpu-memory: (devices below this many GiB, cuda_graph_max_bs below TP4, from TP4)
_GRAPH_BATCH = ((20, 8, 8), (35, 24, 80), (60, 32, 160), (160, 256, 512))
_GRAPH_BATCH_LARGEST = 512
_FLOOR_ABOVE_GIB, _FLOOR_GIB = 60, 10


def rule_reserved_fraction(
    rule: ReservedMemoryRule, memory_bytes: float, *, tp: int, pp: int, attention_dp: int, chunk_tokens: int
) -> float:
    """The share of a device of ``memory_bytes`` that ``rule`` leaves unused, for a replica of ``tp`` x
    ``attention_dp`` ranks per stage over ``pp`` stages whose prompts run in chunks of ``chunk_tokens``."""
    ranks = tp * attention_dp  # SGLang's tp_size: DP attention's groups share one tensor-parallel world
    if rule == "sglang-tp":
        return 1.0 - next(share for smallest, share in _TP_STATIC_SHARE if ranks >= smallest)
    gib = memory_bytes / GIB
    graph_batch = next(
        (small if ranks < 4 else large for below, small, large in _GRAPH_BATCH if gib < below), _GRAPH_BATCH_LARGEST
    )
    reserved_mib = 512 + 1.5 * max(chunk_tokens, 2048) + 2 * graph_batch + 1024 * ranks * pp / 8
    if attention_dp > 1:
        reserved_mib += 3 * graph_batch * attention_dp + (1.5 * graph_batch * attention_dp if graph_batch > 300 else 0)
    if gib > _FLOOR_ABOVE_GIB:
        reserved_mib = max(reserved_mib, _FLOOR_GIB * 1024)
    return 1.0 - round(max(memory_bytes / MIB - reserved_mib, 0.0) / (memory_bytes / MIB), 3)  # SGLang rounds it
