"""The serving engine as an input: what TensorRT-LLM, vLLM, SGLang or a Neuron engine does, apart from the chip.

The same model on the same GPUs serves at different speeds under different engines, and under different releases of one
engine. An ``EngineProfile`` says what one engine does: how it pages the KV cache (tokens per block) and how much
memory it gives it, how many sequences and tokens its scheduler puts in one step, whether its decode-attention kernel
reads a KV head once for its whole query group (GQA/MQA kernels such as TensorRT-LLM's XQA, FlashInfer, FlashAttention)
or once per query head, how its own benchmarks batch, what fraction of the reference engine's kernel efficiency it
reaches, and its host-side costs per step and per sequence where they differ from the reference's.

Each profile names the accelerator families it runs on (``accelerator_families``, with ``families_source``);
:func:`engine_for` refuses an engine on a family it does not run on and, with no engine named, takes the family's
default (``default_on``: TensorRT-LLM on GPUs, NxD Inference on Trainium). A GPU engine is never priced on Trainium,
nor a Neuron engine on GPUs.

Engines that compile static shapes (the Neuron ones) pad each prompt to the next of their context-encoding buckets and
attend, while decoding, over the next of their token-generation buckets (``bucket_min_tokens``, ``bucket_rule``,
``context_buckets``; ``clustersim.serving.buckets``). A deployment's compiled shapes, where known, are profile fields
too: ``compiled_batch`` (every decode step computes all its slots) and ``compiled_sequence_tokens`` (the last bucket;
absent: the longest request's; a longer request is refused).

The reference engine is TensorRT-LLM: ``calibration.toml`` is fitted on its published runs, so its profile has
``kernel_efficiency = 1`` and no overhead of its own. The profiles live in ``engines.toml`` with their sources; a
user's file (``CLUSTERSIM_SERVING_ENGINES`` or ``extra``) replaces the fields it gives; ``based_on`` derives one.

A ground-truth case names its engine in ``software.framework`` and the release in free text (``software.version``).
Which profile serves which release is data: a profile may give the release numbers (``releases = [from, until)``) and
the months of publication (``released = ["YYYY-MM", "YYYY-MM")``) it covers; :func:`engine_for_software` reads a
release number written after the framework's name (``TensorRT-LLM v0.7.1``, ``TensorRT-LLM 1.0``, or a bare ``0.9.2``),
else a month (``2023-11``), from the text, and picks the profile of that framework whose range holds it, else one whose
``harnesses`` the text names (a benchmark harness that sets the engine's options its own way; the longest name it
holds: ``MLPerf Inference v5.0`` before ``MLPerf Inference``), else the profile named like the framework (its current
releases). A version number of something else (``MLPerf Inference v4.0``) is no release of the engine. An unknown
framework is an error naming the known ones.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from clustersim.catalog.overlay import RecordFile
from clustersim.choices import Batching
from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.serving.buckets import bucket_tokens as bucket_tokens
from clustersim.serving.buckets import mean_bucket_tokens as mean_bucket_tokens
from clustersim.serving.buckets import prompt_bucket_tokens as prompt_bucket_tokens
from clustersim.serving.engine_names import FILE_NAME, PACKAGE
from clustersim.serving.reserved_memory import NO_RESERVED_MEMORY, ReservedMemoryRule
from clustersim.serving.state_pool import StatePool
from clustersim.serving.versions import MONTH, RELEASE, release_number
from clustersim.serving.versions import parse_version as parse_version

ENV_VAR = "CLUSTERSIM_SERVING_ENGINES"
DEFAULT_ENGINE = "tensorrt-llm"
FloatArray = npt.NDArray[np.float64]


class EngineProfile(BaseModel):
    """What one serving engine (one release line of it) does; see the module's notes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = Field(min_length=1, description="Which engine and releases this profile describes.")
    source: str = Field(min_length=1, description="Where each setting comes from.")
    fitted: str | None = Field(None, description="What fitted settings were fitted to, and when.")
    framework: str = Field(min_length=1, description="The software.framework of the cases this profile serves.")
    accelerator_families: tuple[str, ...] = Field(
        min_length=1, description="The accelerator families (catalog `family`) this engine, as profiled, runs on."
    )
    default_on: tuple[str, ...] = Field(
        (), description="The families on which this is the engine when none is named (one profile per family)."
    )
    families_source: str = Field(min_length=1, description="Where accelerator_families comes from.")
    releases: tuple[str, str] | None = Field(
        None, description="Release numbers of the framework this profile covers: [from, until), e.g. ['0.5', '0.8']."
    )
    released: tuple[str, str] | None = Field(
        None, description="Months of publication this profile covers: [from, until), e.g. ['2023-10', '2024-03']."
    )
    harnesses: tuple[str, ...] = Field(
        (),
        description="Benchmark harnesses whose runs it describes (matched in a case's software.version).",
    )
    kv_block_tokens: int = Field(ge=1, description="Tokens per paged KV-cache block (a page).")
    reserved_memory_fraction: float | None = Field(
        None, ge=0, lt=1, description="Share of the device memory the engine leaves unused (vLLM: 1 - "
        "gpu_memory_utilization); none: reserved_memory_rule's (clustersim.serving.reserved_memory).",
    )  # fmt: skip
    reserved_memory_rule: ReservedMemoryRule | None = Field(None, description="Its own rule (activations kept in it).")
    kv_memory_fraction: float = Field(
        gt=0, le=1, description="Share of the memory left after weights and workspace that the KV cache gets."
    )
    max_batch_sequences: int = Field(ge=1, description="Most sequences in flight per engine (its scheduler's cap).")
    max_tokens_per_step: int = Field(ge=1, description="Most tokens (prompt and decode) per engine step.")
    benchmark_sizing: Literal["fixed", "trtllm-bench"] = Field(
        "fixed",
        description="Where the caps of a deployment come from: fixed (max_batch_sequences and max_tokens_per_step, "
        "per accelerator where given) or trtllm-bench (its heuristic from the model, the memory and the mean "
        "lengths, clustersim.serving.bench_sizing; a run that states its caps is fixed).",
    )
    max_batch_sequences_on: dict[str, int] = Field(
        {}, description="max_batch_sequences on these accelerators (catalog ids), where a harness sets it per system."
    )
    max_tokens_per_step_on: dict[str, int] = Field(
        {}, description="max_tokens_per_step on these accelerators (catalog ids), where a harness sets it per system."
    )
    gqa_decode_kernel: bool = Field(
        description="Decode attention reads each KV head once for its query group; false: once per query head."
    )
    kv_cache_default: Literal["weights", "activations"] = Field(
        "weights",
        description="A run's KV cache format where it is not stated: the 8-bit weights' (a quantized checkpoint's "
        "KV scales), or the activations' (bf16: --kv-cache-dtype auto); beside 4-bit weights fp8 either way.",
    )
    first_token_lag_steps: int = Field(
        0, ge=0, le=16, description="Steps after the one that computes it at whose end the stack reports a request's "
        "first token (clustersim.serving.first_token).",
    )  # fmt: skip
    benchmark_batching: Batching = Field(description="How the engine's own throughput benchmarks batch requests.")
    kernel_efficiency: float = Field(
        gt=0, le=1, description="Fraction of the reference engine's GEMM and attention efficiency its kernels reach."
    )
    kernel_efficiency_on: dict[str, float] = Field(
        {}, description="kernel_efficiency on these accelerators (catalog ids), where the runs there reach another."
    )
    step_overhead_s: float | None = Field(
        None, ge=0, le=0.1, description="Host cost per step, seconds; absent: the calibration's (TensorRT-LLM's)."
    )
    layer_overhead_s: float | None = Field(
        None,
        ge=0,
        le=1e-3,
        description="Fixed cost per layer per step, seconds; absent: the calibration's (TensorRT-LLM's).",
    )
    gemm_half_tokens: float | None = Field(
        None,
        ge=0,
        le=4096,
        description="GEMM rows per step at which this engine's GEMMs reach half their fraction (its kernels' cost "
        "at small batches); absent: the calibration's (TensorRT-LLM's).",
    )
    sequence_overhead_s: float | None = Field(
        None, ge=0, le=1e-3, description="Host cost per sequence per step, seconds; absent: the calibration's."
    )
    host_sequence_overhead_s: dict[str, float] = Field(
        {},
        description="Host cost per sequence per step, seconds, on the accelerators (catalog ids) whose host CPU is "
        "not the x86 host of the runs the calibration was fitted on (gb200: a Grace CPU); others: sequence_overhead_s.",
    )
    cpp_sampler: bool = Field(
        False,
        description="TensorRT-LLM samples in C++ (sampler_type TRTLLMSampler), not in the Python TorchSampler: the "
        "per-request Python work host_sequence_overhead_s prices is not run; the host costs sequence_overhead_s.",
    )
    kv_admission: Literal["paged", "reserve"] = Field(
        "paged",
        description="How continuous batching admits a request: paged (the blocks of what it holds now; decoding "
        "takes more, preempting when they run out) or reserve (the blocks of its prompt and whole output cap, "
        "never preempted: TensorRT-LLM's GUARANTEED_NO_EVICT).",
    )
    mixed_steps: bool = Field(
        True,
        description="Prompt tokens share the decode step's launch (in-flight batching, chunked prefill); false: "
        "prefill and decode run as separate launches, one after the other (Neuron).",
    )
    scheduler_steps: int = Field(
        1,
        ge=1,
        le=64,
        description="Decode steps the engine runs from one scheduling to the next (vLLM V0's --num-scheduler-steps, "
        "multi-step scheduling): waiting prompts are admitted only at a scheduling, so they gather over that many "
        "steps and an arrival waits for the next scheduling (clustersim.serving.whole_prompts); 1: every step "
        "schedules.",
    )
    receive_steps: int = Field(
        1,
        ge=1,
        le=64,
        description="Decode steps between two intakes of new requests (SGLang's --scheduler-recv-interval: its "
        "scheduler takes arrivals in after that many decode steps, or right after a step that ran a prompt; "
        "python/sglang/srt/managers/scheduler_recv_skipper.py); requests already taken in are admitted every step. "
        "1: every step.",
    )
    adp_balance_steps: int = Field(
        0,
        ge=0,
        le=1000,
        description="Under attention data parallelism, the steps between admissions of waiting prompts when the "
        "engine balances them over the ranks (TensorRT-LLM's AttentionDpConfig enable_balance: a context request is "
        "held until every rank has one, or for timeout_iters iterations): where each rank's arrivals are sparse (few "
        "in that many steps) the holds end at the timeout, every timeout_iters steps, and prompts gather over them as "
        "under scheduler_steps; where every rank holds a prompt sooner the period is batching_wait_iters + 1, which "
        "is then the value to give. 0: no balancing (TensorRT-LLM's default); no effect without attention DP.",
    )
    fused_expert_mlp: bool = Field(
        False,
        description="A MoE model's routed experts run as Blackwell CuTe DSL grouped GEMMs on 8- or 4-bit rows "
        "(TensorRT-LLM's moe_backend CUTEDSL): no moe_token_layer_s, the cost per token beyond the experts' "
        "FLOPs that calibration.toml fits on the default kernels (clustersim.serving.fused_experts).",
    )
    graph_batch_sizes: tuple[int, ...] | None = Field(
        None,
        description="CUDA graphs captured with padding on (TensorRT-LLM's cuda_graph_config batch_sizes, vLLM's "
        "cudagraph_capture_sizes), ascending: a step of decoders alone runs at the smallest size holding its batch "
        "(a rank's under attention DP), the padding rows in its GEMMs, expert exchange and row-wise work; a step with "
        "a prompt, or over the largest size, runs as it is (clustersim.serving.graphs); absent: the live batch.",
    )
    eager_launch_s: float | None = Field(
        None, ge=0, le=1e-3, description="Host time per kernel launch of a step with prompt tokens run eagerly (no "
        "CUDA graph): it takes at least its launches' time (clustersim.serving.eager_launches); absent: no floor.",
    )  # fmt: skip
    graphed_prompt_tokens: int = Field(
        0, ge=0, le=65536, description="Steps with prompts of at most this many tokens (prompt and decode) replay "
        "captured graphs, no launch floor (vLLM V1's piecewise graphs up to its largest capture size); 0: none.",
    )  # fmt: skip
    sequence_parallel_prefill: bool = Field(
        False,
        description="Prompt tokens' norms and residual adds are split over the TP ranks (sequence parallelism in "
        "context encoding: reduce-scatter and all-gather in place of each all-reduce); false: every rank does all.",
    )
    score_bytes: float | None = Field(
        None,
        ge=0,
        le=64,
        description="Native (non-flash) context attention: HBM bytes moved per attention score it materializes (one "
        "query x key x head of a padded prompt on one device: the passes of its mask and softmax over the scores); "
        "absent: none (a flash kernel keeps the scores on chip).",
    )
    bucket_min_tokens: int | None = Field(
        None,
        ge=1,
        description="Static-shape buckets: prompts and decode contexts are padded to the next power of two from "
        "this many tokens; absent: no padding (dynamic shapes).",
    )
    bucket_rule: Literal["doubling", "rounded", "single"] = Field(
        "doubling",
        description="Which powers of two are buckets below the compiled sequence length L (the last bucket): "
        "doubling, every one from bucket_min_tokens (transformers-neuronx); rounded, those below "
        "2**round(log2 L) (NxD Inference's automatic buckets, so a length just past a power of two pads to L); "
        "single, none: L is the only bucket (bucketing off; bucket_min_tokens then only turns padding on).",
    )
    context_buckets: tuple[int, ...] | None = Field(
        None,
        description="Static shapes: the context-encoding buckets a compile lists itself (NxD Inference's "
        "context_encoding_buckets), ascending; a prompt pads to the smallest that holds it (none: refused); "
        "absent: bucket_rule's.",
    )
    compiled_batch: int | None = Field(
        None,
        ge=1,
        description="Static shapes: the batch the token-generation graph is compiled for; every decode step "
        "computes all its slots (idle ones padded) and at most that many sequences run; absent: the live batch.",
    )
    compiled_sequence_tokens: int | None = Field(
        None,
        ge=1,
        description="Static shapes: the positions compiled (the last bucket, the only one under bucket_rule "
        "single); no request may be longer; absent: the deployment's longest request.",
    )
    state_pool: StatePool = Field(StatePool(), description="How it holds a hybrid model's recurrent states.")
    name: str = Field("", description="The profile's name (filled in when loaded).")

    @field_validator("releases")
    @classmethod
    def _release_range(cls, value: tuple[str, str] | None) -> tuple[str, str] | None:
        if value is not None and not all(RELEASE.fullmatch(v) for v in value):
            raise ValueError(f"{list(value)}: give two release numbers such as ['0.5', '0.8']")
        if value is not None and release_number(value[0]) >= release_number(value[1]):
            raise ValueError(f"{list(value)}: the first release must come before the second")
        return value

    @field_validator("released")
    @classmethod
    def _month_range(cls, value: tuple[str, str] | None) -> tuple[str, str] | None:
        if value is not None and not all(MONTH.fullmatch(v) for v in value):
            raise ValueError(f"{list(value)}: give two months such as ['2023-10', '2024-03']")
        if value is not None and value[0] >= value[1]:
            raise ValueError(f"{list(value)}: the first month must come before the second")
        return value

    @field_validator("context_buckets", "graph_batch_sizes")
    @classmethod
    def _ascending_sizes(cls, value: tuple[int, ...] | None) -> tuple[int, ...] | None:
        if value is not None and (not value or value[0] < 1 or any(b <= a for a, b in itertools.pairwise(value))):
            raise ValueError(f"{list(value)}: give counts of at least 1 in ascending order, e.g. [128, 256, 512]")
        return value

    @field_validator("host_sequence_overhead_s")
    @classmethod
    def _host_costs(cls, value: dict[str, float]) -> dict[str, float]:
        for accelerator, seconds in _accelerator_keyed(value, "gb200").items():
            if not 0 <= seconds <= 1e-3:
                raise ValueError(f"{accelerator} = {seconds}: a host cost per sequence is 0 to 1e-3 seconds")
        return value

    @field_validator("max_batch_sequences_on", "max_tokens_per_step_on")
    @classmethod
    def _per_accelerator(cls, value: dict[str, int]) -> dict[str, int]:
        for accelerator, count in _accelerator_keyed(value, "b200").items():
            if count < 1:
                raise ValueError(f"{accelerator} = {count}: a cap is at least 1")
        return value

    @field_validator("kernel_efficiency_on")
    @classmethod
    def _per_accelerator_fraction(cls, value: dict[str, float]) -> dict[str, float]:
        for accelerator, fraction in _accelerator_keyed(value, "trainium2").items():
            if not 0 < fraction <= 1:
                raise ValueError(f"{accelerator} = {fraction}: a kernel efficiency is above 0 and at most 1")
        return value

    def kernel_efficiency_for(self, accelerator: str) -> float:
        """The fraction of the reference's kernel efficiency this engine reaches on ``accelerator`` (a catalog id)."""
        return self.kernel_efficiency_on.get(accelerator, self.kernel_efficiency)

    def sequence_cap(self, accelerator: str) -> int:
        """Most sequences in flight per engine on ``accelerator`` (a catalog id), at most the compiled batch."""
        cap = self.max_batch_sequences_on.get(accelerator, self.max_batch_sequences)
        return cap if self.compiled_batch is None else min(cap, self.compiled_batch)

    def native_score_bytes(self, prompt_tokens: float, head_layers: float) -> float:
        """HBM bytes one prompt of ``prompt_tokens`` (padded) moves for the scores its native attention materializes:
        ``prompt_tokens**2`` per head and layer on the device (``head_layers`` of them); 0 without ``score_bytes``."""
        return 0.0 if not self.score_bytes else self.score_bytes * head_layers * prompt_tokens**2

    def decode_slots(self, sequences: FloatArray) -> FloatArray:
        """Sequences a decode step computes: all of a compiled batch's slots whenever one of them decodes."""
        if self.compiled_batch is None:
            return sequences
        return np.where(sequences > 0, np.maximum(sequences, float(self.compiled_batch)), sequences)

    def admission_steps(self, attention_dp: int) -> int:
        """Steps from one admission of waiting prompts to the next on a replica of ``attention_dp`` attention
        groups: ``scheduler_steps``, ``receive_steps`` (the intake, as the closed forms take it: at light load a
        step that ran a prompt is rarely followed by another arrival), or the balancing hold ``adp_balance_steps``
        where attention DP is on."""
        return max(self.scheduler_steps, self.receive_steps, self.adp_balance_steps if attention_dp > 1 else 1)

    def token_budget(self, accelerator: str) -> int:
        """Most tokens (prompt chunks and decodes) per engine step on ``accelerator`` (a catalog id)."""
        return self.max_tokens_per_step_on.get(accelerator, self.max_tokens_per_step)

    @model_validator(mode="after")
    def _framework_id(self) -> EngineProfile:
        if self.framework != self.framework.strip().lower():
            raise ValueError(f"framework {self.framework!r}: write it in lower case, as software.framework")
        if self.reserved_memory_fraction is None and self.reserved_memory_rule is None:
            raise ValueError(NO_RESERVED_MEMORY)
        if self.context_buckets and self.bucket_min_tokens is None:
            raise ValueError("context_buckets: only an engine with static shapes (bucket_min_tokens) pads prompts")
        last = self.context_buckets[-1] if self.context_buckets else 0
        if self.compiled_sequence_tokens is not None and last > self.compiled_sequence_tokens:
            raise ValueError(
                f"context_buckets: the last, {last}, is beyond compiled_sequence_tokens {self.compiled_sequence_tokens}"
            )
        stray = sorted(set(self.default_on) - set(self.accelerator_families))
        if stray:
            raise ValueError(f"default_on {stray}: not among accelerator_families {list(self.accelerator_families)}")
        return self

    def covers(self, release: tuple[int, ...] | None, month: str | None) -> bool:
        """Whether this profile's range holds a case's release number (or, with none, its month)."""
        if release is not None:
            return self.releases is not None and (
                release_number(self.releases[0]) <= release < release_number(self.releases[1])
            )
        return month is not None and self.released is not None and self.released[0] <= month < self.released[1]


