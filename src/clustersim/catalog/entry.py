"""The base of every catalog entry: the fields all entries have, and the check that every figure in one
is a positive finite number (whole where it counts things)."""

from __future__ import annotations

import math
import re
from typing import Any, ClassVar

from pydantic import BaseModel, Field, field_validator, model_validator

from clustersim.catalog.figures import Basis, Choices, CountFigure, Figure, Price, Record
from clustersim.catalog.kinds import Kind

_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*$")
# Count figures that are whole numbers (the others, such as oversubscription, are ratios).
_WHOLE = ("vcpus", "max_accelerators", "availability_zones", "network_layers")
_AT_LEAST_ONE = ("oversubscription",)


def _check_numbers(item: Any, path: str) -> None:
    """Every figure of an entry is a positive finite number (a zero bandwidth or device count would turn
    every estimate into inf or nan), counts are whole, prices and choices finite and positive."""
    name = path.rsplit(".", 1)[-1].split("[")[0]
    if isinstance(item, Figure):
        if not (math.isfinite(item.value) and item.value > 0):
            raise ValueError(f"{path}: must be a positive number, got {item.value:g}")
        whole = name.startswith("num_") or name in _WHOLE
        if isinstance(item, CountFigure) and whole and item.value != int(item.value):
            raise ValueError(f"{path}: must be a whole number, got {item.value:g}")
        if name in _AT_LEAST_ONE and item.value < 1:
            raise ValueError(f"{path}: must be at least 1 (1 = non-blocking), got {item.value:g}")
    elif isinstance(item, Price):
        if item.usd_per_hour is not None and not math.isfinite(item.usd_per_hour):
            raise ValueError(f"{path}.usd_per_hour: must be a finite price, got {item.usd_per_hour!r}")
    elif isinstance(item, Choices):
        if not all(math.isfinite(v) and v > 0 for v in item.values):
            raise ValueError(f"{path}.values: must be positive finite numbers, got {list(item.values)!r}")
    elif isinstance(item, BaseModel):
        for field, value in item:
            _check_numbers(value, f"{path}.{field}" if path else field)
    elif isinstance(item, dict):
        for key, value in item.items():
            _check_numbers(value, f"{path}.{getattr(key, 'value', key)}")
    elif isinstance(item, tuple):
        for index, value in enumerate(item):
            _check_numbers(value, f"{path}[{index}]")


def require_basis(figure: Figure | None, basis: Basis, field: str) -> None:
    if figure is not None and figure.basis not in (None, basis):
        raise ValueError(f"{field} must be a {basis.value} figure, got basis {figure.basis.value!r}")


class Entry(Record):
    """Fields every catalog entry has."""

    kind: ClassVar[Kind]
    id: str = Field(description="Unique lowercase id, e.g. 'h100-sxm'.")
    name: str = Field(min_length=2, description="Human-readable name.")
    aliases: tuple[str, ...] = Field((), description="Other names that find this entry (case-insensitive).")
    description: str | None = Field(None, description="One sentence on what this is.")
    notes: tuple[str, ...] = Field((), description="Commonly quoted figures that differ from ours, and why.")
    preliminary: bool = Field(False, description="Announced, not yet shipped or measured figures.")

    @field_validator("id")
    @classmethod
    def _check_id(cls, value: str) -> str:
        if not _ID.match(value):
            raise ValueError("an id is lowercase letters, digits, '.', '_' and '-', starting with a letter or digit")
        return value

    @model_validator(mode="after")
    def _check_figures(self) -> Entry:
        _check_numbers(self, "")
        return self

    def figures(self) -> dict[str, Figure]:
        """Every top-level figure of the entry by field name (nested ones are reached by ``describe``)."""
        return {name: value for name, value in self if isinstance(value, Figure)}
