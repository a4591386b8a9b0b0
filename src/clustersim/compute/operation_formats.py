"""Operations an 8- or 4-bit job runs in a wider format than its own: its recipe's per-module formats.

A quantization recipe need not quantize every GEMM of a quantized layer. Megatron-Core matches modules by name to
Transformer Engine recipes (``TransformerConfig.quant_recipe``, loaded from a YAML of ``configs`` and glob
``matchers``: ``megatron/core/quantization/utils.py`` ``load_quantization_recipe``, NVIDIA/Megatron-LM @d98e8a64),
and Megatron-Bridge's Nemotron 3 Super NVFP4 recipe uses it: ``te_quant.cfg`` (blob 646ff9e6, the same file in
NVIDIA-NeMo/Megatron-Bridge v0.4.0 to v0.6.0, ``scripts/performance/configs/nemotronh/`` and from v0.6.0
``src/megatron/bridge/perf_recipes/nemotronh/``) keeps ``*.linear_qkv`` and ``*.linear_proj`` (attention's
projections), ``*mlp.fc[12]_latent_proj`` (the latent MoE's projections) and ``mtp.*`` (the multi-token-prediction
block) in BF16 and runs ``*mixer.out_proj`` (Mamba-2's output projection) in MXFP8, the rest in NVFP4.

This model names the operations of its mean layer, not modules, so a recipe is stated per group of operations
(``GROUPS``), each in a training format wider than the job's (``operation_format``): a group's GEMM FLOPs run at that
format's rate, as their share of the mean layer's operation (attention's projections are the attention layers' share
of the ``qkv`` and ``output projection`` GEMMs of a hybrid stack, whose recurrent layers project in their place;
``operation_shares``); the multi-token-prediction blocks, priced as layers of the last stage, run whole in theirs,
as their share of the priced layers blended into the mean layer (exact without pipeline parallelism; with it, the
last stage's MTP blocks are spread over every stage's mean layer). Not priced: the wider formats' own quantization
kernels (an MXFP8 GEMM's casts in an NVFP4 job), and memory (the weights are held in 16 bits either way).
"""

from __future__ import annotations

from collections.abc import Mapping

from clustersim.catalog.schema import Accelerator, Dtype
from clustersim.compute.precision import (
    TRAINING_FORMATS,
    check_training_format,
    is_low_precision,
    job_dtype,
    parse_training_format,
)
from clustersim.errors import ClusterSimError
from clustersim.workload.ops import LATENT_PROJECTIONS
from clustersim.workload.transformer import Transformer

ATTENTION_PROJECTIONS = "attention_projections"
MIXER_OUTPUT_PROJECTION = "mixer_output_projection"
LATENT = "latent_projections"
MTP = "mtp"
GROUPS: dict[str, str] = {
    ATTENTION_PROJECTIONS: "the attention layers' query/key/value and output projections",
    MIXER_OUTPUT_PROJECTION: "a recurrent layer's output projection (Mamba-2, Gated DeltaNet)",
    LATENT: "a latent MoE's projections to its latent width and back",
    MTP: "the multi-token-prediction blocks, whole",
}
"""The groups of operations a recipe can keep in a wider format, and what each holds."""
# bits of each job format, to tell a wider format from a narrower one
_BITS = {Dtype.FP16: 16, Dtype.BF16: 16, Dtype.FP8: 8, Dtype.FP4: 4}


def groups_of(model: Transformer) -> tuple[str, ...]:
    """The groups ``model`` has: attention projections where it has attention layers, a recurrent layer's output
    projection where it has recurrent ones, latent projections for a latent MoE, MTP where it predicts ahead."""
    has = {
        ATTENTION_PROJECTIONS: model.full_attention_layers > 0,
        MIXER_OUTPUT_PROJECTION: model.linear_attention is not None,
        LATENT: model.moe is not None and model.moe.latent is not None,
        MTP: model.mtp_layers > 0,
    }
    return tuple(group for group in GROUPS if has[group])


def operation_format(group: str, value: str, precision: Dtype, accelerator: Accelerator, field: str) -> Dtype:
    """The format ``value`` of ``group`` in a ``precision`` job on ``accelerator``: a training format wider than the
    job's that the chip runs; else a one-line ``ClusterSimError`` naming ``field``, the value and what is valid."""
    where = f"{field} {group}={value}"
    fmt = parse_training_format(value, f"{field} {group}")
    check_training_format(fmt, accelerator, f"{field} {group}")
    dtype = job_dtype(fmt)
    if _BITS[dtype] <= _BITS[precision]:
        wider = [f.value for f in TRAINING_FORMATS if _BITS[job_dtype(f)] > _BITS[precision]]
        raise ClusterSimError(
            f"{where}: not wider than the {precision.value} job's own format (valid: {', '.join(wider)})",
            field=field,
            value=value,
        )
    return dtype


def check_operation_formats(
    model: Transformer,
    formats: Mapping[str, str],
    precision: Dtype,
    accelerator: Accelerator,
    field: str = "operation_formats",
) -> dict[str, Dtype]:
    """``formats`` (group -> training format) checked for this job: an 8- or 4-bit job (a 16-bit one has nothing
    narrower to widen), groups the model has, each format wider than the job's and run by the chip; the groups'
    formats, or a one-line ``ClusterSimError`` naming ``field``, the value and what is valid."""
    if not formats:
        return {}
    if not is_low_precision(precision):
        raise ClusterSimError(
            f"{field}: a {precision.value} job runs every GEMM in 16 bits; operation formats need an fp8 or fp4 job",
            field=field,
            value=dict(formats),
        )
    valid = groups_of(model)
    out = {}
    for group, value in formats.items():
        if group not in valid:
            has = f"{model.name}'s: {', '.join(valid)}"  # every model has attention or recurrent layers
            why = f"{model.name} has no {group}" if group in GROUPS else f"unknown group {group!r}"
            raise ClusterSimError(f"{field}: {why} (groups: {', '.join(GROUPS)}; {has})", field=field, value=group)
        out[group] = operation_format(group, value, precision, accelerator, field)
    return out


def operation_shares(model: Transformer, formats: Mapping[str, Dtype]) -> dict[str, dict[Dtype, float]]:
    """Per operation of the mean layer (by name), the share of its GEMM FLOPs each wider format takes in a quantized
    layer (the rest run in the job's format); the MTP blocks are whole layers (``mtp_layer_share``)."""
    shares: dict[str, dict[Dtype, float]] = {}

    def add(op: str, dtype: Dtype, share: float) -> None:
        shares.setdefault(op, {})
        shares[op][dtype] = shares[op].get(dtype, 0.0) + share

    attention = model.full_attention_layers / model.layers
    if (dtype := formats.get(ATTENTION_PROJECTIONS)) is not None:
        add("qkv", dtype, attention * model.qkv_matmul_params() / model.mixer_qkv_matmul_params())
        add("output projection", dtype, attention * model.output_matmul_params() / model.mixer_output_matmul_params())
    linear = model.linear_attention
    if (dtype := formats.get(MIXER_OUTPUT_PROJECTION)) is not None and linear is not None:
        recurrent = linear.output_matmul_params(model.hidden) * model.linear_attention_layers / model.layers
        add("output projection", dtype, recurrent / model.mixer_output_matmul_params())
    if (dtype := formats.get(LATENT)) is not None:
        add(LATENT_PROJECTIONS, dtype, 1.0)
    return shares


def mtp_layer_share(model: Transformer) -> float:
    """The share of the priced layers (the decoder's and the MTP blocks', each priced as one layer) the MTP blocks
    are."""
    return model.mtp_layers / (model.layers + model.mtp_layers)
