"""How a quantized checkpoint stores its weights: the width of a layer weight, its group scales and zero
points (``Transformer.quantization``; serving holds and reads the weights at that width, ``clustersim.serving.memory``).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from clustersim.workload.moe import Count, Switch


class QuantMethod(StrEnum):
    """How a checkpoint's weights are stored below bf16: integer groups with a scale (GPTQ, AWQ,
    compressed-tensors' int formats), 8-bit floats (FP8 checkpoints) or OCP MXFP4 (gpt-oss's experts)."""

    GPTQ = "gptq"
    AWQ = "awq"
    COMPRESSED_TENSORS = "compressed-tensors"
    FP8 = "fp8"
    MXFP4 = "mxfp4"


class Quantization(BaseModel):
    """The stored width of a quantized checkpoint's layer weights (the matmul weights of the blocks, or with
    ``experts_only`` of the routed experts alone; embeddings, logits and norms stay 16-bit). A group of
    ``group_size`` weights shares one ``scale_bits``-wide scale (16: an fp16 or bf16 scale; 8: OCP MX's E8M0
    power of two) and, for asymmetric integer formats, a ``bits``-wide zero point; ``group_size`` 0 is one
    scale per output channel, counted as none."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: QuantMethod = Field(description="The quantization method (the config's quant_method).")
    bits: Count = Field(description="Stored bits per weight: 4 or 8.")
    group_size: Count = Field(default=0, ge=0, description="Weights sharing one scale; 0 = per channel.")
    zero_point: Switch = Field(default=True, description="A zero point per group (asymmetric integer formats).")
    scale_bits: Count = Field(default=16, description="Bits of each group's scale: 16, or 8 (E8M0, OCP MX).")
    experts_only: Switch = Field(
        default=False, description="Only the routed experts are stored so; attention, routers, shared experts 16-bit."
    )

    @model_validator(mode="after")
    def _bits(self) -> Self:
        if self.bits not in (4, 8):
            raise ValueError(f"quantization bits {self.bits} is not modelled (valid: 4, 8)")
        if self.scale_bits not in (8, 16):
            raise ValueError(f"quantization scale_bits {self.scale_bits} is not modelled (valid: 8, 16)")
        if self.method is QuantMethod.MXFP4 and (self.bits, self.group_size, self.scale_bits, self.zero_point) != (
            4, 32, 8, False
        ):  # fmt: skip
            raise ValueError("mxfp4 stores 4 bits a weight in groups of 32 with one 8-bit scale, no zero point")
        return self

    @property
    def bytes_per_weight(self) -> float:
        """Bytes one stored weight takes, its share of the group's scale and zero point included."""
        scale = self.scale_bits + (self.bits if self.zero_point else 0)
        return self.bits / 8 + (scale / 8 / self.group_size if self.group_size else 0.0)

    def describe(self) -> str:
        """E.g. ``4-bit gptq, groups of 128`` or ``4-bit mxfp4, groups of 32, routed experts only``."""
        groups = f", groups of {self.group_size}" if self.group_size else ""
        return f"{self.bits}-bit {self.method.value}{groups}" + (", routed experts only" if self.experts_only else "")


MXFP4_EXPERTS = Quantization(
    method=QuantMethod.MXFP4, bits=4, group_size=32, zero_point=False, scale_bits=8, experts_only=True
)
"""gpt-oss's release: the routed experts in MXFP4 (4.25 bits a weight), every other weight bf16 (its
quantization_config's modules_to_not_convert: attention, router, embedding, output layer)."""
