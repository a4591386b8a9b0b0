"""The hardware catalog: sourced figures in TOML, validated by a pydantic schema.

``Catalog`` and ``load_catalog`` load on first use (PEP 562), so importing a light submodule such as
``clustersim.catalog.kinds`` does not pull pydantic in through this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clustersim.catalog.registry import Catalog, load_catalog

__all__ = ["Catalog", "load_catalog"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("clustersim.catalog.registry"), name)
    globals()[name] = value
    return value
