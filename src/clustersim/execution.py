"""How a training job is laid out on its devices, and the checks that make a layout possible.

``tp * pp * dp * cp`` ranks cover the devices; expert parallelism (``ep``) is carved out of the
data-parallel ranks (Megatron-LM), so ``ep`` divides ``dp``. ``vp`` model chunks per pipeline rank
give the interleaved 1F1B schedule. Gradient accumulation follows: ``global_batch / (dp * micro_batch)``
micro-batches per step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
import numpy.typing as npt
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from clustersim.errors import ClusterSimError, validation_problems
from clustersim.workload.transformer import Transformer

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class Recompute(StrEnum):
    """Activation recompute: none, the attention core only (selective), or whole layers (full)."""

    NONE = "none"
    SELECTIVE = "selective"
    FULL = "full"


class Layout(BaseModel):
    """A parallel layout. Degrees are counts of ranks; ``micro_batch`` is in sequences."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tp: int = Field(default=1, ge=1, description="Tensor parallel degree.")
    pp: int = Field(default=1, ge=1, description="Pipeline parallel degree.")
    dp: int = Field(default=1, ge=1, description="Data parallel degree (model replicas).")
    cp: int = Field(default=1, ge=1, description="Context parallel degree (sequence split for attention).")
    ep: int = Field(default=1, ge=1, description="Expert parallel degree (within the data-parallel ranks).")
    vp: int = Field(default=1, ge=1, description="Model chunks per pipeline rank (interleaved 1F1B).")
    micro_batch: int = Field(default=1, ge=1, description="Sequences per micro-batch.")
    zero: int = Field(default=0, ge=0, le=3, description="ZeRO stage: 1 optimizer, 2 +gradients, 3 +weights (FSDP).")
    sequence_parallel: bool = Field(default=False, description="Megatron sequence parallelism (needs tp > 1).")
    recompute: Recompute = Field(default=Recompute.NONE, description="Activation recompute.")
    tp_overlap: bool | None = Field(
        default=None, description="Overlap tensor-parallel communication with GEMMs (None: the family's default)."
    )
    dp_overlap: bool = Field(default=True, description="Overlap data-parallel communication with compute.")
    uneven_stages: bool = Field(
        default=False, description="Allow pipeline stages with different layer counts (layers not divisible by pp*vp)."
    )

    @property
    def num_devices(self) -> int:
        """Devices the layout covers."""
        return self.tp * self.pp * self.dp * self.cp

    def num_micro_batches(self, global_batch: int) -> int:
        """Micro-batches per step and pipeline (gradient accumulation steps)."""
        return global_batch // (self.dp * self.micro_batch)

    def describe(self) -> str:
        """One line, e.g. ``tp 8 pp 4 vp 2 dp 16 mb 1 zero 1 sp recompute selective``."""
        parts = [f"tp {self.tp}", f"pp {self.pp}"]
        parts += [f"vp {self.vp}"] if self.vp > 1 else []
        parts += [f"dp {self.dp}"]
        parts += [f"cp {self.cp}"] if self.cp > 1 else []
        parts += [f"ep {self.ep}"] if self.ep > 1 else []
        parts += [f"mb {self.micro_batch}", f"zero {self.zero}"]
        parts += ["sp"] if self.sequence_parallel else []
        parts += [f"recompute {self.recompute.value}"]
        return " ".join(parts)

    def check(self, model: Transformer, *, num_devices: int, global_batch: int, seq_len: int) -> None:
        """Raise ``ClusterSimError`` naming the first rule the layout breaks."""
        rules: list[tuple[bool, str]] = [
            (
                self.num_devices == num_devices,
                f"tp*pp*dp*cp = {self.tp}*{self.pp}*{self.dp}*{self.cp} = {self.num_devices} "
                f"must equal the devices, {num_devices}",
            ),
            (model.heads % self.tp == 0, f"tp {self.tp} must divide heads {model.heads}"),
            (
                model.kv_heads % self.tp == 0 or self.tp % model.kv_heads == 0,
                f"tp {self.tp} must divide kv_heads {model.kv_heads} (or be a multiple of it)",
            ),
            (
                model.layers % (self.pp * self.vp) == 0 or (self.uneven_stages and model.layers >= self.pp * self.vp),
                f"layers {model.layers} must divide by pp*vp = {self.pp * self.vp} (or allow uneven stages)",
            ),
            (
                global_batch % (self.dp * self.micro_batch) == 0,
                f"global batch {global_batch} must divide by dp*micro_batch = {self.dp}*{self.micro_batch}",
            ),
            (seq_len % self.cp == 0, f"cp {self.cp} must divide the sequence length {seq_len}"),
            (self.vp == 1 or self.pp > 1, f"vp {self.vp} needs pipeline parallelism (pp > 1)"),
            (not self.sequence_parallel or self.tp > 1, "sequence_parallel needs tp > 1"),
            (self.ep == 1 or model.moe is not None, f"ep {self.ep} needs a mixture-of-experts model"),
            (self.dp % self.ep == 0, f"ep {self.ep} must divide dp {self.dp}"),
        ]
        if model.moe is not None:
            rules.append((model.moe.experts % self.ep == 0, f"ep {self.ep} must divide experts {model.moe.experts}"))
        for ok, rule in rules:
            if not ok:
                raise ClusterSimError(f"impossible layout ({self.describe()}): {rule}")
        if self.vp > 1 and self.num_micro_batches(global_batch) % self.pp:
            raise ClusterSimError(
                f"impossible layout ({self.describe()}): interleaving (vp {self.vp}) needs the micro-batches, "
                f"{self.num_micro_batches(global_batch)}, to be a multiple of pp {self.pp}"
            )


