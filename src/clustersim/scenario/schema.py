"""What a scenario file holds: every input of one training or serving run, as typed frozen records.

A training scenario names the workload (``model``), the system (``[system]``), the layout
(``[layout]``; ``layout = "choose"`` for the fastest that fits, or ``[layout]`` with ``choose = true``
and the degrees or settings to hold fixed while the rest is searched) and the job (``[job]``), plus the
user's files (``[options]``). A serving scenario names the model, the system and its tensor/pipeline
degrees, the requests (their lengths, or the request set they come from: ``dataset``) and the load.
Defaults are the command line's; a file saved by
``--save-scenario`` writes every field, with a chosen layout (or tensor-parallel degree) filled in
(the lengths a dataset gives stay its name, not copies of its means).

Paths (a model file, ``options`` files and directories) are absolute once loaded: a relative path in
a file is relative to the file's directory.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from clustersim.catalog.kinds import Dtype
from clustersim.choices import (
    EP_DISPATCHER_HELP,
    RECOMPUTE_MODULES_HELP,
    Batching,
    CudaGraphs,
    EpDispatcher,
    Recompute,
    RecomputeModule,
)
from clustersim.errors import ClusterSimError
from clustersim.serving.datasets import RequestLengths, resolve_lengths
from clustersim.serving.serving_system import MoeExchange
from clustersim.units import (
    MAX_DEGREE,
    MAX_LATENCY_S,
    MAX_NODES,
    MAX_RATE_PER_S,
    MAX_SEQUENCE_TOKENS,
    MAX_SEQUENCES,
    MAX_TOKENS,
    parse_count,
    parse_seconds,
)

TRAINING_PRECISIONS = (Dtype.BF16, Dtype.FP16, Dtype.FP8, Dtype.FP4)  # fp4: NVFP4 / MXFP4 GEMMs
ServingPrecision = Literal["bf16", "fp16", "fp8", "nvfp4", "mxfp4"]  # clustersim.serving.formats
DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS = 2048, 128  # the command line's lengths without a dataset
PriceOffer = Literal["on_demand", "capacity_block"]


def _count(value: object) -> object:
    """A count given as text with a suffix (``"15T"``) is read as a number; anything else is left to pydantic."""
    return parse_count(value) if isinstance(value, str) else value


def _training_precision(value: Dtype) -> Dtype:
    if value not in TRAINING_PRECISIONS:
        valid = ", ".join(p.value for p in TRAINING_PRECISIONS)
        raise ValueError(f"{value.value!r} is not a training precision (valid: {valid})")
    return value


Tokens = Annotated[float, BeforeValidator(_count)]
TrainingPrecision = Annotated[Dtype, AfterValidator(_training_precision)]


def looks_like_path(spec: str) -> bool:
    """Whether a model spec names a file (as the zoo reads it) rather than a zoo id."""
    return spec.endswith((".toml", ".json")) or "/" in spec or os.sep in spec


def _absolute(path: Path, base: Path) -> Path:
    path = path.expanduser()
    return path if path.is_absolute() else (base / path).resolve()


class _Record(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


# ---- training -------------------------------------------------------------------------------------


class SystemSpec(_Record):
    """The instances a job runs on."""

    instance: str = Field(description="Instance id or alias, e.g. p5en.48xlarge.")
    nodes: int = Field(ge=1, le=MAX_NODES, description="Number of instances.")
    devices_per_node: int | None = Field(
        default=None,
        ge=1,
        le=MAX_DEGREE,
        description="Ranks per instance (default: one per chip; 32 on trn1 = NeuronCores).",
    )


class LayoutSpec(_Record):
    """A parallel layout, as ``clustersim.execution.Layout`` with the command line's defaults; ``dp``
    fills the devices and ``sequence_parallel`` follows ``tp > 1`` when omitted."""

    tp: int = Field(default=1, ge=1, le=MAX_DEGREE, description="Tensor parallel degree.")
    pp: int = Field(default=1, ge=1, le=MAX_DEGREE, description="Pipeline parallel degree.")
    dp: int | None = Field(
        default=None, ge=1, le=MAX_NODES * MAX_DEGREE, description="Data parallel degree (default: the devices left)."
    )
    cp: int = Field(default=1, ge=1, le=MAX_DEGREE, description="Context parallel degree.")
    ep: int = Field(
        default=1, ge=1, le=MAX_DEGREE, description="Expert parallel degree (within the data-parallel ranks)."
    )
    etp: int | None = Field(
        default=None, ge=1, le=MAX_DEGREE, description="Expert tensor-parallel degree (default: derived from tp)."
    )
    vp: int = Field(default=1, ge=1, le=MAX_DEGREE, description="Model chunks per pipeline rank (interleaved 1F1B).")
    micro_batch: int = Field(default=1, ge=1, le=MAX_SEQUENCES, description="Sequences per micro-batch.")
    zero: int = Field(default=1, ge=0, le=3, description="ZeRO stage 0-3 (3 = FSDP).")
    sequence_parallel: bool | None = Field(default=None, description="Sequence parallelism (default: tp > 1).")
    recompute: Recompute = Field(default=Recompute.SELECTIVE, description="Activation recompute.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(default=None, description=RECOMPUTE_MODULES_HELP)
    tp_overlap: bool | None = Field(
        default=None, description="Overlap tensor-parallel communication with GEMMs (default: the family's)."
    )
    ep_overlap: bool | None = Field(
        default=None, description="Overlap the MoE all-to-alls with compute (default: the framework's)."
    )
    ep_dispatcher: EpDispatcher | None = Field(default=None, description=EP_DISPATCHER_HELP)
    dp_overlap: bool = Field(default=True, description="Overlap data-parallel communication with compute.")
    uneven_stages: bool = Field(
        default=False, description="Allow layers that do not divide by pp*vp (the fullest stage sets the pace)."
    )
    last_stage_layers: int | None = Field(
        default=None,
        ge=1,
        description="Decoder layers on the last pipeline rank, beside the output head (default: an even split).",
    )
    offload_layers: int | None = Field(
        default=None,
        ge=1,
        description="Layers whose activations go to host memory and back (pp 1, no recompute; default: none).",
    )


class LayoutSearchSpec(_Record):
    """A layout to choose (the fastest that fits) with some of its degrees or settings held fixed: each
    field given is the only value searched, the others take every value the planner tries."""

    choose: Literal[True] = Field(description="The layout is chosen within the fixed values (always true).")
    tp: int | None = Field(default=None, ge=1, le=MAX_DEGREE, description="Tensor parallel degree.")
    pp: int | None = Field(default=None, ge=1, le=MAX_DEGREE, description="Pipeline parallel degree.")
    cp: int | None = Field(default=None, ge=1, le=MAX_DEGREE, description="Context parallel degree.")
    ep: int | None = Field(default=None, ge=1, le=MAX_DEGREE, description="Expert parallel degree.")
    vp: int | None = Field(default=None, ge=1, le=MAX_DEGREE, description="Model chunks per pipeline rank.")
    micro_batch: int | None = Field(default=None, ge=1, le=MAX_SEQUENCES, description="Sequences per micro-batch.")
    zero: int | None = Field(default=None, ge=0, le=3, description="ZeRO stage 0-3 (3 = FSDP).")
    sequence_parallel: bool | None = Field(default=None, description="Sequence parallelism (default: tp > 1).")
    recompute: Recompute | None = Field(default=None, description="Activation recompute.")
    recompute_modules: tuple[RecomputeModule, ...] | None = Field(
        default=None, description=RECOMPUTE_MODULES_HELP + " Every selective layout searched states them."
    )
    uneven_stages: bool | None = Field(
        default=None,
        description="Allow layers that do not divide by pp*vp (the fullest stage sets the pace); default: where "
        "the framework supports them.",
    )
    headroom: float | None = Field(
        default=None, ge=0, le=0.9, description="Share of device memory the chosen layout leaves free (default 0.1)."
    )
    safe: bool | None = Field(
        default=None,
        description="Choose, of the fastest layouts that fit, the one whose step is lowest at the upper end of its "
        "80% interval (default: the fastest).",
    )
    ep_overlap: bool | None = Field(
        default=None, description="Overlap the MoE all-to-alls with compute (default: the framework's)."
    )
    ep_dispatcher: EpDispatcher | None = Field(default=None, description=EP_DISPATCHER_HELP)
    etp: int | None = Field(
        default=None,
        ge=1,
        le=MAX_DEGREE,
        description="Expert tensor-parallel degree (default: the derived one and, for a MoE model, 1 are searched).",
    )


class TrainingJobSpec(_Record):
    """What to train and at which price."""

    global_batch: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQUENCES,
        description="Sequences per optimizer step (default: about 4M tokens, or 1,024 per device on more than 4,096; "
        "training.job.default_global_batch).",
    )
    seq_len: int | None = Field(
        default=None, ge=1, le=MAX_SEQUENCE_TOKENS, description="Sequence length (default: the model's)."
    )
    precision: TrainingPrecision = Field(default=Dtype.BF16, description="Training precision: bf16, fp16, fp8 or fp4.")
    bf16_layers: int = Field(
        default=0,
        ge=0,
        description="An fp8 or fp4 job's layers at the ends of the stack that keep their GEMMs in BF16, as the "
        "framework counts layers (Megatron's first_last_layers_bf16; clustersim.compute.bf16_layers); 0: none.",
    )
    operation_formats: dict[str, str] = Field(
        default_factory=dict,
        description="An fp8 or fp4 job's groups of operations run in a wider format, group -> training format (e.g. "
        "attention_projections: bf16; clustersim.compute.operation_formats); empty: none.",
    )
    tokens: Tokens | None = Field(
        default=None,
        ge=1,
        le=MAX_TOKENS,
        description="Training budget in tokens, a number or e.g. '15T', at least one step (default: one step).",
    )
    price: PriceOffer = Field(default="on_demand", description="The price offer the cost is computed at.")
    beyond_context: bool = Field(
        default=False, description="Price a sequence beyond the model's context anyway (the estimate says so)."
    )


def _interval(value: str) -> str:
    """'auto' or a duration such as '2h' (checked here so that a file with a typo is refused on load)."""
    text = value.strip().lower()
    if text == "auto":
        return text
    seconds = parse_seconds(value)
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"must be 'auto' or a positive duration such as '2h', got {value!r}")
    return value.strip()


class CheckpointSpec(_Record):
    """Checkpoints and failures: where checkpoints go, how often, and how often the job fails."""

    storage: str = Field(
        min_length=1,
        description="The file system, fsx:TIER:CAPACITY[:efa][:mdiops=N] (e.g. fsx:PERSISTENT_2-1000:100800GiB:efa).",
    )
    every: Annotated[str, AfterValidator(_interval)] = Field(
        default="auto", description="Work between checkpoints: 'auto' (Young/Daly) or a duration, e.g. '2h'."
    )
    async_save: bool = Field(
        default=False, description="Copy to host memory and drain to the file system in the background."
    )
    nvme: bool = Field(
        default=False, description="Write to the instances' local NVMe and drain to the file system in the background."
    )
    failure_rate: str = Field(
        default="llama3", min_length=1, description="llama3, rsc1, rsc2, or failures per device-hour."
    )


class TrainingOptions(_Record):
    """The user's files the run reads (environment variables are not read when a scenario runs)."""

    efficiency: tuple[Path, ...] = Field(default=(), description="TOML files of achieved fractions per family.")
    software: tuple[Path, ...] = Field(default=(), description="TOML files of training-framework profiles.")
    catalog: tuple[Path, ...] = Field(default=(), description="Catalog directories or files that extend or override.")
    models: tuple[Path, ...] = Field(default=(), description="Extra model zoo directories or files.")


