"""Sourced figures: a number in SI units with the citation it came from and what it measures.

In a TOML file a figure is an inline table, ``{ value = "80GiB", source = "NVIDIA H100 datasheet" }``;
the value may carry a unit (parsed once, here) or be a plain number in the field's base unit.
``basis`` says what the number counts (dense vs 2:4-sparse FLOPs, per-direction vs bidirectional
bandwidth, one device vs an aggregate); the models use dense, per-direction figures.
"""

from __future__ import annotations

import datetime as dt
from enum import StrEnum
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clustersim import units
from clustersim.units import Dimension


class Basis(StrEnum):
    """What a figure counts; vendors mix these freely."""

    DENSE = "dense"
    SPARSE = "sparse"
    PER_DIRECTION = "per_direction"
    BIDIRECTIONAL = "bidirectional"
    AGGREGATE = "aggregate"


class Provenance(StrEnum):
    """Where a figure comes from."""

    DATASHEET = "datasheet"
    DOCUMENTATION = "documentation"
    MEASURED = "measured"
    DERIVED = "derived"
    ANNOUNCED = "announced"
    PRICE_LIST = "price_list"
    SOURCE_CODE = "source_code"


class Confidence(StrEnum):
    """How well a figure was checked: against a primary source, a secondary one, or recalled."""

    VERIFIED = "verified"
    SECONDARY = "secondary"
    RECALLED = "recalled"


class Record(BaseModel):
    """Base of every catalog model: frozen, keyword-only, unknown keys rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid", use_enum_values=False, validate_default=True)


class _Sourced(Record):
    source: str = Field(min_length=3, description="Citation: document, table or file the figure comes from.")
    provenance: Provenance = Field(Provenance.DATASHEET, description="Kind of source.")
    confidence: Confidence = Field(Confidence.VERIFIED, description="How well the figure was checked.")
    note: str | None = Field(None, description="Caveat, or the commonly quoted figure and why it differs.")


class Figure(_Sourced):
    """A non-negative number in the SI base unit of ``dimension``, with its source."""

    dimension: ClassVar[Dimension] = Dimension.COUNT
    value: float = Field(ge=0, description="The figure in the SI base unit of its dimension.")
    basis: Basis | None = Field(None, description="What the figure counts (dense, per_direction, ...).")

    @field_validator("value", mode="before")
    @classmethod
    def _parse_value(cls, raw: Any) -> float:
        if isinstance(raw, str | int | float) and not isinstance(raw, bool):
            return units.parse(raw, cls.dimension)
        raise ValueError(f"expected a number or a quantity string such as '80GiB', got {type(raw).__name__}")

    def describe(self) -> str:
        """The value with a readable unit, e.g. ``"3.35 TB/s"``."""
        binary = self.dimension is Dimension.BYTES
        return units.format_quantity(self.value, self.dimension, binary=binary)


class BytesFigure(Figure):
    """A size in bytes (capacities are GiB: the vendors' "80 GB" of HBM is 80 GiB)."""

    dimension: ClassVar[Dimension] = Dimension.BYTES


class BytesPerSFigure(Figure):
    """A memory, I/O or link bandwidth in bytes per second."""

    dimension: ClassVar[Dimension] = Dimension.BYTES_PER_S


class BitsPerSFigure(Figure):
    """A network bandwidth in bits per second."""

    dimension: ClassVar[Dimension] = Dimension.BITS_PER_S


class FlopPerSFigure(Figure):
    """A compute throughput in FLOP/s (OP/s for integer types)."""

    dimension: ClassVar[Dimension] = Dimension.FLOP_PER_S


class PerSFigure(Figure):
    """A rate of events of one kind per second (e.g. exponentials)."""

    dimension: ClassVar[Dimension] = Dimension.PER_S


class CountFigure(Figure):
    """A count or a dimensionless ratio."""

    dimension: ClassVar[Dimension] = Dimension.COUNT


class SecondsFigure(Figure):
    """A duration or latency in seconds."""

    dimension: ClassVar[Dimension] = Dimension.SECONDS


class WattsFigure(Figure):
    """A power in watts."""

    dimension: ClassVar[Dimension] = Dimension.WATTS


class Flag(_Sourced):
    """A sourced yes/no fact (supports GPUDirect RDMA, delivers in order, ...)."""

    value: bool = Field(description="Whether the property holds.")


class Fact(_Sourced):
    """A sourced statement that is not a number."""

    text: str = Field(min_length=3, description="The statement.")


class Choices(_Sourced):
    """A sourced list of allowed values (e.g. metadata IOPS options)."""

    values: tuple[float, ...] = Field(min_length=1, description="The allowed values, in SI base units.")


class Price(_Sourced):
    """An hourly price with its date and region; ``usd_per_hour`` is absent where no such offer exists."""

    usd_per_hour: float | None = Field(
        None, gt=0, description="US dollars per instance-hour; absent (null) = no such offer exists."
    )
    as_of: dt.date = Field(description="Date the price was read.")
    region: str = Field(min_length=3, description="AWS region (or location) the price applies to.")

    @property
    def offered(self) -> bool:
        """Whether the offer exists."""
        return self.usd_per_hour is not None