# The file, its environment variable and the user's files over it (clustersim.catalog.overlay).
def _accelerator_keyed(value: Mapping[str, float], example: str) -> Mapping[str, float]:
    """``value``, its keys checked as catalog accelerator ids (lower case, not empty)."""
    for accelerator in value:
        if accelerator != accelerator.strip().lower() or not accelerator:
            raise ValueError(f"{accelerator!r}: write a catalog accelerator id in lower case, e.g. '{example}'")
    return value


ENGINE_FILE = RecordFile(
    EngineProfile, PACKAGE, FILE_NAME, ENV_VAR, what="serving engine file", entry="engine", named=True
)


def engine_profiles(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, EngineProfile]:
    """The packaged profiles with the user's files (``CLUSTERSIM_SERVING_ENGINES``, then ``extra``) over them."""
    return ENGINE_FILE.records(extra, use_env=use_env)


def engine_profile(engine: str | EngineProfile | None = None, family: str | None = None) -> EngineProfile:
    """The profile ``engine`` names, or ``engine`` itself when it is one. With ``family`` (the accelerator
    family it serves on) it is :func:`engine_for`'s: none named is the family's default, and an engine
    that does not run on the family is refused; without it, none named is TensorRT-LLM."""
    if family is not None:
        if isinstance(engine, EngineProfile):
            check_runs_on(engine, family)
            return engine
        return engine_for(engine, family)
    if isinstance(engine, EngineProfile):
        return engine
    table = engine_profiles()
    name = (engine or DEFAULT_ENGINE).strip().lower()
    if name not in table:
        raise UnknownNameError("engine", name, table)
    return table[name]


