"""Layers an 8- or 4-bit job keeps in BF16: how many of its layers, as its framework counts them, run their GEMMs in
16 bits, and the share of the stack that is.

Low-precision recipes often keep the layers at the ends of the stack in BF16, where quantization hurts the loss
most. Megatron-Core does it per layer (``first_last_layers_bf16`` with ``num_layers_at_start_in_bf16`` and
``num_layers_at_end_in_bf16``: such a layer runs without an FP8/FP4 context, NVIDIA/Megatron-LM @d98e8a64
``megatron/core/fp8_utils.py`` ``get_fp8_context``, ``fp4_utils.py`` ``get_fp4_context``), and Megatron-Bridge's
recipes set it: Nemotron 3 Super's NVFP4 recipe keeps its last 14 layers
(``nemotron_3_super_bf16_with_nvfp4_mixed``, NVIDIA-NeMo/Megatron-Bridge
``src/megatron/bridge/training/mixed_precision.py`` from v0.4.0), GPT-OSS 20B's its last 4. NVIDIA's NVFP4
pre-training report keeps about 16% of a 12B hybrid's layers in BF16 (arXiv 2509.25149).

Megatron counts its layers as it builds them: a transformer layer (a mixer and its MLP) is one layer; a Mamba hybrid
stack (Nemotron-H, Nemotron 3) builds each Mamba-2 mixer, attention mixer and MLP or MoE block as a layer of its
own and counts them against ``num_layers`` (``megatron/core/models/hybrid/hybrid_block.py``, one quantization
context per symbol of ``hybrid_layer_pattern``: Super's 88 = 40 Mamba-2 + 8 attention + 40 MoE). This model folds
a mixer and the MLP after it into one layer (``Transformer.layers``, ``mlp_free_layers``), so a hybrid's framework
count is its mixers plus its MLP blocks. The BF16 layers are priced as that share of every layer's GEMMs, whichever
blocks they are (Super's last 14 are 6 Mamba-2, 7 MoE and 1 attention block: within two points of the stack's own
mix). Memory is priced as before: the weights are held in 16 bits either way, and a BF16 layer's saved GEMM inputs,
16-bit where a quantized layer may keep 8-bit ones (``float8_saved_inputs``), are not told apart.
"""

from __future__ import annotations

from clustersim.catalog.schema import Dtype
from clustersim.compute.precision import is_low_precision
from clustersim.errors import ClusterSimError
from clustersim.workload.transformer import Transformer


def framework_layers(model: Transformer) -> int:
    """The layers of ``model`` as Megatron counts them: its decoder layers, or a Mamba hybrid stack's mixers and MLP
    blocks each on its own."""
    linear = model.linear_attention
    if linear is not None and linear.mamba2:
        return model.layers + (model.layers - model.mlp_free_layers)
    return model.layers


def bf16_layer_share(model: Transformer, bf16_layers: int) -> float:
    """The share of ``model``'s layers that ``bf16_layers`` (in the framework's count) is."""
    return bf16_layers / framework_layers(model)


def check_bf16_layers_precision(bf16_layers: int, precision: Dtype, field: str = "bf16_layers") -> None:
    """Refuse BF16 layers in a 16-bit job, whose layers all are (what can be said before the model is read)."""
    if bf16_layers < 0:
        raise ClusterSimError(f"{field} must be 0 or more, got {bf16_layers}", field=field, value=bf16_layers)
    if bf16_layers and not is_low_precision(precision):
        raise ClusterSimError(
            f"{field} {bf16_layers}: a {precision.value} job runs every layer in 16 bits; BF16 layers need an fp8 "
            "or fp4 job",
            field=field,
            value=bf16_layers,
        )


def check_bf16_layers(model: Transformer, bf16_layers: int, precision: Dtype, field: str = "bf16_layers") -> None:
    """Refuse BF16 layers a job cannot have: in a 16-bit job (every layer is), or more than the model's layers."""
    check_bf16_layers_precision(bf16_layers, precision, field)
    limit = framework_layers(model)
    if bf16_layers > limit:
        raise ClusterSimError(
            f"{field} {bf16_layers}: {model.name} has {limit} layers as its framework counts them (0 to {limit})",
            field=field,
            value=bf16_layers,
        )