class TrainingScenario(_Record):
    """Every input of one training estimate: workload, system, layout and job."""

    kind: Literal["training"] = Field(default="training", description="What the file describes.")
    model: str = Field(description="Zoo id (e.g. llama3-70b), or the path of a model TOML or a HF config.json.")
    system: SystemSpec = Field(description="The instances.")
    layout: LayoutSpec | LayoutSearchSpec | Literal["choose"] = Field(
        default="choose",
        description="The layout; 'choose' for the fastest that fits; or a table with choose = true and the values "
        "to hold fixed while the rest is searched.",
    )
    job: TrainingJobSpec = Field(default_factory=TrainingJobSpec, description="The job.")
    framework: str | None = Field(
        default=None,
        min_length=1,
        description="The training framework's profile (compute/software.toml); none: the accelerator family's "
        "default (megatron on GPUs, neuronx on Trainium).",
    )
    torch_compile: bool | None = Field(
        default=None,
        description="A PyTorch eager stack (torchtitan) run under torch.compile: true prices its element-wise ops "
        "fused, false one eager kernel per op; none: the framework's default (torchtitan: eager). Refused for a "
        "framework whose profile prices its own fused kernels (megatron, deepspeed, fsdp, neuronx...).",
    )
    cuda_graphs: CudaGraphs | None = Field(
        default=None,
        description="The run's CUDA graph capture: none prices a MoE step's wait for its host's kernel launches where "
        "the software profile has a host time for the accelerator (clustersim.training.host_launches); partial, "
        "full or none given: no such wait.",
    )
    checkpoint: CheckpointSpec | None = Field(
        default=None, description="Checkpoints and failures (none: the failure-free time and cost)."
    )
    options: TrainingOptions = Field(default_factory=TrainingOptions, description="The user's files.")

    def relative_to(self, base: Path) -> TrainingScenario:
        """The scenario with relative paths taken from ``base`` (a file's directory)."""
        options = self.options.model_copy(
            update={
                name: tuple(_absolute(p, base) for p in getattr(self.options, name))
                for name in ("efficiency", "software", "catalog", "models")
            }
        )
        model = str(_absolute(Path(self.model), base)) if looks_like_path(self.model) else self.model
        return self.model_copy(update={"model": model, "options": options})


