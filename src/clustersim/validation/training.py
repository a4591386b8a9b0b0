"""Predict ground-truth training and memory cases (``data/README.md`` format) with the estimator.

A null (or absent) layout field means the source did not say it. It is resolved with the documented
default of the case's framework profile on the case's accelerator family (``zero``, ``sequence_parallel``
where tp > 1, ``recompute``, ``micro_batch``; ``vp``, ``cp`` and ``ep`` are 1 in every framework):
:func:`clustersim.compute.software.resolve_layout`, the same function that fills the layout options
``clustersim train --framework F`` is not given. :func:`case_assumptions` says per case what was
assumed. Layers that do not divide by ``pp * vp`` are allowed (uneven stages); the fullest stage sets
the pace.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.bf16_layers import check_bf16_layers
from clustersim.compute.efficiency import FamilyEfficiency, efficiency_for
from clustersim.compute.fused_expert_mlp import FUSED_EXPERT_MLP_FAMILY
from clustersim.compute.operation_formats import check_operation_formats
from clustersim.compute.precision import is_low_precision, training_dtype
from clustersim.compute.software import SoftwareProfile, resolve_layout, software_for
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, layout_from_mapping
from clustersim.system import System
from clustersim.training.estimate import Estimate, estimate_training
from clustersim.training.job import TrainingJob
from clustersim.validation.case_model import case_transformer
from clustersim.validation.cases import Case, CaseParallel, as_case
from clustersim.validation.systems import system_from_case
from clustersim.workload.float8 import Float8Recipe
from clustersim.workload.transformer import Transformer

_GIB = 2**30
_LAYOUT_KEYS = (
    *("tp", "pp", "dp", "cp", "ep", "etp", "vp", "micro_batch", "zero", "sequence_parallel", "recompute"),
    "last_stage_layers",
    "offload_layers",
)


@dataclass(frozen=True)
class CaseSetup:
    """What a training or memory case describes, its unstated layout fields resolved."""

    model: Transformer
    system: System
    layout: Layout
    job: TrainingJob
    software: SoftwareProfile  # the profile of the case's framework on its accelerator family
    assumed: dict[str, int | bool | str]  # the layout fields the case leaves null, as resolved (field -> value)


def case_setup(
    case: Case | Mapping[str, Any], catalog: Catalog, profiles: dict[str, SoftwareProfile] | None = None
) -> CaseSetup:
    """The model, system, layout, job and software profile a case describes; ``profiles``: software
    profiles in place of the packaged ones."""
    case = as_case(case)
    where = f"case {case.id}"
    model, model_assumed = case_transformer(case.model, where)
    system = system_from_case(catalog, case.system)
    software = software_for(case_framework(case), system.accelerator.family, profiles)
    parallel = case.parallel or CaseParallel()
    fields, assumed = resolve_layout({k: getattr(parallel, k) for k in _LAYOUT_KEYS}, software)
    assumed.update(model_assumed)
    compiled = case.software.compiled if case.software else None
    if compiled:  # torch.compile fuses what the stack would run eagerly; without it, the stack's own kernels
        software = software.model_copy(update={"eager_elementwise": False})
    elif compiled is None and software.eager_elementwise:
        assumed["compiled"] = False  # the framework's default (eager), said per case
    if case.software and case.software.compiled_loss:
        software = _compiled_loss(where, software, compiled)
    recipe = case.software.float8_recipe if case.software else None
    if recipe is not None:  # an FP8 run's scaling recipe (null: the profile's, tensorwise in every packaged one)
        if case.precision != "fp8":
            raise ClusterSimError(
                f"{where}: software.float8_recipe {recipe!r} needs precision 'fp8', got {case.precision or 'bf16'!r}",
                field="software.float8_recipe",
                value=recipe,
            )
        software = software.model_copy(update={"float8_recipe": Float8Recipe(recipe)})
    # Published runs balance uneven layer counts over stages (e.g. Llama 3 405B: 126 layers, pp 16).
    experts = model.moe is not None and int(fields["ep"]) > 1
    if parallel.ep_overlap is None and experts:
        assumed["ep_overlap"] = software.ep_overlap  # the framework's default, said per case
    dispatcher = {"hybridep": "deepep"}.get(parallel.ep_dispatcher or "", parallel.ep_dispatcher)  # both per node
    if dispatcher is None and experts:
        assumed["ep_dispatcher"] = "deepep" if software.ep_dispatch_per_node else "alltoall"
    extra: dict[str, Any] = {"uneven_stages": True, "ep_overlap": parallel.ep_overlap, "ep_dispatcher": dispatcher}
    extra["tp_overlap"] = parallel.tp_overlap
    extra["recompute_modules"] = parallel.recompute_modules  # the Layout holds the list as a tuple
    layout = layout_from_mapping(fields | extra, where=f"{where}: parallel")
    global_batch = parallel.global_batch
    if global_batch is None or global_batch < 1:
        raise ClusterSimError(f"{where}: parallel.global_batch must be a positive integer, got {global_batch!r}")
    try:
        precision = training_dtype(case.precision or "bf16", system.accelerator)
    except ClusterSimError as exc:
        raise ClusterSimError(f"{where}: {exc}", field="precision", value=case.precision) from None
    software = _stated_kernels(case, model, system, precision, software)
    job = TrainingJob(global_batch=global_batch, seq_len=model.seq_len, precision=precision)
    return CaseSetup(model, system, layout, job, software, assumed)


def _compiled_loss(where: str, software: SoftwareProfile, compiled: bool | None) -> SoftwareProfile:
    """The profile with its loss compiled with the model (``software.compiled_loss``); refused where the run did not
    compile (``software.compiled`` not true) or the framework's loss is not one torch.compile compiles."""
    bytes_per_logit = software.compiled_loss_bytes_per_logit
    if not compiled or bytes_per_logit is None:
        why = "needs software.compiled true" if not compiled else f"{software.name}'s loss is its own kernel"
        raise ClusterSimError(f"{where}: software.compiled_loss {why}", field="software.compiled_loss", value=True)
    return software.model_copy(update={"loss_bytes_per_logit": bytes_per_logit})


