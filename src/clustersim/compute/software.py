"""The software stack as an input: what the training framework does, separate from what the chip can do.

The same model on the same GPUs runs at very different speeds under Megatron-LM and under a PyTorch FSDP
trainer. A ``SoftwareProfile`` says what one framework does: whether its attention kernel is fused (no score
matrix in memory), whether it overlaps tensor-parallel communication with GEMMs, how it shards parameters under
ZeRO-3/FSDP, in which precision and when it reduces gradients, how much of the hardware's GEMM efficiency its
kernels reach, and its host-side costs. Hardware efficiencies (``clustersim.compute.efficiency``): the chip only.

A profile also says how the framework lays a job out when the job does not say: its documented
default ZeRO stage, sequence parallelism (where tp > 1), activation recompute and micro-batch, each
with its source. :func:`resolve_layout` fills a layout's unstated fields from them, and is the one
definition that both ``clustersim train`` (options not given) and the validation reader (null fields
of a ground-truth case) use; it returns what it assumed, so that a report can say so.

A profile names the accelerator families it runs on (``accelerator_families``, with
``families_source``): :func:`software_for`, the one place a profile is chosen, refuses a framework on a
family it does not run on (``neuronx`` on an H100, ``fsdp`` on Trainium), naming both and what runs
there, and with no framework named takes the family's default (``default_on``: megatron on GPUs,
neuronx on Trainium; :func:`default_framework`).

The profiles live in ``software.toml`` beside this module, each with its sources. A profile may
hold ``[<profile>.family.<family>]`` tables for what the framework did on one accelerator family
(the Megatron-LM measured on A100 predates fused attention). A user's file (``CLUSTERSIM_SOFTWARE``
or ``extra`` paths) replaces the fields it gives; ``based_on`` starts a new profile from a known one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clustersim.catalog.overlay import RecordFile
from clustersim.catalog.schema import Dtype
from clustersim.choices import CudaGraphs, Recompute, RecomputeModule, SelectiveRecompute
from clustersim.compute.memory import GRADIENT_BYTES, OPTIMIZER_BYTES, WEIGHT_BYTES
from clustersim.compute.precision import is_low_precision
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.workload.float8 import Float8Recipe

ENV_VAR = "CLUSTERSIM_SOFTWARE"
PACKAGE, FILE_NAME = "clustersim.compute", "software.toml"
DEFAULT_FRAMEWORK = "megatron"  # the default on GPUs; see default_framework() for any family
DERIVED: Literal["derived"] = "derived"  # an expert TP degree left to the layout (tp's: Megatron-Core's default)
ExpertTp = Annotated[int, Field(ge=1)] | Literal["derived"]
_DEFAULT_ETP = (
    "Expert tensor-parallel degree of a MoE layout with ep > 1 when the job does not say: 'derived' (tp's, as "
    "Megatron-Core's expert_tensor_parallel_size defaults) or a degree, used where it divides tp."
)
_DEFAULT_VP = (
    "Model chunks per pipeline rank (the interleaved schedule's degree) of a layout with pp > 1 when the job does "
    "not say: 1, no interleaving, as Megatron-LM without --num-layers-per-virtual-pipeline-stage."
)


class LayoutDefaults(BaseModel):
    """A framework's documented layout defaults, for the fields a job (or a published source) may leave unstated."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    zero: int = Field(ge=0, le=3, description="ZeRO stage (1: a distributed optimizer, 3: FSDP FULL_SHARD).")
    sequence_parallel: bool = Field(description="Sequence parallelism wherever tp > 1.")
    recompute: Recompute = Field(description="Activation recompute.")
    micro_batch: int = Field(ge=1, description="Sequences per micro-batch.")
    etp: ExpertTp = Field(DERIVED, description="Expert tensor-parallel degree of a MoE layout with ep > 1.")
    vp: int = Field(1, ge=1, description="Model chunks per pipeline rank (interleaving) where pp > 1.")
    source: str = Field(min_length=1, description="Where these come from.")