def engines_on(family: str) -> list[str]:
    """The names of the engine profiles whose ``accelerator_families`` hold ``family``, sorted."""
    return sorted(name for name, profile in engine_profiles().items() if family in profile.accelerator_families)


def engine_for(engine: str | None, family: str, *, accelerator: str | None = None) -> EngineProfile:
    """The profile ``engine`` names on accelerators of ``family`` (none named: the profile whose
    ``default_on`` holds the family: TensorRT-LLM on GPUs, NxD Inference on Trainium). An engine that
    does not run on the family is refused naming both and the engines that do; a family with no engine
    profiled is refused rather than priced as another family's engine. ``accelerator``: the chip's id,
    for the message."""
    table = engine_profiles()
    chip = f"{accelerator} ({family})" if accelerator else family
    if engine is None:
        defaults = sorted(name for name, profile in table.items() if family in profile.default_on)
        if not defaults:
            runs_on: dict[tuple[str, ...], list[str]] = {}
            for name, profile in table.items():
                runs_on.setdefault(profile.accelerator_families, []).append(name)
            others = "; ".join(f"{', '.join(names)} on {', '.join(fams)}" for fams, names in runs_on.items())
            raise ClusterSimError(
                f"engine: no serving engine is profiled for {chip} accelerators yet, so none is priced there "
                f"(profiled: {others}); a profile ($CLUSTERSIM_SERVING_ENGINES) listing {family!r} in "
                f"accelerator_families can be named with --engine",
                field="engine",
            )
        if len(defaults) > 1:
            raise ClusterSimError(
                f"engine: several profiles are the default on {family} ({', '.join(defaults)}); keep {family!r} in "
                f"the default_on of one of them (a user file can set default_on = [] on the others)",
                field="engine",
            )
        return table[defaults[0]]
    profile = engine_profile(engine)
    check_runs_on(profile, family, accelerator=accelerator)
    return profile


