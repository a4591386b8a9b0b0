"""Achieved fractions of an accelerator's peaks, per architecture family, fitted once.

A matrix multiply of ``F`` FLOPs runs at ``peak x gemm_max x F / (F + gemm_half_flop)``: large
GEMMs approach a ceiling (``gemm_max``), small ones lose to launch, tail and wave quantization
(half the ceiling at ``gemm_half_flop``). The attention core (scores, softmax, context) has its own
fraction of the ceiling; element-wise work (norms, activations, residuals, dropout, the loss and the
optimizer) streams through HBM at ``memory_efficiency`` of the datasheet bandwidth. FP8 GEMMs run
at the FP8 peak times ``fp8_efficiency_ratio`` of the BF16 fraction (casts, scaling, smaller tiles).
``fused_attention`` records whether the software measured on the family (Megatron-LM of 2021-22 on
Ampere; Transformer Engine, NeuronX) ran a fused attention kernel that keeps no score matrix, and
``tp_overlap`` whether it overlapped tensor-parallel communication with GEMMs (Transformer Engine's
userbuffers on Hopper); a layout that says neither takes the family's software default.

The values live in ``efficiency.toml`` beside this module, each family with the source it was fitted
to (``benchmarks/calibrate_training.py`` fits them once to ``../shared/validation/training.jsonl``,
never per case). A user's own file (``--efficiency FILE`` or ``CLUSTERSIM_EFFICIENCY``, paths separated
by ``os.pathsep``) replaces the fields it gives, so a measured machine can bring its own fractions.
"""

from __future__ import annotations

import functools
import os
import tomllib
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clustersim.catalog.schema import Accelerator
from clustersim.errors import CatalogFileError, validation_problems

FloatArray = npt.NDArray[np.float64]
ENV_VAR = "CLUSTERSIM_EFFICIENCY"
FALLBACK_FAMILY = "hopper"


class FamilyEfficiency(BaseModel):
    """Achieved fractions of the peaks of one accelerator family (dimensionless unless named)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gemm_max: float = Field(gt=0, le=1, description="Ceiling of a large GEMM, fraction of the dense peak.")
    gemm_half_flop: float = Field(ge=0, description="GEMM size (FLOPs) at which half the ceiling is reached.")
    attention: float = Field(gt=0, le=1, description="Attention core, fraction of the GEMM ceiling.")
    memory_efficiency: float = Field(gt=0, le=1, description="Element-wise kernels, fraction of HBM bandwidth.")
    fp8_efficiency_ratio: float = Field(gt=0, le=1, description="FP8 fraction of FP8 peak / BF16 fraction.")
    fused_attention: bool = Field(description="The measured software used a fused attention kernel.")
    tp_overlap: bool = Field(description="The measured software overlapped TP communication with GEMMs.")
    source: str = Field(min_length=1, description="What the values were fitted to, or where they come from.")

    def gemm_fraction(self, flop: FloatArray | float) -> FloatArray:
        """Achieved fraction of the dense peak for GEMMs of ``flop`` FLOPs each."""
        flop = np.asarray(flop, dtype=float)
        return self.gemm_max * flop / (flop + self.gemm_half_flop)


def efficiency_table(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, FamilyEfficiency]:
    """The packaged fractions per family, with the user's files (``CLUSTERSIM_EFFICIENCY``, then
    ``extra``) merged over them field by field. The same inputs return the same (cached) table."""
    env = os.environ.get(ENV_VAR, "") if use_env else ""
    return _table(env, tuple(str(p) for p in extra))


@functools.lru_cache(maxsize=32)
def _table(env: str, extra: tuple[str, ...]) -> dict[str, FamilyEfficiency]:
    packaged = resources.files("clustersim.compute").joinpath("efficiency.toml")
    files: list[tuple[str, Mapping[str, Any]]] = [(str(packaged), tomllib.loads(packaged.read_text("utf-8")))]
    files += [(path, _read(Path(path))) for path in [*(p for p in env.split(os.pathsep) if p), *extra]]
    merged: dict[str, dict[str, Any]] = {}
    origin: dict[str, str] = {}
    for path, data in files:
        for family, fields in data.items():
            if not isinstance(fields, dict):
                raise CatalogFileError(path, family, None, fields, "each family is a table of fields")
            fields = dict(fields)
            base = fields.pop("based_on", None)
            start = merged.get(family, {})
            if base is not None:
                if base not in merged:
                    raise CatalogFileError(
                        path, family, "based_on", base, f"no such family (known: {', '.join(merged)})"
                    )
                start = merged[base]
            merged[family] = {**start, **fields}
            origin[family] = path
    table = {}
    for family, fields in merged.items():
        try:
            table[family] = FamilyEfficiency.model_validate(fields)
        except ValidationError as exc:
            raise CatalogFileError(origin[family], family, None, None, validation_problems(exc.errors())) from None
    return table


def _read(path: Path) -> Mapping[str, Any]:
    try:
        with path.expanduser().open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise CatalogFileError(str(path), None, None, None, "no such efficiency file") from None
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise CatalogFileError(str(path), None, None, None, f"cannot read: {exc}") from None


def efficiency_for(accelerator: Accelerator, table: Mapping[str, FamilyEfficiency] | None = None) -> FamilyEfficiency:
    """The fractions of the accelerator's family (Hopper's where the table has no such family)."""
    table = efficiency_table() if table is None else table
    return table.get(accelerator.family) or table[FALLBACK_FAMILY]
