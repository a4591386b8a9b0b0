"""The job and layout options ``train``, ``explain`` and ``fabric step`` share (typer aliases; light to import)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clustersim.catalog.kinds import Dtype
from clustersim.choices import (
    EP_DISPATCHER_HELP,
    RECOMPUTE_MODULES_HELP,
    CudaGraphs,
    EpDispatcher,
    Recompute,
    RecomputeModule,
    recompute_modules_named,
)
from clustersim.errors import ClusterSimError
from clustersim.units import MAX_DEGREE, MAX_SEQUENCE_TOKENS, MAX_SEQUENCES

if TYPE_CHECKING:
    from clustersim.compute.software import SoftwareProfile

DevicesPerNodeOpt = Annotated[
    int | None,
    typer.Option(
        "--devices-per-node",
        min=1,
        max=MAX_DEGREE,
        help="Ranks per instance (default: one per chip; 32 on trn1 = NeuronCores).",
    ),
]
TpOpt = Annotated[int | None, typer.Option("--tp", min=1, max=MAX_DEGREE, help="Tensor parallel degree.")]
PpOpt = Annotated[int | None, typer.Option("--pp", min=1, max=MAX_DEGREE, help="Pipeline parallel degree.")]
VpOpt = Annotated[
    int | None,
    typer.Option(
        "--vp",
        min=1,
        max=MAX_DEGREE,
        help="Model chunks per pipeline rank (interleaved 1F1B); default: the framework's where pp > 1 (1; meta 2), "
        "searched where the layout is chosen.",
    ),
]
CpOpt = Annotated[int, typer.Option("--cp", min=1, max=MAX_DEGREE, help="Context parallel degree.")]
EpOpt = Annotated[int, typer.Option("--ep", min=1, max=MAX_DEGREE, help="Expert parallel degree.")]
EtpOpt = Annotated[
    int | None,
    typer.Option(
        "--etp",
        min=1,
        max=MAX_DEGREE,
        help="Expert tensor-parallel degree, held in a search too (default with --tp and --pp: the framework's, "
        "megatron 1 as its recipes, others tp (or tp*cp*dp/ep where ep is wider than dp*cp); a search of a MoE model "
        "tries both); the experts fold over the stage's ranks (ep*etp must divide tp*cp*dp).",
    ),
]
# Layout options not given take the framework's documented defaults (compute/software.toml: default_*) where the
# layout is given (--tp and --pp); where it is searched, each one not given is a dimension of the search.
LAYOUT_DEFAULT = "(default: the framework's with --tp and --pp both given, else searched)"
MicroBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--micro-batch",
        min=1,
        max=MAX_SEQUENCES,
        help=f"Sequences per micro-batch {LAYOUT_DEFAULT}.",
    ),
]
ZeroOpt = Annotated[
    int | None,
    typer.Option(
        "--zero",
        min=0,
        max=3,
        help=f"ZeRO stage 0-3, 3 = FSDP {LAYOUT_DEFAULT}.",
    ),
]
SpOpt = Annotated[
    bool | None,
    typer.Option(
        "--sp/--no-sp",
        help=f"Sequence parallelism where tp > 1 {LAYOUT_DEFAULT}.",
    ),
]
RecomputeOpt = Annotated[
    Recompute | None,
    typer.Option(
        "--recompute",
        case_sensitive=False,
        help="Activation recompute: full (whole layers) or selective, what the framework's own policy runs again "
        f"(Megatron: the attention core; torchtitan: every other matmul and the element-wise ops) {LAYOUT_DEFAULT}.",
    ),
]
RecomputeModulesOpt = Annotated[
    str | None,
    typer.Option(
        "--recompute-modules",
        help=RECOMPUTE_MODULES_HELP.replace("; default", ", comma-separated; default")
        + " Implies --recompute selective; a search prices every selective layout with them (not given, a search of"
        " a MoE model also tries its framework's recipe sets, e.g. Megatron's layernorm,moe_act).",
    ),
]


def recompute_modules(text: str | None) -> tuple[RecomputeModule, ...] | None:
    """``--recompute-modules``' comma-separated names as modules (None where not given)."""
    if text is None:
        return None
    names = [name.strip().lower() for name in text.split(",") if name.strip()]
    said = f"--recompute-modules {text!r} (comma-separated)"
    return recompute_modules_named(names, said, "--recompute-modules", text)


TrainGlobalBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--global-batch",
        min=1,
        max=MAX_SEQUENCES,
        help="Sequences per optimizer step (default: about 4M tokens, 2^22 / --seq rounded to a power of two: "
        "1024 at 4k, 128 at 32k).",
    ),
]
SeqOpt = Annotated[
    int | None,
    typer.Option("--seq", min=1, max=MAX_SEQUENCE_TOKENS, help="Sequence length (default: the model's)."),
]
PrecisionOpt = Annotated[
    str,
    typer.Option(
        "--precision",
        help="The GEMMs' format: bf16, fp16, fp8, mxfp8 (Blackwell, Trainium3), nvfp4 (Blackwell) or mxfp4 "
        "(Blackwell, Trainium3).",
    ),
]
Bf16LayersOpt = Annotated[
    int,
    typer.Option(
        "--bf16-layers",
        min=0,
        help="An fp8 or fp4 job's layers at the ends of the stack kept in BF16, as the framework counts them "
        "(Megatron's first_last_layers_bf16, e.g. 14 for Nemotron 3 Super's NVFP4 recipe).",
    ),
]
OperationFormatOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--operation-format",
        metavar="GROUP=FORMAT",
        help="An fp8 or fp4 job's group of operations in a wider format, repeatable, e.g. attention_projections=bf16 "
        "(groups: attention_projections, mixer_output_projection, latent_projections, mtp).",
    ),
]
BeyondContextOpt = Annotated[
    bool,
    typer.Option(
        "--beyond-context",
        help="Price a sequence longer than the model's context anyway (refused otherwise; the output says so).",
    ),
]
EfficiencyOpt = Annotated[
    list[Path] | None,
    typer.Option("--efficiency", help="A TOML of achieved fractions per accelerator family (overrides fields)."),
]
SoftwareOpt = Annotated[
    list[Path] | None,
    typer.Option("--software", help="A TOML of framework profiles (overrides fields; also $CLUSTERSIM_SOFTWARE)."),
]
FrameworkOpt = Annotated[
    str | None,
    typer.Option(
        "--framework",
        help="The training framework's profile: megatron, megatron-deepspeed, deepspeed, fsdp, torchtitan, "
        "automodel (GPUs), neuronx (Trainium), or one of --software; default: the accelerator's (megatron on "
        "GPUs, neuronx on Trainium).",
    ),
]
UnevenStagesOpt = Annotated[
    bool | None,
    typer.Option(
        "--uneven-stages/--even-stages",
        help="Allow layers that do not divide by pp*vp (fullest stage sets pace); default: off for a given "
        "layout, and in a search on where the framework supports them (megatron).",
    ),
]
LastStageLayersOpt = Annotated[
    int | None,
    typer.Option(
        "--last-stage-layers",
        min=1,
        help="Decoder layers on the last pipeline rank, beside the output head and any MTP block (Megatron-Core's "
        "--decoder-last-pipeline-num-layers, or that rank's share of a pipeline layout); the other ranks share the "
        "rest. Needs --tp and --pp (a given layout; default: an even split); a search balances its own.",
    ),
]
OffloadLayersOpt = Annotated[
    int | None,
    typer.Option(
        "--offload-layers",
        min=1,
        help="Layers whose activations go to host memory in the forward pass and come back for the backward "
        "(Megatron-Core's cpu_offloading_num_layers), over the device's host link (PCIe, NVLink-C2C). Needs --tp "
        "and --pp with pp 1 and --recompute none; a search offloads the fewest layers a layout needs to fit.",
    ),
]
EpOverlapOpt = Annotated[
    bool | None,
    typer.Option(
        "--ep-overlap/--no-ep-overlap",
        help="Overlap the MoE expert all-to-alls with another micro-batch's compute (Megatron-Core's "
        "--overlap-moe-expert-parallel-comm); default: the framework's (off).",
    ),
]
EpDispatcherOpt = Annotated[
    EpDispatcher | None,
    typer.Option("--ep-dispatcher", case_sensitive=False, help=EP_DISPATCHER_HELP + " Held in a search too."),
]
HeadroomOpt = Annotated[
    float | None,
    typer.Option(
        "--headroom",
        min=0,
        max=0.9,
        help="Share of device memory a chosen layout leaves free (default 0.1; not with --tp and --pp).",
    ),
]
TorchCompileOpt = Annotated[
    bool | None,
    typer.Option(
        "--torch-compile/--no-torch-compile",
        help="A PyTorch eager stack (torchtitan) run under torch.compile: its element-wise ops priced fused, or "
        "one eager kernel per op; default: the framework's (torchtitan: eager). Refused for a framework with its "
        "own fused kernels (megatron, deepspeed, fsdp, neuronx...).",
    ),
]
CudaGraphsOpt = Annotated[
    CudaGraphs | None,
    typer.Option(
        "--cuda-graphs",
        help="The run's CUDA graph capture (none, partial, full): none prices a MoE step's wait for its host's "
        "kernel launches where the framework's profile has a host time for the accelerator (GB200, GB300); "
        "default: not stated, no such wait.",
    ),
]
SafeOpt = Annotated[
    bool,
    typer.Option(
        "--safe",
        help="Choose, of the fastest layouts that fit at the upper end of their memory's 80% interval, the one whose "
        "step is lowest at the upper end of its 80% interval (as plan --safe ranks; not with --tp and --pp).",
    ),
]