def layout_from_mapping(data: dict[str, Any], where: str = "layout") -> Layout:
    """A ``Layout`` from plain data (null values take defaults); errors name field, value and rule."""
    clean = {key: value for key, value in data.items() if value is not None}
    try:
        return Layout.model_validate(clean)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise ClusterSimError(f"{where}: {problems}") from None


@dataclass(frozen=True)
class LayoutArrays:
    """Many layouts as parallel numpy arrays, for evaluating them in one vectorized call."""

    tp: IntArray
    pp: IntArray
    dp: IntArray
    cp: IntArray
    ep: IntArray
    vp: IntArray
    micro_batch: IntArray
    zero: IntArray
    sequence_parallel: BoolArray
    recompute_full: BoolArray
    recompute_selective: BoolArray
    tp_overlap: npt.NDArray[np.float64]  # 1 on, 0 off, NaN: the accelerator family's default
    dp_overlap: BoolArray

    @classmethod
    def of(cls, layouts: Sequence[Layout]) -> LayoutArrays:
        """Stack layouts into arrays (one element per layout)."""
        if not layouts:
            raise ClusterSimError("no layouts to evaluate")

        def ints(name: str) -> IntArray:
            return np.array([getattr(layout, name) for layout in layouts], dtype=np.int64)

        def flags(test: Callable[[Layout], bool]) -> BoolArray:
            return np.array([test(layout) for layout in layouts], dtype=bool)

        return cls(
            tp=ints("tp"),
            pp=ints("pp"),
            dp=ints("dp"),
            cp=ints("cp"),
            ep=ints("ep"),
            vp=ints("vp"),
            micro_batch=ints("micro_batch"),
            zero=ints("zero"),
            sequence_parallel=flags(lambda x: x.sequence_parallel),
            recompute_full=flags(lambda x: x.recompute is Recompute.FULL),
            recompute_selective=flags(lambda x: x.recompute is Recompute.SELECTIVE),
            tp_overlap=np.array([np.nan if x.tp_overlap is None else float(x.tp_overlap) for x in layouts]),
            dp_overlap=flags(lambda x: x.dp_overlap),
        )

    def __len__(self) -> int:
        return len(self.tp)
