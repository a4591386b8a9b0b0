"""The hardware catalog: sourced figures in TOML, validated by a pydantic schema."""

from clustersim.catalog.registry import Catalog, load_catalog

__all__ = ["Catalog", "load_catalog"]