def check_runs_on(profile: EngineProfile, family: str, *, accelerator: str | None = None) -> None:
    """Refuse ``profile`` on accelerators of ``family`` unless its ``accelerator_families`` hold it, naming
    the engine, the family and the engines that run there."""
    if family in profile.accelerator_families:
        return
    chip = f"{accelerator} ({family})" if accelerator else family
    fits = engines_on(family)
    raise ClusterSimError(
        f"engine {profile.name!r} does not run on {chip} accelerators (as profiled it runs on "
        f"{', '.join(profile.accelerator_families)}); engines for {family}: "
        f"{', '.join(fits) or 'none profiled yet'}",
        field="engine",
        value=profile.name,
    )


def engine_for_software(framework: str | None, version: str | None = None) -> EngineProfile:
    """The profile of a case's ``software`` (see the module): the framework's profile whose ``releases``
    (or ``released`` months) hold the release ``version`` names, else the profile named like the
    framework (default: TensorRT-LLM); with no release named, the profile of a harness the version names
    (``harnesses``: MLPerf's runs TensorRT-LLM with its own scheduler policy); ``UnknownNameError`` for a
    framework no profile serves."""
    table = engine_profiles()
    name = (framework or DEFAULT_ENGINE).strip().lower()
    frameworks = {profile.framework for profile in table.values()}
    if name not in frameworks:
        raise UnknownNameError("software.framework", name, frameworks)
    release, month = parse_version(name, version or "")
    matches = [p for p in table.values() if p.framework == name and p.covers(release, month)]
    if len(matches) > 1:
        names = ", ".join(p.name for p in matches)
        raise ClusterSimError(
            f"software.version: {version!r} falls in the ranges of several {name} profiles ({names}); "
            f"make their releases/released ranges disjoint",
            field="software.version",
        )
    if not matches and release is None:  # no release named: a harness the version names runs the engine its way
        text = (version or "").lower()
        named = {p.name: max((len(h) for h in p.harnesses if h.lower() in text), default=0) for p in table.values()}
        matches = [p for p in table.values() if p.framework == name and named[p.name]]
        matches.sort(key=lambda p: -named[p.name])  # the most specific harness named (MLPerf Inference v5.0)
    if matches:
        return matches[0]
    if name not in table:
        raise ClusterSimError(
            f"software.version: {version!r} is in no release range of the {name} profiles, and no profile is "
            f"named {name!r} to serve the others",
            field="software.version",
        )
    return table[name]