class SoftwareSettings(BaseModel):
    """What a framework does; in a family table, every field is optional and replaces the profile's."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    fused_attention: bool | None = Field(None, description="Attention in one fused kernel (no score matrix stored).")
    tp_overlap: bool | None = Field(None, description="Tensor-parallel communication overlapped with GEMMs.")
    eager_elementwise: bool | None = Field(
        None,
        description="Norms, rotary embeddings and activations run as PyTorch eager ops, one kernel each "
        "(no torch.compile or fused kernels).",
    )
    zero3_prefetch: bool | None = Field(
        None, description="ZeRO-3/FSDP: the next layer's parameters are gathered during this layer's compute."
    )
    zero3_collectives_per_layer: int | None = Field(
        None, ge=1, description="ZeRO-3/FSDP: collectives per layer per gather (1: a flat parameter per layer)."
    )
    zero3_hierarchical: bool | None = Field(
        None,
        description="ZeRO-3/FSDP collectives use the scale-up fabric inside a node (NCCL rings/trees); "
        "false: flat over ranks, every rank's share crossing its own network card.",
    )
    ep_overlap: bool | None = Field(
        None, description="Expert all-to-alls overlapped with another micro-batch's compute (MoE A2A overlap)."
    )
    ep_overlap_efficiency: float | None = Field(None, ge=0, le=1, description="Coverable all-to-all time hidden.")
    ep_overlap_sm_share: float | None = Field(
        None, ge=0, lt=1, description="Share of the SMs overlapped expert dispatch and combine kernels hold."
    )
    ep_dispatch_bytes_fp8: float | None = Field(
        None, gt=0, le=2, description="Bytes per element of the token dispatch in FP8 training (combine stays 16-bit)."
    )
    ep_dispatch_per_node: bool | None = Field(
        None,
        description="Expert dispatch and combine cross the network once per remote node a token's experts sit on "
        "and fan out over the scale-up fabric (DeepEP / HybridEP); false: once per routed expert (all-to-all).",
    )
    grad_reduce_overlap: bool | None = Field(
        None,
        description="ZeRO 0-2: gradients reduced in buckets during the backward pass (and parameters gathered "
        "during the forward pass); false: one reduce after the backward pass.",
    )
    grad_reduce_bytes_fp16: float | None = Field(
        None, gt=0, description="Bytes per gradient element reduced across data-parallel ranks in FP16 training."
    )
    grad_reduce_bytes_bf16: float | None = Field(
        None, gt=0, description="Bytes per gradient element reduced in BF16 (and FP8) training."
    )
    kernel_efficiency: float | None = Field(
        None, gt=0, le=1, description="Fraction of the hardware's GEMM and attention efficiency its kernels reach."
    )
    attention_kernel_efficiency: float | None = Field(
        None, gt=0, le=1, description="Fraction of the family's fused-attention rate its attention kernel reaches."
    )
    layer_overhead_s: float | None = Field(
        None, ge=0, le=0.1, description="Host-side seconds per layer and micro-batch (hooks, launches), fwd + bwd."
    )
    step_overhead_s: float | None = Field(None, ge=0, le=60, description="Host-side seconds per optimizer step.")
    default_zero: int | None = Field(
        None, ge=0, le=3, description="ZeRO stage when the job does not say (1: a distributed optimizer, 3: FSDP)."
    )
    default_sequence_parallel: bool | None = Field(None, description="Sequence parallelism (tp > 1) when unstated.")
    default_recompute: Recompute | None = Field(None, description="Activation recompute when the job does not say.")
    default_micro_batch: int | None = Field(None, ge=1, description="Sequences per micro-batch when unstated.")
    default_etp: ExpertTp | None = Field(None, description=_DEFAULT_ETP)
    default_vp: int | None = Field(None, ge=1, le=64, description=_DEFAULT_VP)
    layout_source: str | None = Field(
        None, min_length=1, description="Where the default_* layout fields come from (docs, arguments, recipes)."
    )
    zero_stages: tuple[int, ...] | None = Field(
        None, description="The ZeRO stages the framework implements (None: any); another is refused."
    )
    uneven_stages: bool | None = Field(
        None, description="Pipeline stages may hold different layer counts (a layout search then offers them)."
    )
    sharded_pipeline: bool | None = Field(
        None, description="ZeRO 2-3 (FSDP) sharding together with pipeline parallelism (a search then offers it)."
    )
    float8_recipe: Float8Recipe | None = Field(
        None, description="FP8 jobs' scaling recipe (torchao's names: tensorwise, rowwise, rowwise_with_gw_hp)."
    )


class SoftwareProfile(SoftwareSettings):
    """One framework's profile; every setting given (a family table may replace some)."""

    fused_attention: bool = Field(description="Attention in one fused kernel (no score matrix stored).")
    tp_overlap: bool = Field(description="Tensor-parallel communication overlapped with GEMMs.")
    eager_elementwise: bool = Field(False, description="Element-wise ops as PyTorch eager kernels, one per op.")
    zero3_prefetch: bool = Field(description="ZeRO-3/FSDP: next layer's parameters gathered during compute.")
    zero3_collectives_per_layer: int = Field(ge=1, description="ZeRO-3/FSDP: collectives per layer per gather.")
    zero3_hierarchical: bool = Field(description="ZeRO-3/FSDP collectives use the scale-up fabric inside a node.")
    ep_overlap: bool = Field(description="Expert all-to-alls overlapped with another micro-batch's compute.")
    ep_overlap_efficiency: float = Field(
        1.0, ge=0, le=1, description="Share of the coverable all-to-all time the overlap schedule hides."
    )
    ep_overlap_sm_share: float = Field(
        0.0, ge=0, lt=1, description="Share of the SMs overlapped expert dispatch and combine kernels hold."
    )
    ep_dispatch_bytes_fp8: float = Field(gt=0, le=2, description="Bytes per element of the FP8 token dispatch.")
    ep_dispatch_per_node: bool = Field(
        False, description="Expert tokens cross the network once per remote node (DeepEP / HybridEP), not per expert."
    )
    grad_reduce_overlap: bool = Field(
        True, description="ZeRO 0-2: the per-step gradient reduce and parameter gather overlap compute."
    )
    grad_reduce_bytes_fp16: float = Field(gt=0, description="Bytes per gradient element reduced, FP16 training.")
    grad_reduce_bytes_bf16: float = Field(gt=0, description="Bytes per gradient element reduced, BF16/FP8 training.")
    kernel_efficiency: float = Field(gt=0, le=1, description="Fraction of the hardware's GEMM efficiency reached.")
    fp8_attention: bool = Field(
        False,
        description="FP8 and 4-bit jobs: the attention core computes in FP8, at the FP8 rate (Transformer Engine's "
        "fp8_dot_product_attention); false: in 16 bits.",
    )
    fused_expert_mlp: bool = Field(
        False,
        description="MoE jobs: each routed expert MLP runs as grouped GEMMs that apply the activation and quantize "
        "in their epilogues (Transformer Engine's CuTe DSL fused grouped MLP): no separate activation pass and "
        "no quantization kernel per expert slice.",
    )
    quantized_head: bool = Field(False, description="8- and 4-bit jobs: the logits GEMM in that format; false: BF16.")
    bf16_layers: int = Field(0, ge=0, description="8- and 4-bit jobs: layers at the stack's ends kept in BF16.")
    operation_formats: dict[str, str] = Field(
        default_factory=dict,
        description="8- and 4-bit jobs: groups of operations in a wider format (clustersim.compute.operation_formats).",
    )
    unfused_clamped_glu: bool = Field(
        False, description="A clamped gated MLP's clamps run before its fused activation (architecture_ops)."
    )
    unfused_scaled_rope: bool = Field(False, description="RoPE with YaRN's factor runs unfused (architecture_ops).")
    fp8_param_gather: bool = Field(False, description="8-bit jobs: ZeRO's parameter all-gathers in that format.")
    float8_saved_inputs: bool = Field(
        False,
        description="FP8 and 4-bit jobs: each GEMM keeps its quantized input (a byte an element) for the weight "
        "gradient instead of the 16-bit one (Transformer Engine's Linear, LayerNormLinear and LayerNormMLP).",
    )
    selective_recompute: SelectiveRecompute = Field(
        SelectiveRecompute.ATTENTION_CORE,
        description="What a layout's selective recompute runs again in the backward pass, and so what each layer keeps "
        "(clustersim.compute.memory): the attention core (Megatron) or every second matmul and the element-wise ops "
        "(torchtitan's per-op policy).",
    )
    moe_recompute_module_sets: tuple[tuple[RecomputeModule, ...], ...] = Field(
        (), description="Selective recompute module sets a search of a MoE model tries beside the framework's own: "
        "its published MoE recipes' (each where the model has its every module)."
    )  # fmt: skip
    moe_recompute_sets_source: str | None = Field(None, min_length=1, description="The recipes that run those sets.")
    zero3_gathered_units: float = Field(
        2.0,
        ge=0,
        le=8,
        description="ZeRO 3: gather units whose 16-bit weights the framework holds beside its shards at the loss, "
        "with the output matrix (a unit is a layer over zero3_collectives_per_layer): 2, the one it computes and the "
        "one it prefetches (FSDP's blocks, DeepSpeed's submodules); 0: none counted.",
    )
    compiled_loss_bytes_per_logit: float | None = Field(
        None,
        gt=0,
        le=32,
        description="Bytes per logit the loss holds at its backward when torch.compile compiles it with the model "
        "(fused upcast, log-softmax and backward: the 16-bit logits kept and their 16-bit gradient); None: the "
        "framework's loss is not compiled with it.",
    )
    pipeline_unsharded_state: bool = Field(
        False,
        description="ZeRO 2-3 with pipeline parallelism: the stage's weights stay gathered in 16 bits through the "
        "step and its gradients accumulate unsharded, in FP32, until the last micro-batch's backward (torchtitan's "
        "FSDP2 under torch.distributed.pipelining); false: ZeRO's shards as at any other layout.",
    )
    tp_keeps_gathered_inputs: bool = Field(
        False,
        description="Tensor parallelism keeps the QKV and MLP inputs it all-gathered for the weight gradients, whole "
        "(torchtitan's ColwiseParallel), where Megatron keeps them split over the sequence and gathers them again in "
        "the backward pass.",
    )
    loss_bytes_per_logit: float = Field(
        4.0,
        gt=0,
        le=32,
        description="Bytes per logit the loss holds at its peak, on the last pipeline stage: 4, the FP32 softmax "
        "Megatron's vocab-parallel cross entropy keeps for its backward; 12 where the loss upcasts the logits and "
        "keeps log-softmax and its gradient in FP32 (torchtitan).",
    )
    activation_offload: bool = Field(
        False,
        description="A layout may send whole layers' activations to host memory in the forward pass and bring them "
        "back for the backward (Megatron-Core's cpu_offloading_num_layers); false: offload_layers is refused.",
    )
    attention_kernel_efficiency: float = Field(
        1.0, gt=0, le=1, description="Fraction of the family's fused-attention rate its attention kernel reaches."
    )
    layer_overhead_s: float = Field(ge=0, le=0.1, description="Host-side seconds per layer and micro-batch.")
    step_overhead_s: float = Field(ge=0, le=60, description="Host-side seconds per optimizer step.")
    cuda_graphs: CudaGraphs | None = Field(None, description="The run's CUDA graph capture; None: not stated.")
    eager_moe_layer_s: dict[str, float] = Field(
        {}, description="Host seconds to launch one MoE layer's kernels for a micro-batch (forward, backward, "
        "recompute) when cuda_graphs is none, on the accelerators (catalog ids) whose host it was measured on; the "
        "GPU waits where its own work is shorter (clustersim.training.host_launches). Absent: not priced.",
    )  # fmt: skip
    partial_graph_moe_layer_s: dict[str, float] = Field(
        {}, description="Seconds the GPU waits per MoE layer and micro-batch when cuda_graphs is partial (the routed "
        "experts eager after a device-host sync), on the accelerators whose host it was measured on. Absent: 0.",
    )  # fmt: skip
    default_zero: int = Field(ge=0, le=3, description="ZeRO stage when the job does not say.")
    default_sequence_parallel: bool = Field(description="Sequence parallelism when tp > 1 and the job does not say.")
    default_recompute: Recompute = Field(description="Activation recompute when the job does not say.")
    default_micro_batch: int = Field(ge=1, description="Sequences per micro-batch when the job does not say.")
    default_etp: ExpertTp = Field(DERIVED, description=_DEFAULT_ETP)
    default_vp: int = Field(1, ge=1, le=64, description=_DEFAULT_VP)
    layout_source: str = Field(min_length=1, description="Where the default_* layout fields come from.")
    zero_stages: tuple[int, ...] | None = Field(
        None, description="The ZeRO stages the framework implements (None: any); another is refused."
    )
    uneven_stages: bool = Field(
        False, description="Pipeline stages may hold different layer counts (a layout search then offers them)."
    )
    sharded_pipeline: bool = Field(
        False, description="ZeRO 2-3 (FSDP) sharding together with pipeline parallelism (a search then offers it)."
    )
    float8_recipe: Float8Recipe = Field(
        Float8Recipe.TENSORWISE,
        description="FP8 jobs' scaling recipe; tensorwise (per-tensor scales, as Transformer Engine's and torchao's "
        "defaults) is what the family's fitted FP8 rate holds, the others add their casts and kernels "
        "(clustersim.workload.float8).",
    )
    weight_bytes_per_param: float = Field(
        WEIGHT_BYTES, gt=0, le=8, description="Bytes of each parameter's stored weights (ZeRO 3 shards them)."
    )
    gradient_bytes_per_param: float = Field(
        GRADIENT_BYTES, gt=0, le=8, description="Bytes of each parameter's gradient (ZeRO 2 and 3 shard them)."
    )
    optimizer_bytes_per_param: float = Field(
        OPTIMIZER_BYTES, gt=0, le=16, description="Bytes of each parameter's optimizer state (ZeRO 1-3 shard them)."
    )
    state_bytes_source: str = Field(
        "Megatron-LM's mixed-precision Adam: bf16 weights, fp32 gradient buffers, fp32 master weights, momentum and "
        "variance (Korthikanti et al. 2022, arXiv 2205.05198; Megatron-Core distributed optimizer docs)",
        min_length=1,
        description="Where the state bytes per parameter come from.",
    )
    description: str = Field(min_length=1, description="Which software this profile describes.")
    source: str = Field(min_length=1, description="Where each setting comes from, or what it was fitted to.")
    accelerator_families: tuple[str, ...] = Field(
        min_length=1, description="The accelerator families (catalog `family`) this software runs on."
    )
    default_on: tuple[str, ...] = Field(
        (), description="The families on which this is the framework when a job names none (one profile per family)."
    )
    families_source: str = Field(
        min_length=1, description="Where accelerator_families comes from (the software's supported hardware)."
    )
    fitted: str | None = Field(None, description="When and how fitted values were last fitted.")
    family: dict[str, SoftwareSettings] = Field(
        default_factory=dict, description="Settings that differ on one accelerator family."
    )
    name: str = Field("", description="The profile's name (filled in when loaded).")

    @property
    def state_bytes(self) -> tuple[float, float, float]:
        """Bytes per parameter of the weights, gradients and optimizer state (what ZeRO 3, 2 and 1 shard)."""
        return self.weight_bytes_per_param, self.gradient_bytes_per_param, self.optimizer_bytes_per_param

    @model_validator(mode="after")
    def _defaults_run_there(self) -> SoftwareProfile:
        stray = sorted(set(self.default_on) - set(self.accelerator_families))
        if stray:
            raise ValueError(f"default_on {stray}: not among accelerator_families {list(self.accelerator_families)}")
        if self.moe_recompute_module_sets and self.moe_recompute_sets_source is None:
            raise ValueError("moe_recompute_module_sets: give moe_recompute_sets_source, the recipes that run them")
        if not all(self.moe_recompute_module_sets):
            raise ValueError("moe_recompute_module_sets: each set names one module or more")
        return self

    def on(self, family: str) -> SoftwareProfile:
        """The profile as it runs on accelerators of ``family`` (its family table applied, if any)."""
        override = self.family.get(family)
        if override is None:
            return self
        return self.model_copy(update=override.model_dump(exclude_none=True))

    def keeps_float8_inputs(self, precision: Dtype) -> bool:
        """Whether a job in ``precision`` keeps its GEMM inputs in a byte for the weight gradients."""
        return self.float8_saved_inputs and is_low_precision(precision)

    def check_offload(self, offload_layers: int | None, host_bytes_per_s: float | None, accelerator: str) -> None:
        """Refuse offloaded layers where this framework does not offload or the device's host link is unknown."""
        if not offload_layers:
            return
        if not self.activation_offload:
            raise ClusterSimError(
                f"offload_layers: {self.name or 'this framework'} does not offload activations to host memory "
                f"(Megatron-Core's cpu_offloading_num_layers does: --framework megatron), got {offload_layers}",
                field="offload_layers",
                value=offload_layers,
            )
        if host_bytes_per_s is None:
            raise ClusterSimError(
                f"offload_layers {offload_layers}: the catalog records no link to host memory for {accelerator} "
                "(host_link: PCIe for A100, H100, H200 and B200, NVLink-C2C for GB200 and GB300)",
                field="offload_layers",
                value=offload_layers,
            )

    def check_zero(self, zero: int) -> None:
        """Refuse a ZeRO stage this framework does not implement, naming the stages it does."""
        if self.zero_stages is not None and zero not in self.zero_stages:
            stages = ", ".join(str(z) for z in self.zero_stages)
            raise ClusterSimError(
                f"zero: {self.name or 'this framework'} implements ZeRO stages {stages}, not {zero} (valid: {stages})",
                field="zero",
                value=zero,
            )

    @property
    def layout_defaults(self) -> LayoutDefaults:
        """The layout this framework runs when the job does not say (see :func:`resolve_layout`)."""
        return LayoutDefaults(
            zero=self.default_zero,
            sequence_parallel=self.default_sequence_parallel,
            recompute=self.default_recompute,
            micro_batch=self.default_micro_batch,
            etp=self.default_etp,
            vp=self.default_vp,
            source=self.layout_source,
        )


