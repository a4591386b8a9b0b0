"""What the serving formats' and systems' survivors of mutation testing (`benchmarks/mutation.py serving_formats`)
left unpinned: a calibration's per-family tables refuse what is not a family, a format or a fraction in (0, 1] and
say which, and a replica's layout names its attention data parallel only where it has one."""

from __future__ import annotations

import dataclasses
import re

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.serving.calibration import InferenceCalibration, default_calibration
from clustersim.serving.engine import serving_system_for_instance
from clustersim.serving.formats import parse_precision

FIELDS = dataclasses.asdict(default_calibration())


def _calibration(**tables: object) -> InferenceCalibration:
    return InferenceCalibration(**{**FIELDS, **tables})


def test_a_format_fraction_key_splits_at_its_first_dot() -> None:
    with pytest.raises(ValueError, match=r"key 'blackwell\.ultra\.fp4' is not 'family\.format'"):
        _calibration(family_flop_efficiency={"blackwell.ultra.fp4": 0.4})


@pytest.mark.parametrize("table", ["family_flop_efficiency", "decode_attention_hbm_efficiency"])
def test_a_fraction_of_one_is_kept_and_zero_or_more_than_one_is_refused(table: str) -> None:
    key = "blackwell.fp4" if table == "family_flop_efficiency" else "blackwell"
    assert dict(getattr(_calibration(**{table: {key: 1.0}}), table)) == {key: 1.0}
    for fraction in (0.0, 1.5):
        with pytest.raises(ValueError, match=rf"{key}: {fraction} is not a fraction in \(0, 1\]"):
            _calibration(**{table: {key: fraction}})


@pytest.mark.parametrize("family", ["Blackwell", "black.well", " blackwell", ""])
def test_a_family_table_takes_lower_case_family_names_without_a_dot(family: str) -> None:
    why = f"{family!r} is not an accelerator family in lower case (e.g. 'blackwell')"
    with pytest.raises(ValueError, match=re.escape(why)):
        _calibration(decode_attention_hbm_efficiency={family: 0.5})
    assert dict(_calibration(decode_attention_hbm_efficiency={"blackwell": 0.5}).decode_attention_hbm_efficiency) == {
        "blackwell": 0.5
    }


@pytest.mark.parametrize(("attention_dp", "layout"), [(1, "tp 4 x pp 1"), (2, "tp 4 x pp 1 x attention dp 2")])
def test_a_layout_names_its_attention_data_parallel_only_where_it_has_one(attention_dp: int, layout: str) -> None:
    system = serving_system_for_instance(load_catalog(), "p6-b200.48xlarge", tp=4, attention_dp=attention_dp)
    assert system.layout == layout


def test_an_unknown_serving_format_is_refused_naming_its_field_and_value() -> None:
    with pytest.raises(ClusterSimError) as caught:
        parse_precision("int4", "kv_precision")
    assert (caught.value.field, caught.value.value) == ("kv_precision", "int4")
    assert str(caught.value) == "kv_precision: unknown value 'int4' (valid: bf16, fp16, fp8, nvfp4, mxfp4)"