# ---- serving --------------------------------------------------------------------------------------


class ServingSystemSpec(_Record):
    """The instances and how a model replica spans them (replicas fill them)."""

    instance: str = Field(description="Instance id or alias, e.g. p5.48xlarge.")
    nodes: int = Field(
        default=1,
        ge=1,
        le=MAX_NODES,
        description="Instances the replicas fill; a replica of more devices than one holds spans several, its TP or "
        "PP traffic between them on the network (needs tp).",
    )
    tp: Annotated[int, Field(ge=1, le=MAX_DEGREE)] | Literal["choose"] = Field(
        default="choose", description="Tensor parallel degree, or 'choose' for the best that fits."
    )
    pp: int = Field(default=1, ge=1, le=MAX_DEGREE, description="Pipeline parallel degree.")
    attention_dp: int = Field(
        default=1,
        ge=1,
        le=MAX_DEGREE,
        description="Attention data-parallel groups of tp x pp devices sharing a MoE model's experts (1: none).",
    )
    moe_exchange: MoeExchange = Field(
        default="gather",
        description="How attention-DP groups bring tokens to the experts: gather (all-gather and reduce-scatter) or "
        "alltoall (each token to the ranks holding its experts); clustersim.serving.moe_exchange.",
    )


class RequestSpec(_Record):
    """What is served: mean prompt and output lengths (or the request set they come from), precisions and
    batching. With a ``dataset``, a length it gives is taken from it and may not be given here too."""

    input_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQUENCE_TOKENS,
        description=f"Prompt tokens per request (default: the dataset's mean, else {DEFAULT_INPUT_TOKENS}).",
    )
    output_tokens: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SEQUENCE_TOKENS,
        description=f"Output tokens per request (default: the dataset's mean, else {DEFAULT_OUTPUT_TOKENS}).",
    )
    dataset: str | None = Field(
        default=None,
        min_length=1,
        description="A request set of serving/datasets.toml (e.g. openorca, sharegpt, random) the lengths come from.",
    )
    precision: ServingPrecision = Field(default="bf16", description="Weights and GEMMs.")
    kv_cache: ServingPrecision | None = Field(default=None, description="KV cache precision (default: as precision).")
    batching: Batching = Field(default=Batching.CONTINUOUS, description="continuous (in-flight) or static.")
    beyond_context: bool = Field(
        default=False, description="Price prompts + outputs beyond the model's context anyway (the estimate says so)."
    )

    @model_validator(mode="after")
    def _lengths_of_the_dataset(self) -> RequestSpec:
        self.lengths()  # an unknown dataset, or a length given beside the dataset's own, is refused on load
        return self

    def lengths(self) -> RequestLengths:
        """The mean prompt and output lengths this request set means (``clustersim.serving.datasets``)."""
        try:
            return resolve_lengths(
                self.dataset,
                self.input_tokens,
                self.output_tokens,
                defaults=(DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS),
                fields=("input_tokens", "output_tokens"),
                dataset_field="dataset",
            )
        except ClusterSimError as exc:
            raise ValueError(str(exc)) from None


