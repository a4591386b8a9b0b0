"""The catalog's enumerated kinds and numeric formats, stdlib only.

They live apart from the schema so that the command line can offer them as choices without
loading pydantic and the catalog; ``clustersim.catalog.schema`` re-exports both.
"""

from __future__ import annotations

from enum import StrEnum


class Kind(StrEnum):
    """The kinds of catalog entry; each is a TOML array of tables of that name."""

    ACCELERATOR = "accelerator"
    LINK = "link"
    SWITCH = "switch"
    DOMAIN = "domain"
    NETWORK = "network"
    INSTANCE = "instance"
    STORAGE = "storage"
    CLUSTER = "cluster"


class Dtype(StrEnum):
    """Numeric formats with a tensor or vector throughput figure."""

    FP64 = "fp64"
    FP64_TENSOR = "fp64_tensor"
    FP32 = "fp32"
    TF32 = "tf32"
    BF16 = "bf16"
    FP16 = "fp16"
    FP8 = "fp8"
    INT8 = "int8"
    FP4 = "fp4"
    MXFP8 = "mxfp8"  # OCP microscaling FP8 (32-element blocks, E8M0 scale)
    MXFP4 = "mxfp4"  # OCP microscaling FP4