# The layout fields a framework profile gives a default for, and those whose default is the same in every
# framework (and in the ground-truth format): no context or expert parallelism.
FRAMEWORK_LAYOUT_FIELDS = ("zero", "sequence_parallel", "recompute", "micro_batch", "vp")
COMMON_LAYOUT_DEFAULTS: Mapping[str, int] = {"cp": 1, "ep": 1}


def resolve_layout(
    stated: Mapping[str, Any], software: SoftwareProfile
) -> tuple[dict[str, Any], dict[str, int | bool | str]]:
    """``(fields, assumed)``: the layout fields ``stated`` with each unstated one (None or absent) among
    ``cp``, ``ep`` (1) and ``FRAMEWORK_LAYOUT_FIELDS`` (``software``'s defaults) filled in, and
    the values so filled, by field (plain JSON values). Sequence parallelism needs tp > 1 and interleaving
    pp > 1: without, each is off (vp 1) and nothing is assumed. An unstated ``etp`` is filled only for a
    layout with ``ep`` > 1 and ``tp`` > 1 whose framework names a degree (``default_etp``) dividing ``tp``;
    elsewhere it stays None (derived).
    A stated value is never replaced; a ZeRO stage the framework does not implement (``zero_stages``) is
    refused."""
    fields = dict(stated)
    assumed: dict[str, int | bool | str] = {}
    defaults = software.layout_defaults
    for name in (*COMMON_LAYOUT_DEFAULTS, *FRAMEWORK_LAYOUT_FIELDS):
        if fields.get(name) is not None:
            continue
        if name == "sequence_parallel" and int(fields.get("tp") or 1) <= 1:
            fields[name] = False
            continue
        if name == "vp" and int(fields.get("pp") or 1) <= 1:
            fields[name] = 1
            continue
        value = COMMON_LAYOUT_DEFAULTS[name] if name in COMMON_LAYOUT_DEFAULTS else getattr(defaults, name)
        fields[name] = value
        assumed[name] = value.value if isinstance(value, Recompute) else value
    etp, tp = defaults.etp, int(fields.get("tp") or 1)
    if fields.get("etp") is None and int(fields["ep"]) > 1 and tp > 1 and etp != DERIVED and tp % int(etp) == 0:
        fields["etp"] = assumed["etp"] = int(etp)
    software.check_zero(int(fields["zero"]))
    return fields, assumed


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
SOFTWARE_FILE = RecordFile(
    SoftwareProfile, PACKAGE, FILE_NAME, ENV_VAR, what="software profile file", entry="profile", named=True
)


