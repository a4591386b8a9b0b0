"""The serving engine as an input: what TensorRT-LLM, vLLM or SGLang do, apart from what the chip can do.

The same model on the same GPUs serves at different speeds under different engines, and under
different releases of one engine. An ``EngineProfile`` says what one engine does: how it pages the
KV cache (tokens per block) and how much memory it gives it, how many sequences and tokens its
scheduler puts in one step, whether its decode-attention kernel reads a KV head once for its whole
query group (GQA/MQA kernels such as TensorRT-LLM's XQA, FlashInfer, FlashAttention) or once per
query head, how its own benchmarks batch, what fraction of the reference engine's kernel efficiency
it reaches, and its host-side costs per step and per sequence where they differ from the
reference's.

The reference engine is TensorRT-LLM: the achieved fractions and overheads of ``calibration.toml``
are fitted on its published runs, so its profile has ``kernel_efficiency = 1`` and no overhead of
its own. The profiles live in ``engines.toml`` beside this module, each with its sources; a user's
file (``CLUSTERSIM_SERVING_ENGINES`` or ``extra`` paths) replaces the fields it gives, and
``based_on`` starts a new profile from a known one.

A ground-truth case names its engine in ``software.framework`` and the release in free text
(``software.version``); :func:`engine_for_software` picks the profile of that framework whose
``versions`` match the release (e.g. a TensorRT-LLM of 2023, before XQA), else the framework's own.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from clustersim.catalog.tomlfiles import overlay_tables, user_paths, validate_tables
from clustersim.choices import Batching
from clustersim.errors import UnknownNameError

ENV_VAR = "CLUSTERSIM_SERVING_ENGINES"
PACKAGE, FILE_NAME = "clustersim.serving", "engines.toml"
DEFAULT_ENGINE = "tensorrt-llm"


class EngineProfile(BaseModel):
    """What one serving engine (one release line of it) does; see the module's notes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = Field(min_length=1, description="Which engine and releases this profile describes.")
    source: str = Field(min_length=1, description="Where each setting comes from.")
    fitted: str | None = Field(None, description="What fitted settings were fitted to, and when.")
    framework: str = Field(min_length=1, description="The software.framework of the cases this profile serves.")
    versions: tuple[str, ...] = Field(
        (), description="Texts in a case's software.version that select this profile over the framework's own."
    )
    kv_block_tokens: int = Field(ge=1, description="Tokens per paged KV-cache block (a page).")
    reserved_memory_fraction: float = Field(
        ge=0,
        lt=1,
        description="Share of the device memory the engine leaves unused (vLLM: 1 - gpu_memory_utilization).",
    )
    kv_memory_fraction: float = Field(
        gt=0, le=1, description="Share of the memory left after weights and workspace that the KV cache gets."
    )
    max_batch_sequences: int = Field(ge=1, description="Most sequences in flight per engine (its scheduler's cap).")
    max_tokens_per_step: int = Field(ge=1, description="Most tokens (prompt and decode) per engine step.")
    gqa_decode_kernel: bool = Field(
        description="Decode attention reads each KV head once for its query group; false: once per query head."
    )
    benchmark_batching: Batching = Field(description="How the engine's own throughput benchmarks batch requests.")
    kernel_efficiency: float = Field(
        gt=0, le=1, description="Fraction of the reference engine's GEMM and attention efficiency its kernels reach."
    )
    step_overhead_s: float | None = Field(
        None, ge=0, le=0.1, description="Host cost per step, seconds; absent: the calibration's (TensorRT-LLM's)."
    )
    sequence_overhead_s: float | None = Field(
        None, ge=0, le=1e-3, description="Host cost per sequence per step, seconds; absent: the calibration's."
    )
    name: str = Field("", description="The profile's name (filled in when loaded).")

    def matches(self, version: str) -> bool:
        """Whether a case's free-text ``version`` names a release this profile describes."""
        text = version.lower()
        return any(token.lower() in text for token in self.versions)


def engine_profiles(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, EngineProfile]:
    """The packaged profiles with the user's files (``CLUSTERSIM_SERVING_ENGINES``, then ``extra``) over them."""
    return _profiles(user_paths(ENV_VAR, extra, use_env=use_env))


@functools.lru_cache(maxsize=32)
def _profiles(user_files: tuple[str, ...]) -> dict[str, EngineProfile]:
    tables = overlay_tables(PACKAGE, FILE_NAME, user_files, what="serving engine file", entry="engine")
    return {
        name: profile.model_copy(update={"name": name})
        for name, profile in validate_tables(tables, EngineProfile).items()
    }


def engine_profile(engine: str | EngineProfile | None = None) -> EngineProfile:
    """The profile ``engine`` names (default: TensorRT-LLM), or ``engine`` itself when it is one."""
    if isinstance(engine, EngineProfile):
        return engine
    table = engine_profiles()
    name = (engine or DEFAULT_ENGINE).strip().lower()
    if name not in table:
        raise UnknownNameError("engine", name, table)
    return table[name]


def engine_for_software(framework: str | None, version: str | None = None) -> EngineProfile:
    """The profile of a case's ``software``: the framework's profile whose ``versions`` match ``version``,
    else the profile named like the framework (default: TensorRT-LLM)."""
    name = (framework or DEFAULT_ENGINE).strip().lower()
    if version:
        for profile in engine_profiles().values():
            if profile.framework == name and profile.matches(version):
                return profile
    return engine_profile(name)