class LoadSpec(_Record):
    """Offline (the best batch, or a given one) or server mode (a rate, or latency targets)."""

    batch: int | None = Field(
        default=None, ge=1, le=MAX_SEQUENCES, description="Sequences in flight per replica (default: the best)."
    )
    rate_per_s: float | None = Field(
        default=None, gt=0, le=MAX_RATE_PER_S, description="Server mode: requests/s for the instance."
    )
    ttft_target_s: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_S, description="Server mode: highest rate with TTFT <= this."
    )
    tpot_target_s: float | None = Field(
        default=None, gt=0, le=MAX_LATENCY_S, description="Server mode: highest rate with TPOT <= this."
    )

    @model_validator(mode="after")
    def _rate_or_targets(self) -> LoadSpec:
        if self.rate_per_s is not None and (self.ttft_target_s is not None or self.tpot_target_s is not None):
            raise ValueError("give either a rate or latency targets (ttft_target_s/tpot_target_s)")
        server = [name for name in ("rate_per_s", "ttft_target_s", "tpot_target_s") if getattr(self, name) is not None]
        if self.batch is not None and server:
            raise ValueError(
                f"batch is offline mode's, not used with {', '.join(server)} (server mode: the rate sets the batch); "
                "give one or the other"
            )
        return self


class ServingOptions(_Record):
    """The user's files the run reads (environment variables are not read when a scenario runs)."""

    catalog: tuple[Path, ...] = Field(default=(), description="Catalog directories or files that extend or override.")
    models: tuple[Path, ...] = Field(default=(), description="Extra model zoo directories or files.")