def software_profiles(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, SoftwareProfile]:
    """The packaged profiles with the user's files (``CLUSTERSIM_SOFTWARE``, then ``extra``) over them."""
    return SOFTWARE_FILE.records(extra, use_env=use_env)


def frameworks_on(family: str, profiles: Mapping[str, SoftwareProfile] | None = None) -> list[str]:
    """The names of the profiles whose ``accelerator_families`` hold ``family``, sorted."""
    table = software_profiles() if profiles is None else profiles
    return sorted(name for name, profile in table.items() if family in profile.accelerator_families)


def default_framework(family: str, profiles: Mapping[str, SoftwareProfile] | None = None) -> str:
    """The framework a job on ``family`` runs when it names none: the profile whose ``default_on`` holds the
    family (megatron on GPUs, neuronx on Trainium); an error naming the family where no profile says."""
    table = software_profiles() if profiles is None else profiles
    defaults = sorted(name for name, profile in table.items() if family in profile.default_on)
    if len(defaults) > 1:
        raise ClusterSimError(
            f"framework: {', '.join(defaults)} each name {family!r} in default_on; a family has one default framework",
            field="framework",
        )
    if not defaults:
        fits = ", ".join(frameworks_on(family, table)) or "none profiled"
        raise ClusterSimError(
            f"framework: no default framework for {family!r} accelerators (frameworks that run there: {fits}); "
            f"give --framework, or a profile with {family!r} in accelerator_families and default_on",
            field="framework",
        )
    return defaults[0]


def software_for(
    framework: str | None,
    family: str,
    profiles: Mapping[str, SoftwareProfile] | None = None,
    *,
    accelerator: str | None = None,
) -> SoftwareProfile:
    """The profile of ``framework`` (default: the family's, :func:`default_framework`) on accelerators of
    ``family``; a framework that does not run on the family (its ``accelerator_families``) is refused,
    naming both (``accelerator``, the chip's id, where given) and the frameworks that do run there."""
    table = software_profiles() if profiles is None else profiles
    name = (framework or default_framework(family, table)).strip().lower()
    if name not in table:
        raise UnknownNameError("framework", name, table)
    profile = table[name]
    if family not in profile.accelerator_families:
        chip = f"{accelerator} ({family})" if accelerator else family
        fits = ", ".join(frameworks_on(family, table)) or "none profiled"
        raise ClusterSimError(
            f"framework {name!r} does not run on {chip} accelerators (it runs on "
            f"{', '.join(profile.accelerator_families)}); frameworks for {family}: {fits}",
            field="framework",
            value=name,
        )
    return profile.on(family)
