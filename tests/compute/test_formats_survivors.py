"""Number formats pinned where mutation testing found them loose (``benchmarks/mutation.py`` group ``formats``): a
block-scaled element's bits with its share of the scale, the output head's format, the refusals' fields and values,
the tensorwise recipe's zero surcharge, and a quantized checkpoint's refusals and description."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.compute.precision import (
    TrainingFormat,
    bits_per_element,
    check_training_format,
    head_precision,
    parse_training_format,
    training_dtype,
)
from clustersim.errors import ClusterSimError
from clustersim.workload.float8 import Float8Recipe, scaled_gemm_surcharge
from clustersim.workload.quantization import Quantization, QuantMethod

CATALOG = load_catalog(use_env=False)


@pytest.mark.parametrize(("fmt", "bits"), [("mxfp8", 8 + 8 / 32), ("nvfp4", 4 + 8 / 16), ("mxfp4", 4 + 8 / 32)])
def test_a_block_scaled_element_carries_its_share_of_the_blocks_scale(fmt, bits):
    assert bits_per_element(fmt) == bits


@pytest.mark.parametrize(
    ("dtype", "quantized", "head"),
    [
        (Dtype.FP8, True, Dtype.FP8),
        (Dtype.FP8, False, Dtype.BF16),
        (Dtype.FP4, False, Dtype.BF16),
        (Dtype.BF16, False, Dtype.BF16),
        (Dtype.FP16, False, Dtype.FP16),
        (Dtype.FP16, True, Dtype.FP16),
    ],
)
def test_the_head_keeps_the_jobs_format_only_where_the_software_quantizes_it(dtype, quantized, head):
    assert head_precision(dtype, quantized=quantized) is head


def test_refusals_name_the_field_and_the_value_given():
    with pytest.raises(ClusterSimError) as caught:
        parse_training_format("fp6")
    assert (caught.value.field, caught.value.value) == ("precision", "fp6")
    with pytest.raises(ClusterSimError) as caught:
        parse_training_format(" FP4 ")
    assert (caught.value.field, caught.value.value) == ("precision", " FP4 ")
    assert "(valid: bf16, fp16, fp8, mxfp8, nvfp4, mxfp4)" in str(caught.value)
    h100 = CATALOG.accelerator("h100-sxm")
    with pytest.raises(ClusterSimError) as caught:
        check_training_format(TrainingFormat.NVFP4, h100)
    assert (caught.value.field, caught.value.value) == ("precision", "nvfp4")
    with pytest.raises(ClusterSimError) as caught:
        training_dtype("mxfp8", h100, "job.precision")
    assert caught.value.field == "job.precision" and str(caught.value).startswith("job.precision: mxfp8 GEMMs need")
    with pytest.raises(ClusterSimError) as caught:
        training_dtype("int3", h100, "job.precision")
    assert caught.value.field == "job.precision" and str(caught.value).startswith("job.precision: unknown precision")


def test_tensorwise_scaling_adds_no_gemm_time():
    assert scaled_gemm_surcharge(Float8Recipe.TENSORWISE) == (0.0, 0.0)
    forward, backward = scaled_gemm_surcharge(Float8Recipe.ROWWISE)
    assert forward > 0 and backward == 0.0
    assert scaled_gemm_surcharge(Float8Recipe.ROWWISE_WITH_GW_HP)[1] > 0


def test_a_quantization_it_does_not_model_is_refused_with_its_reason():
    with pytest.raises(ValidationError, match=r"quantization bits 3 is not modelled \(valid: 4, 8\)"):
        Quantization(method=QuantMethod.GPTQ, bits=3, group_size=128)
    with pytest.raises(ValidationError, match="mxfp4 stores 4 bits a weight in groups of 32 with one 8-bit scale"):
        Quantization(method=QuantMethod.MXFP4, bits=4, group_size=64, zero_point=False, scale_bits=8)


def test_a_quantization_describes_its_groups_only_where_it_has_them():
    grouped = Quantization(method=QuantMethod.GPTQ, bits=4, group_size=128)
    assert grouped.describe() == "4-bit gptq, groups of 128"
    per_channel = Quantization(method=QuantMethod.AWQ, bits=4, group_size=0)
    assert per_channel.describe() == "4-bit awq"
