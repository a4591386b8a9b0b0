"""What to check for each lever, in the run's framework's own words.

Each hint is a framework-neutral check, followed by the settings of the run's framework that govern it where
we know them: Megatron-LM's command-line arguments (megatron/training/arguments.py,
https://github.com/NVIDIA/Megatron-LM) for megatron and megatron-deepspeed, torchtitan's job config
(torchtitan/config/job_config.py, https://github.com/pytorch/torchtitan) for torchtitan. Another framework
gets the neutral check alone rather than another framework's flags.

A PyTorch eager stack's hints also depend on how the run was priced (``SoftwareProfile.eager_elementwise``,
``--torch-compile``): an eager-priced run is told that torch.compile fuses its element-wise ops (the "eager
element-wise" operation of the memory-bound work) and how to price it compiled if it compiled; a compiled-priced
run is not told to turn torch.compile on (torchtitan's Compile options: ``enable``, ``components``,
torchtitan/config/job_config.py; graph breaks: PyTorch's ``TORCH_LOGS=graph_breaks``).
"""

from __future__ import annotations

NEUTRAL = {
    "gemm": "check GPU clocks and throttling (nvidia-smi -q -d PERFORMANCE,CLOCK), a straggler GPU and the GEMM "
    "library versions",
    "attention": "check the attention backend (fused/flash attention on), its release (cuDNN's and FlashAttention's "
    "achieved rates differ by release, most at long sequences) and the head dimension it supports",
    "memory": "check kernel fusion of the element-wise work (LayerNorm/RMSNorm, SwiGLU, RoPE) and HBM clocks",
    "optimizer": "check the optimizer step: a fused or distributed optimizer, gradient-norm clipping, and host "
    "synchronisation (logging or .item() every step)",
    "tp comm": "check NVLink/NVSwitch health (nvidia-smi nvlink -s), NCCL_NVLS_ENABLE, TP communication overlap "
    "and that each TP group stays inside one node",
    "cp comm": "check that the context-parallel ring stays inside a node and NCCL's settings (NCCL_PROTO)",
    "ep comm": "check the all-to-all path: NCCL/EFA settings (NCCL_PROTO, FI_EFA_USE_DEVICE_RDMA=1), the token "
    "dispatcher and expert placement",
    "pp comm": "check the send/recv path between stages: FI_EFA_USE_DEVICE_RDMA=1, NCCL_P2P_NET_CHUNKSIZE and "
    "that neighbouring stages sit on neighbouring hosts",
    "dp comm": "check NCCL/EFA settings (NCCL_PROTO, FI_PROVIDER=efa, FI_EFA_USE_DEVICE_RDMA=1, "
    "NCCL_NET_GDR_LEVEL), gradient-reduce overlap and the bucket size",
    "recompute": "check what the framework recomputes against the layout's --recompute",
    "pipeline bubble": "check the pipeline schedule: interleaving, micro-batches per step and evenly split stages",
    "activation offload": "check the host link's copy rate (nvbandwidth's host-to-device and device-to-host copies), "
    "pinned host buffers and the GPU's NUMA node, or offload fewer layers",
    "data loading": "not in the model: check data-loader workers and prefetch, on-the-fly tokenization and the "
    "storage's read throughput (clustersim storage)",
}

_MEGATRON = {
    "gemm": "Transformer Engine's version and FP8 recipe (--fp8-format, --fp8-recipe)",
    "attention": "NVTE_FUSED_ATTN, NVTE_FLASH_ATTN, --attention-backend",
    "memory": "--apply-rope-fusion, --bias-swiglu-fusion",
    "optimizer": "--use-distributed-optimizer",
    "tp comm": "--tp-comm-overlap",
    "cp comm": "--cp-comm-type",
    "ep comm": "--moe-token-dispatcher-type, --overlap-moe-expert-parallel-comm",
    "dp comm": "--overlap-grad-reduce, --overlap-param-gather, --ddp-bucket-size",
    "recompute": "--recompute-granularity, --recompute-method, --recompute-num-layers",
    "pipeline bubble": "--num-layers-per-virtual-pipeline-stage",
    "activation offload": "--cpu-offloading-num-layers, cpu_offloading_double_buffering",
}
FLAGS: dict[str, dict[str, str]] = {
    "megatron": _MEGATRON,
    "megatron-deepspeed": _MEGATRON,
    "torchtitan": {
        "gemm": "the float8 converter (--model.converters float8)",
        "attention": "SDPA or FlexAttention (a *_flex_attn --model.flavor)",
        "memory": "priced compiled: torch.compile's coverage (--compile.components model,loss) and graph breaks "
        "(TORCH_LOGS=graph_breaks)",
        "optimizer": "--optimizer.implementation fused, --training.max_norm",
        "tp comm": "--parallelism.enable_async_tensor_parallel (with torch.compile)",
        "cp comm": "--parallelism.context_parallel_rotate_method (allgather or alltoall)",
        "ep comm": "--parallelism.expert_parallel_degree within a node",
        "dp comm": "--parallelism.fsdp_reshard_after_forward, and HSDP (--parallelism.data_parallel_replicate_degree) "
        "to keep the shard group inside a node",
        "recompute": "--activation_checkpoint.mode, --activation_checkpoint.selective_ac_option",
        "pipeline bubble": "--parallelism.pipeline_parallel_schedule (Interleaved1F1B), "
        "--parallelism.pipeline_parallel_microbatch_size",
    },
}
_PRICE_COMPILED = "if the run compiled, explain it with --torch-compile"
# a run priced eager (element-wise ops one PyTorch kernel each): in place of FLAGS' compiled-run checks
EAGER: dict[str, dict[str, str]] = {
    "torchtitan": {
        "gemm": f"the float8 converter (--model.converters float8); priced eager: {_PRICE_COMPILED}",
        "memory": "priced eager, one kernel per element-wise op: torch.compile fuses them (--compile.enable; "
        f"--training.compile before 2025); {_PRICE_COMPILED}",
    },
}


def hint(key: str, framework: str, eager: bool = False) -> str:
    """What to check for the lever ``key`` (a step term or compute part) of a run on ``framework``, priced with
    its element-wise ops as eager kernels (``eager``) or fused."""
    flags = (EAGER.get(framework, {}) if eager else {}).get(key) or FLAGS.get(framework, {}).get(key)
    return NEUTRAL[key] if flags is None else f"{NEUTRAL[key]} ({framework}: {flags})"