class ServingScenario(_Record):
    """Every input of one serving estimate: model, system, requests and load."""

    kind: Literal["serving"] = Field(default="serving", description="What the file describes.")
    model: str = Field(description="Zoo id (e.g. llama2-70b), or the path of a model TOML or a HF config.json.")
    system: ServingSystemSpec = Field(description="The instance and the model's degrees on it.")
    request: RequestSpec = Field(default_factory=RequestSpec, description="The requests.")
    load: LoadSpec = Field(default_factory=LoadSpec, description="Offline or server mode.")
    engine: str | None = Field(
        default=None,
        min_length=1,
        description="The serving engine's profile (serving/engines.toml); none: the accelerator family's default "
        "(tensorrt-llm on GPUs).",
    )
    options: ServingOptions = Field(default_factory=ServingOptions, description="The user's files.")

    def relative_to(self, base: Path) -> ServingScenario:
        """The scenario with relative paths taken from ``base`` (a file's directory)."""
        options = self.options.model_copy(
            update={
                name: tuple(_absolute(p, base) for p in getattr(self.options, name)) for name in ("catalog", "models")
            }
        )
        model = str(_absolute(Path(self.model), base)) if looks_like_path(self.model) else self.model
        return self.model_copy(update={"model": model, "options": options})


Scenario = Annotated[TrainingScenario | ServingScenario, Field(discriminator="kind")]