# The options only a given layout takes: (what the value states, what a search does instead).
_GIVEN_ONLY = {
    "last_stage_layers": ("splits a given pipeline", "chooses its own split"),
    "offload_layers": ("offloads a given layout's activations", "offloads the fewest layers each layout needs to fit"),
}


def refuse_given_only(**values: object) -> None:
    """Refuse the first of ``values`` (an option of ``_GIVEN_ONLY``) that is set while the layout is searched."""
    for name, value in values.items():
        if value is not None:
            flag, (what, search) = f"--{name.replace('_', '-')}", _GIVEN_ONLY[name]
            raise ClusterSimError(
                f"{flag} {value} {what}; a search {search} (give --tp and --pp with it, or drop it)",
                field=flag,
                value=value,
            )


def operation_formats(values: list[str] | None) -> dict[str, str]:
    """``--operation-format GROUP=FORMAT`` values as a mapping (each group once); a malformed or repeated one is
    refused naming the flag."""
    out: dict[str, str] = {}
    for text in values or []:
        group, sep, fmt = text.partition("=")
        group, fmt = group.strip(), fmt.strip()
        if not sep or not group or not fmt:
            raise ClusterSimError(
                f"--operation-format {text!r}: give GROUP=FORMAT, e.g. attention_projections=bf16",
                field="--operation-format",
                value=text,
            )
        if group in out:
            raise ClusterSimError(
                f"--operation-format: group {group!r} given twice ({out[group]}, {fmt})",
                field="--operation-format",
                value=text,
            )
        out[group] = fmt
    return out


def framework_profile(
    framework: str | None, instance: str, software: list[Path], catalog: list[Path]
) -> "SoftwareProfile":
    """The profile of ``framework`` on the accelerator family of ``instance`` (for its layout defaults), with
    the user's software and catalog files read as the run reads them."""
    from clustersim.catalog import registry
    from clustersim.compute import software as profiles
    from clustersim.scenario.training import user_files

    cat = registry.load_catalog(user_files(registry.ENV_VAR, catalog), use_env=False)
    chip = cat.instance(instance).accelerator
    table = profiles.software_profiles(user_files(profiles.ENV_VAR, software), use_env=False)
    return profiles.software_for(framework, cat.accelerator(chip).family, table, accelerator=chip)


def job_precision(text: str, instance: str, catalog: list[Path], field: str = "--precision") -> Dtype:
    """The job's GEMM format for ``--precision`` (bf16, fp16, fp8, mxfp8, nvfp4, mxfp4), refused where the
    instance's accelerator has no tensor cores for it (clustersim.compute.precision), naming ``field``."""
    from clustersim.catalog import registry
    from clustersim.compute.precision import check_training_format, job_dtype, parse_training_format
    from clustersim.scenario.training import user_files

    fmt = parse_training_format(text, "--precision")
    cat = registry.load_catalog(user_files(registry.ENV_VAR, catalog), use_env=False)
    try:
        chip = cat.accelerator(cat.instance(instance).accelerator)
    except ClusterSimError:  # an unknown instance is named where the system is built
        return job_dtype(fmt)
    check_training_format(fmt, chip, field)
    return job_dtype(fmt)
