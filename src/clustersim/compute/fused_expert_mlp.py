"""Where fused grouped expert MLP kernels run: Blackwell GPUs, in an 8- or 4-bit format.

Transformer Engine's CuTe DSL fused grouped MLP runs on compute capability 10 only, with an MXFP8 or NVFP4
recipe (NVIDIA/TransformerEngine pytorch/ops/fused: is_supported() requires NVTE_CUTEDSL_FUSED_GROUPED_MLP=1
and get_device_compute_capability()[0] == 10; its docs: "On SM100-class GPUs the routed experts fuse into a
single CuTe grouped-GEMM MLP ... with an MXFP8/NVFP4 recipe; elsewhere the same modules run unfused"), as do
TensorRT-LLM's CuTe DSL MoE kernels in serving (``clustersim.serving.fused_experts``).
"""

from __future__ import annotations

from clustersim.catalog.schema import Accelerator, Dtype
from clustersim.compute.precision import is_low_precision
from clustersim.compute.software import SoftwareProfile

FUSED_EXPERT_MLP_FAMILY = "blackwell"


def fused_expert_mlp_runs(software: SoftwareProfile, moe: bool, precision: Dtype, accelerator: Accelerator) -> bool:
    """Whether ``software``'s fused expert MLP runs for a job: a MoE model in an 8- or 4-bit format on a
    Blackwell GPU; elsewhere the experts run unfused, as Transformer Engine falls back."""
    fused = software.fused_expert_mlp and moe and is_low_precision(precision)
    return fused and accelerator.family == FUSED_EXPERT_MLP_FAMILY