def _stated_kernels(
    case: Case, model: Transformer, system: System, precision: Dtype, software: SoftwareProfile
) -> SoftwareProfile:
    """The profile with the kernels a case states (``software.fp8_attention``, ``software.fused_expert_mlp``,
    ``software.quantized_head``, ``software.fp8_param_gather`` and its CUDA graph capture ``software.cuda_graphs``,
    ``clustersim.training.host_launches``); refused where the run could not have used them: the first three need
    an 8- or 4-bit job, the FP8 gathers an 8-bit one, the fused MLP a MoE model on a Blackwell GPU
    (``compute.fused_expert_mlp.FUSED_EXPERT_MLP_FAMILY``)."""
    kernels = ("fp8_attention", "fused_expert_mlp", "quantized_head", "fp8_param_gather")
    stated = {k: getattr(case.software, k) for k in kernels} if case.software else {}
    where = f"case {case.id}: software"
    for name, value in stated.items():
        eight_bit = name == "fp8_param_gather"  # the gathers of an 8-bit format only (NVFP4 presets gather BF16)
        if value and not (precision is Dtype.FP8 if eight_bit else is_low_precision(precision)):
            wanted = "an FP8 or MXFP8" if eight_bit else "an FP8 or 4-bit"
            raise ClusterSimError(
                f"{where}.{name} needs {wanted} precision, got {case.precision or 'bf16'!r}",
                field=f"software.{name}",
                value=value,
            )
    if stated.get("fused_expert_mlp"):
        if model.moe is None:
            raise ClusterSimError(f"{where}.fused_expert_mlp needs a MoE model", field="software.fused_expert_mlp")
        if system.accelerator.family != FUSED_EXPERT_MLP_FAMILY:
            raise ClusterSimError(
                f"{where}.fused_expert_mlp runs on {FUSED_EXPERT_MLP_FAMILY} GPUs only, not {system.accelerator.id!r}",
                field="software.fused_expert_mlp",
                value=system.accelerator.id,
            )
    given = {k: v for k, v in stated.items() if v is not None}
    bf16_layers = case.software.bf16_layers if case.software else None
    if bf16_layers:  # the layers the recipe keeps in BF16 (clustersim.compute.bf16_layers)
        try:
            check_bf16_layers(model, bf16_layers, precision, field="software.bf16_layers")
        except ClusterSimError as exc:
            raise ClusterSimError(f"case {case.id}: {exc}", field=exc.field, value=exc.value) from None
        given["bf16_layers"] = bf16_layers
    formats = case.software.operation_formats if case.software else None
    if formats:  # the recipe's operations in a wider format (clustersim.compute.operation_formats)
        try:
            check_operation_formats(model, formats, precision, system.accelerator, field="software.operation_formats")
        except ClusterSimError as exc:
            raise ClusterSimError(f"case {case.id}: {exc}", field=exc.field, value=exc.value) from None
        given["operation_formats"] = dict(formats)
    if case.software and case.software.cuda_graphs is not None:  # the capture: host-bound launches where none
        given["cuda_graphs"] = case.software.cuda_graphs
    return software.model_copy(update=given) if given else software


