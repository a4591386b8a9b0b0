"""Ground-truth cases as typed records (the JSON Lines format of ``data/README.md``), and the bundled files.

Every part of a case is a frozen pydantic model that ignores unknown fields, as the format asks; a
field of the wrong type is an error that names the file, the line and the field. Fields the format
marks optional, and fields a reader can default (``devices_per_node``, ``ffn_type``), are ``None``
when absent: an adapter decides what a missing value means and says so in its error.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping, Sequence
from importlib.resources import files
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from clustersim.choices import CudaGraphs, RecomputeModule
from clustersim.errors import ClusterSimError, shown, validation_problems
from clustersim.workload.block_parts import Norm, Position
from clustersim.workload.float8 import Float8Recipe
from clustersim.workload.linear_attention import LinearAttention
from clustersim.workload.quantization import Quantization

KINDS = ("training", "inference", "collective", "memory")
PRIMARY_FIELDS: dict[str, tuple[str, ...]] = {
    "training": ("step_time_s", "tokens_per_s_per_device", "model_tflops_per_device", "hw_tflops_per_device", "mfu"),
    "inference": ("output_tokens_per_s",),
    "collective": ("busbw_GBps", "algbw_GBps", "time_us"),
    "memory": (
        "total_GiB_per_device",
        "weights_and_optimizer_GiB_per_device",
        "activations_GiB_per_device",
        "reserved_GiB_per_device",
    ),
}
MAX_ID_CHARS = 256
PRECISIONS = ("bf16", "fp16", "fp8", "mxfp8", "nvfp4", "mxfp4")
"""The number formats a case's ``precision`` names: ``fp8`` is FP8 with one scale per tensor (delayed or
current scaling, or unstated); ``mxfp8`` OCP microscaling FP8 (an E8M0 scale per 32); ``nvfp4`` NVIDIA's
FP4 (an E4M3 scale per 16 and one per tensor); ``mxfp4`` OCP microscaling FP4 (clustersim.compute.precision)."""
BUNDLED_PACKAGE = "clustersim.validation"
BUNDLED_FOLDER = "data"
PROJECT_FOLDER = "project"


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore", allow_inf_nan=False)


# A number that must be there to mean anything: a count of at least one, a positive quantity.
Count = Annotated[int, Field(ge=1)]
Positive = Annotated[float, Field(gt=0)]


class CaseMoE(_Part):
    """``model.moe``: routed experts, experts per token, shared experts; extra context a case may carry: the
    router's expert ``groups`` and the ``group_top_k`` of them a token's experts keep to (group-limited routing,
    ``MoE.groups``; absent: the zoo entry's where the case is named after one, else plain top-k), and the ``latent``
    width a latent MoE's routed experts work in (``MoE.latent``, Megatron-Core's ``moe_latent_size``)."""

    experts: Count | None = None
    top_k: Count | None = None
    shared_experts: Annotated[int, Field(ge=0)] | None = None
    groups: Count | None = None
    group_top_k: Count | None = None
    latent: Count | None = None


class CaseMLA(_Part):
    """``model.mla`` (extra context the format's cases carry): DeepSeek's latent attention, in
    Megatron-Core's names (query/key head ``qk_head_dim`` plus the rotary ``qk_pos_emb_head_dim``)."""

    q_lora_rank: Annotated[int, Field(ge=0)] | None = None
    kv_lora_rank: Count
    qk_head_dim: Count
    qk_pos_emb_head_dim: Count
    v_head_dim: Count


class CaseModel(_Part):
    """``model``: the transformer's shape (``seq_len`` of training and memory cases). Extra context a
    case may carry and ``shape`` reads: ``mla`` (latent attention), ``dense_layers`` (leading blocks
    with a dense MLP), ``dense_ffn_hidden`` (their width; ``ffn_hidden`` is then an expert's),
    ``mtp_layers`` (multi-token-prediction modules the run trained; null: none stated, none priced) and
    ``sliding_window`` with ``window_layers`` (the keys a windowed layer attends to, and how many layers are
    windowed; null: every layer sees the whole sequence); ``quantization`` (how a serving case's checkpoint stores
    its weights, ``clustersim.workload.quantization.Quantization``'s fields; null: 16-bit); ``linear_bias``,
    ``clamped_glu``, ``rope_concentration``, ``linear_attention``, ``attention_gate``, ``mlp_free_layers``, ``norm``,
    ``position`` and ``tied_embeddings`` (``Transformer``'s; null: the zoo entry's the case is named after,
    ``clustersim.validation.case_model``, else the defaults); ``qk_norm`` and ``max_context_tokens``
    (``Transformer``'s; null: its defaults)."""

    name: str | None = None
    layers: Count | None = None
    hidden: Count | None = None
    ffn_hidden: Count | None = None
    heads: Count | None = None
    kv_heads: Count | None = None
    head_dim: Count | None = None
    vocab: Count | None = None
    seq_len: Count | None = None
    ffn_type: str | None = None
    moe: CaseMoE | None = None
    mla: CaseMLA | None = None
    dense_layers: Annotated[int, Field(ge=0)] | None = None
    dense_ffn_hidden: Count | None = None
    mtp_layers: Annotated[int, Field(ge=0, le=8)] | None = None
    sliding_window: Count | None = None
    window_layers: Annotated[int, Field(ge=0)] | None = None
    quantization: Quantization | None = None
    linear_bias: bool | None = None
    clamped_glu: bool | None = None
    rope_concentration: Annotated[float, Field(gt=0, le=10)] | None = None
    linear_attention: LinearAttention | None = None
    attention_gate: bool | None = None
    mlp_free_layers: Annotated[int, Field(ge=0)] | None = None
    norm: Norm | None = None
    position: Position | None = None
    qk_norm: bool | None = None
    tied_embeddings: bool | None = None
    max_context_tokens: Count | None = None

    def shape(self) -> dict[str, Any]:
        """The fields present, as plain data in ``Transformer``'s names (for ``transformer_from_mapping``):
        latent attention's query/key head is ``head_dim`` with its rotary part; with ``dense_ffn_hidden``
        the dense blocks' width is ``ffn_hidden`` and the case's ``ffn_hidden`` the experts'."""
        data = self.model_dump(exclude_none=True, exclude={"mla", "dense_ffn_hidden"})
        if self.mla is not None:
            m = self.mla
            data["head_dim"] = m.qk_head_dim + m.qk_pos_emb_head_dim
            data["mla"] = {
                "q_lora_rank": m.q_lora_rank or 0,
                "kv_lora_rank": m.kv_lora_rank,
                "rope_head_dim": m.qk_pos_emb_head_dim,
                "v_head_dim": m.v_head_dim,
            }
        if self.dense_ffn_hidden is not None and "moe" in data:
            data["moe"]["expert_ffn_hidden"] = data.get("ffn_hidden")
            data["ffn_hidden"] = self.dense_ffn_hidden
        return data


class CaseSystem(_Part):
    """``system``: the accelerator, how many, per server, and the server or its network."""

    accelerator: str | None = None
    devices: Count | None = None
    devices_per_node: Count | None = None
    instance: str | None = None
    nodes: Count | None = None
    inter_node_Gbps_per_node: Positive | None = None
    power_W: Positive | None = None


class CaseEngineSettings(BaseModel):
    """``workload.engine_settings``, the project's extra context: the engine settings a run's harness or launch
    line set, by the engine profile's field names (``clustersim.serving.engines``); an unknown name is refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    max_batch_sequences: Count | None = None  # the scheduler's cap on sequences in flight per replica
    max_tokens_per_step: Count | None = None  # the token budget of one step (prompt chunks and decodes)
    kv_memory_fraction: Annotated[float, Field(gt=0, le=1)] | None = None  # the KV cache's share of free memory
    reserved_memory_fraction: Annotated[float, Field(ge=0, lt=1)] | None = None  # device memory the engine leaves
    scheduler_steps: Annotated[int, Field(ge=1, le=64)] | None = None  # decode steps per scheduling (multi-step)
    receive_steps: Annotated[int, Field(ge=1, le=64)] | None = None  # decode steps between intakes of arrivals
    adp_balance_steps: Annotated[int, Field(ge=0, le=1000)] | None = None  # attention-DP balancing's admission period
    graph_batch_sizes: tuple[Count, ...] | None = None  # the captured CUDA graphs' batch sizes, padding on
    cpp_sampler: bool | None = None  # TensorRT-LLM's sampler_type TRTLLMSampler (C++), not the Python TorchSampler

    @field_validator("graph_batch_sizes")
    @classmethod
    def _ascending(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and (not value or any(b <= a for a, b in itertools.pairwise(value))):
            raise ValueError(f"{list(value)}: give the captured batch sizes in ascending order, e.g. [128, 256, 512]")
        return value


class CasePool(_Part):
    """One pool of a disaggregated deployment (``parallel.disaggregate``): its workers, each one replica of ``tp``
    devices, and the caps its engine set (``engine_settings``, as ``workload.engine_settings``; null: the run's)."""

    workers: Count
    tp: Count = 1
    engine_settings: CaseEngineSettings | None = None


class CaseDisaggregation(_Part):
    """``parallel.disaggregate``, the project's extra context: prefill and decode on pools of their own
    (``clustersim.serving.disaggregation``), the KV cache moved between them."""

    prefill: CasePool
    decode: CasePool


class CaseParallel(_Part):
    """``parallel``: degrees, batches, ZeRO stage, sequence parallelism and recompute; and the extra
    context a case may carry, ``ep_overlap`` (Megatron-Core's ``overlap_moe_expert_parallel_comm``) and
    ``tp_overlap`` (its ``tp_comm_overlap``: Transformer Engine's userbuffers overlap of the TP collectives) and
    ``etp`` (its ``expert_tensor_parallel_size``; null: the framework's default, ``resolve_layout``) and
    ``ep_dispatcher`` (its token dispatcher: ``alltoall``, or ``deepep`` / ``hybridep``, priced alike) and
    ``last_stage_layers`` (the decoder layers a pipeline layout gives the last rank, ``Layout.last_stage_layers``)
    and ``offload_layers`` (the layers whose activations go to host memory, ``Layout.offload_layers``) and
    ``recompute_modules`` (what selective recompute runs again, ``Layout.recompute_modules``)."""

    tp: Count | None = None
    pp: Count | None = None
    dp: Count | None = None
    cp: Count | None = None
    ep: Count | None = None
    vp: Count | None = None
    micro_batch: Count | None = None
    global_batch: Count | None = None
    zero: Annotated[int, Field(ge=0, le=3)] | None = None
    sequence_parallel: bool | None = None
    recompute: str | None = None
    ep_overlap: bool | None = None  # extra context: expert all-to-alls overlapped with compute (null: the framework's)
    tp_overlap: bool | None = None  # extra context: TP collectives overlapped with GEMMs (null: the framework's)
    # extra context, serving: attention data-parallel groups of a MoE replica sharing its experts (null: 1)
    attention_dp: Count | None = None
    etp: Count | None = None  # extra context: expert tensor-parallel degree (null: derived)
    last_stage_layers: Count | None = None  # extra context: decoder layers on the last pipeline rank (null: even)
    offload_layers: Count | None = None  # extra context: layers whose activations go to host memory (null: none)
    # extra context: the MoE token dispatcher (Megatron-Core's alltoall over NCCL, or the flex dispatcher's DeepEP or
    # HybridEP backend, both per node; null: the framework's)
    ep_dispatcher: Literal["alltoall", "deepep", "hybridep"] | None = None
    # extra context: the submodules selective recompute runs again (Megatron-Core's recompute_modules; null: the
    # framework's)
    recompute_modules: list[RecomputeModule] | None = None
    disaggregate: CaseDisaggregation | None = None  # extra context, serving: separate prefill and decode pools


class CaseWorkload(_Part):
    """``workload`` of an inference case; ``ttft_target_s`` / ``tpot_target_s`` are optional extras, ``dataset``
    names the request set (a null length is then the set's mean); ``compiled_batch`` and
    ``compiled_sequence_tokens``, optional extra context, the static shapes a compiling engine (Neuron) was built
    with (null: not stated, the engine profile's), and ``context_buckets`` its own context-encoding buckets where the
    compile lists them (NxD Inference's ``--context-encoding-buckets``); ``requests``, optional extra context, the
    requests of a finite run (offline: all sent at once, as ``--request-rate inf --num-prompts N`` does),
    ``request_rate_per_s`` a server run's stated Poisson rate (null: the highest rate meeting its targets), and
    ``engine_settings`` the engine's caps the run set (``CaseEngineSettings``)."""

    input_tokens: Annotated[float, Field(ge=1)] | None = None
    output_tokens: Annotated[float, Field(ge=1)] | None = None
    scenario: str | None = None
    batch: Count | None = None
    dataset: str | None = None  # the request set the lengths come from (clustersim.serving.datasets)
    ttft_target_s: Positive | None = None
    tpot_target_s: Positive | None = None
    compiled_batch: Count | None = None  # extra context: the batch the token-generation graph was compiled for
    compiled_sequence_tokens: Count | None = None  # extra context: the positions compiled (the last bucket)
    context_buckets: list[Count] | None = None  # extra context: a compile's own context-encoding buckets (ascending)
    requests: Count | None = None  # extra context: the requests of a finite run (offline: sent at once)
    request_rate_per_s: Positive | None = None  # extra context: a server run's stated Poisson rate (whole system)
    engine_settings: CaseEngineSettings | None = None  # extra context: the engine's caps the run set


class CaseSoftware(_Part):
    """``software``: the stack that produced the result (``framework`` from the format's list); ``compiled``
    and ``float8_recipe``, the project's extra context, say whether a PyTorch-native stack ran under
    torch.compile and which float8 scaling recipe an FP8 run used (torchao's names); ``fused_expert_mlp`` is a
    training or a serving run's fused MoE kernels, the others training settings only."""

    framework: str | None = None
    version: str | None = None
    compiled: bool | None = None  # extra context: torch.compile on or off (null: the framework's default)
    compiled_loss: bool | None = None  # extra context: the loss compiled with the model too (null: not)
    float8_recipe: str | None = None  # extra context: an FP8 run's recipe (null: the framework's default)
    fp8_attention: bool | None = None  # extra context: attention in FP8 (null: the framework's default)
    fused_expert_mlp: bool | None = None  # extra context: fused grouped expert MLP kernels (null: the default)
    quantized_head: bool | None = None  # extra context: the output head in the run's 8/4-bit format (null: BF16)
    fp8_param_gather: bool | None = None  # extra context: ZeRO's parameter gathers in FP8 (null: the framework's)
    cuda_graphs: CudaGraphs | None = None  # extra context: a training run's CUDA graph capture (null: not stated)
    # extra context: an 8- or 4-bit training run's layers kept in BF16, as its framework counts them (null: none)
    bf16_layers: Annotated[int, Field(ge=0)] | None = None
    # extra context: an 8- or 4-bit training run's groups of operations in a wider format (group -> training format,
    # clustersim.compute.operation_formats; null: none)
    operation_formats: dict[str, str] | None = None

    @field_validator("float8_recipe")
    @classmethod
    def _known_recipe(cls, value: str | None) -> str | None:
        valid = [recipe.value for recipe in Float8Recipe]
        if value is not None and value not in valid:
            raise ValueError(f"unknown float8 recipe {value!r} (valid: {', '.join(valid)})")
        return value


class Case(_Part):
    """One ground-truth case; unknown fields are ignored, null measured values dropped."""

    id: Annotated[str, Field(min_length=1, max_length=MAX_ID_CHARS)]
    kind: Literal["training", "inference", "collective", "memory"]
    source: str = ""
    notes: str | None = None
    measured: dict[str, float]  # a zero or negative value is skipped when scored, with its reason
    model: CaseModel | None = None
    system: CaseSystem | None = None
    parallel: CaseParallel | None = None
    precision: str | None = None  # one of PRECISIONS: the GEMMs' number format
    kv_precision: str | None = None  # inference: the KV cache's format (null: the reader's default)
    workload: CaseWorkload | None = None
    op: str | None = None
    size_bytes: Count | None = None
    algorithm: str | None = None
    software: CaseSoftware | None = None
    # extra context (training): how the source's model FLOPs count the attention's two matmuls: over the whole
    # sequence (null or "full": the papers' and Megatron-LM's count before 2025-03) or over the keys a causal query
    # meets, half the sequence ("causal": Megatron-LM since commit 8873b55, 2025-03-06, and NeMo AutoModel)
    attention_flops: Literal["full", "causal"] | None = None

    @field_validator("precision", "kv_precision")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        if value is not None and value not in PRECISIONS:
            raise ValueError(f"unknown number format {value!r} (valid: {', '.join(PRECISIONS)})")
        return value

    @field_validator("measured", mode="before")
    @classmethod
    def _drop_nulls(cls, value: Any) -> Any:
        return {k: v for k, v in value.items() if v is not None} if isinstance(value, dict) else value


def as_case(case: Case | Mapping[str, Any], kind: str = "training") -> Case:
    """``case`` itself, or a plain mapping read as a ``Case`` of ``kind`` unless it names its own (a
    missing ``id`` or ``measured`` is allowed here: an adapter needs neither); errors name the field."""
    if isinstance(case, Case):
        return case
    data = {"id": "(no id)", "kind": kind, "measured": {}} | {k: v for k, v in case.items() if v is not None}
    try:
        return Case.model_validate(data)
    except ValidationError as exc:
        raise ClusterSimError(f"case {shown(data['id'])}: {validation_problems(exc.errors())}") from None


def read_cases(path: str | Path) -> list[Case]:
    """The cases of a JSON Lines file; ``ClusterSimError`` naming the file, line and field of a bad line."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ClusterSimError(f"{path}: no such ground-truth file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ClusterSimError(f"{path}: cannot read: {exc}") from None
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"{path}, line {number}"
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ClusterSimError(f"{where}: invalid JSON: {exc.msg} at column {exc.colno}") from None
        if not isinstance(raw, dict):
            raise ClusterSimError(f"{where}: a case must be a JSON object, got {type(raw).__name__}")
        missing = [key for key in ("id", "kind", "measured") if raw.get(key) is None]
        if missing:
            raise ClusterSimError(f"{where}: missing required field(s) {', '.join(missing)}")
        if raw["kind"] not in KINDS:
            raise ClusterSimError(f"{where}: unknown kind {shown(raw['kind'])} (valid: {', '.join(KINDS)})")
        try:
            case = Case.model_validate(raw)
        except ValidationError as exc:
            problems = validation_problems(exc.errors())
            raise ClusterSimError(f"{where}, case {shown(raw['id'])}: {problems}") from None
        if case.id in seen:
            raise ClusterSimError(f"{where}: duplicate id {shown(case.id)} (first on line {seen[case.id]})")
        seen[case.id] = number
        cases.append(case)
    if not cases:
        raise ClusterSimError(
            f"{path}: no cases (the file is empty or blank); a ground-truth file holds one JSON object per line "
            f"(format: clustersim/validation/data/README.md)",
            field="FILES",
            value=str(path),
        )
    return cases


def primary_field(case: Case) -> str:
    """The first measured field present in ``PRIMARY_FIELDS[case.kind]`` order."""
    for name in PRIMARY_FIELDS[case.kind]:
        if case.measured.get(name) is not None:
            return name
    wanted = ", ".join(PRIMARY_FIELDS[case.kind])
    raise ClusterSimError(f"case {shown(case.id)}: measured has none of {wanted} (has: {', '.join(case.measured)})")


def source_key(source: str) -> str:
    """The first word of a case's ``source``: cases citing one repository or paper share it."""
    words = source.split()
    return words[0] if words else "(no source)"


def bundled_dir() -> Path:
    """The folder of the ground truth shipped inside the package (a copy of ``../shared/validation``)."""
    return Path(str(files(BUNDLED_PACKAGE).joinpath(BUNDLED_FOLDER)))


def bundled_case_files() -> list[Path]:
    """The bundled ground-truth files (``*.jsonl``), sorted by name."""
    return sorted(path for path in bundled_dir().iterdir() if path.suffix == ".jsonl")


def project_dir() -> Path:
    """The folder of the project's own ground truth (``project/README.md``): published runs found for the
    project, in the same format, that are not in ``../shared/validation``."""
    return Path(str(files(BUNDLED_PACKAGE).joinpath(PROJECT_FOLDER)))


def project_case_files() -> list[Path]:
    """The project's own ground-truth files (``*.jsonl``), sorted by name."""
    return sorted(path for path in project_dir().iterdir() if path.suffix == ".jsonl")


def default_case_files() -> list[tuple[str, Path]]:
    """What ``validate`` scores and the fits use without files: the bundled copy of the shared ground
    truth (named by file name) and the project's own (named ``project/<file>``)."""
    bundled = [(path.name, path) for path in bundled_case_files()]
    return bundled + [(f"{PROJECT_FOLDER}/{path.name}", path) for path in project_case_files()]


def default_paths(kind_file: str) -> list[Path]:
    """The default files named ``kind_file`` (``training.jsonl``): the bundled copy's, then the project's."""
    return [path for _, path in default_case_files() if path.name == kind_file]


def read_all(paths: Sequence[Path]) -> list[Case]:
    """The cases of every file of ``paths``, in order."""
    return [case for path in paths for case in read_cases(path)]