def case_inputs(
    case: Case | Mapping[str, Any], catalog: Catalog, profiles: dict[str, SoftwareProfile] | None = None
) -> tuple[Transformer, System, Layout, TrainingJob]:
    """The model, system, layout and job a case describes (unstated layout fields resolved, see the module)."""
    setup = case_setup(case, catalog, profiles)
    return setup.model, setup.system, setup.layout, setup.job


def case_assumptions(case: Case | Mapping[str, Any], catalog: Catalog) -> dict[str, int | bool | str]:
    """The layout fields a training or memory case leaves null, with the values assumed for them
    (its framework's defaults); empty when the case states them all."""
    return case_setup(case, catalog).assumed


def estimate_case(
    case: Case | Mapping[str, Any], catalog: Catalog, efficiency: Mapping[str, FamilyEfficiency] | None = None
) -> Estimate:
    """The estimate of a training or memory case, with the software profile of its framework
    (``software.framework``; Megatron's where the case names none); ``efficiency``: a table of
    fractions per family in place of the packaged one (a calibration being fitted)."""
    return case_estimator(case, catalog)(efficiency)


def case_estimator(
    case: Case | Mapping[str, Any], catalog: Catalog, profiles: dict[str, SoftwareProfile] | None = None
) -> Callable[[Mapping[str, FamilyEfficiency] | None], Estimate]:
    """The estimate of a case under any efficiency table (None: the packaged one), its inputs built once;
    ``profiles``: software profiles in place of the packaged ones."""
    setup = case_setup(case, catalog, profiles)
    model, system, layout, job, software = setup.model, setup.system, setup.layout, setup.job, setup.software

    def estimate(efficiency: Mapping[str, FamilyEfficiency] | None = None) -> Estimate:
        fractions = None if efficiency is None else efficiency_for(system.accelerator, efficiency)
        return estimate_training(model, system, layout, job, efficiency=fractions, software=software)

    return estimate


def case_framework(case: Case) -> str | None:
    """The framework a case names (None: the default profile's)."""
    return case.software.framework if case.software else None


def predict_training_case(
    case: Case | Mapping[str, Any],
    field: str,
    catalog: Catalog,
    efficiency: Mapping[str, FamilyEfficiency] | None = None,
) -> float:
    """The case's ``field`` (step_time_s, tokens_per_s_per_device, model/hw TFLOP/s per device, mfu),
    under the efficiency table ``efficiency`` (None: the packaged one)."""
    case = as_case(case)
    return case_value(case, estimate_case(case, catalog, efficiency), field)


def case_value(case: Case, estimate: Estimate, field: str) -> float:
    """``case``'s measured ``field`` as ``estimate`` gives it, its FLOPs counted as the case's source counts them
    (``attention_flops``)."""
    return training_value(estimate, field, causal_attention=case.attention_flops == "causal")


def training_value(estimate: Estimate, field: str, *, causal_attention: bool = False) -> float:
    """A measured training ``field`` as ``estimate`` gives it; ``causal_attention``: the FLOP counts (model and
    hardware TFLOP/s, MFU) take the attention matmuls over the keys a causal query meets, half the sequence, as the
    source counted them (a case's ``attention_flops`` "causal")."""
    per_device = estimate.step_s * estimate.num_devices
    uncounted = estimate.attention_flops_per_step / 2 if causal_attention else 0.0
    model_flops = estimate.model_flops_per_step - uncounted
    values = {
        "step_time_s": estimate.step_s,
        "tokens_per_s_per_device": estimate.tokens_per_s_per_device,
        "model_tflops_per_device": model_flops / per_device / 1e12,
        "hw_tflops_per_device": (estimate.hardware_flops_per_step - uncounted) / per_device / 1e12,
        "mfu": model_flops / (per_device * estimate.peak_flop_per_s),
    }
    if field not in values:
        raise ClusterSimError(f"cannot predict training field {field!r} (valid: {', '.join(values)})")
    return values[field]


def predict_memory_case(case: Case | Mapping[str, Any], field: str, catalog: Catalog) -> float:
    """The case's ``field`` in GiB per device (model state, activations, their total, or what PyTorch's caching
    allocator reserves at the peak: the total and its fragmentation)."""
    memory = estimate_case(case, catalog).memory
    values = {
        "total_GiB_per_device": memory.total_bytes,
        "reserved_GiB_per_device": memory.reserved_bytes,
        "weights_and_optimizer_GiB_per_device": memory.weights_bytes + memory.gradients_bytes + memory.optimizer_bytes,
        "activations_GiB_per_device": memory.activations_bytes,
    }
    if field not in values:
        raise ClusterSimError(f"cannot predict memory field {field!r} (valid: {', '.join(values)})")
    return values[field] / _GIB
