"""What the serving formats' and systems' survivors of mutation testing (`benchmarks/mutation.py serving_formats`)
left unpinned: a calibration's per-family tables refuse what is not a family, a format or a fraction in (0, 1] and
say which; an unknown format, attention data parallel without an exchange fabric and an exchange the system cannot
run are refused naming field and value; a replica's layout and exchange fabric follow its attention data parallel;
and its all-reduces are priced with the collective cost model it is given."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import numpy.typing as npt
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.catalog.schema import Dtype
from clustersim.errors import ClusterSimError
from clustersim.network.collectives import Op
from clustersim.network.cost import ANALYTIC, AnalyticCost
from clustersim.network.fabric import Fabric
from clustersim.serving.calibration import InferenceCalibration, default_calibration
from clustersim.serving.engine import serving_system_for_instance, step_times
from clustersim.serving.formats import parse_precision
from clustersim.serving.serving_system import ServingSystem
from clustersim.system import system_for_instance
from clustersim.workload.zoo import load_model

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
    # the experts' exchange runs over the stage's tp x attention_dp ranks, and only under attention data parallel
    assert (system.ep_fabric is None) == (attention_dp == 1)
    if system.ep_fabric is not None:
        assert system.ep_fabric == system.system.group_fabric(4 * attention_dp, 1)


def test_an_unknown_serving_format_is_refused_naming_its_field_and_value() -> None:
    with pytest.raises(ClusterSimError) as caught:
        parse_precision("int4", "kv_precision")
    assert (caught.value.field, caught.value.value) == ("kv_precision", "int4")
    assert str(caught.value) == "kv_precision: unknown value 'int4' (valid: bf16, fp16, fp8, nvfp4, mxfp4)"


@dataclasses.dataclass(frozen=True)
class _DoubledCost(AnalyticCost):
    """The analytic collective model at twice its times: a cost model a caller passes in."""

    name: str = "doubled"

    def time_s(self, op: Op, size_bytes: npt.ArrayLike, fabric: Fabric) -> npt.NDArray[np.float64]:
        return 2.0 * super().time_s(op, size_bytes, fabric)


def test_a_serving_system_prices_its_all_reduces_with_the_cost_model_it_is_given() -> None:
    base = system_for_instance(load_catalog(), "p5.48xlarge", 1)
    model = load_model("llama3.1-70b", use_env=False)
    steps = {}
    for cost in (ANALYTIC, _DoubledCost()):
        system = ServingSystem.on(base, "p5.48xlarge", tp=4, cost=cost)
        assert system.cost is cost
        steps[cost.name] = step_times(
            model,
            system,
            Dtype.BF16,
            Dtype.BF16,
            decode_sequences=8.0,
            decode_context_tokens=1000.0,
            prefill_tokens=0.0,
            prefill_sequences=0.0,
            prompt_tokens=1000.0,
        )
    fabric = ServingSystem.on(base, "p5.48xlarge", tp=4).tp_fabric
    assert fabric is not None
    payload = 8.0 * model.hidden * 2.0  # the step's 8 tokens' activations in 16 bits
    (once,) = ANALYTIC.time_s(Op.ALL_REDUCE, [payload], fabric)
    added = float(steps["doubled"].communication_s - steps["analytic"].communication_s)
    assert added == pytest.approx(2.0 * model.layers * float(once), rel=1e-9)  # two all-reduces a layer, each twice


def test_a_serving_system_with_attention_data_parallel_needs_a_fabric_for_its_experts_exchange() -> None:
    base = system_for_instance(load_catalog(), "p6-b200.48xlarge", 1)
    fabric = base.group_fabric(4, 1)
    with pytest.raises(ClusterSimError, match=r"^attention_dp 2 needs a fabric for its experts' exchange$"):
        ServingSystem("b200", base, tp=2, tp_fabric=fabric, attention_dp=2)
    assert ServingSystem("b200", base, tp=2, tp_fabric=fabric, attention_dp=2, ep_fabric=fabric).attention_dp == 2


@pytest.mark.parametrize(("exchange", "attention_dp"), [("scatter", 2), ("alltoall", 1)])
def test_an_experts_exchange_is_refused_naming_its_field_and_value(exchange: str, attention_dp: int) -> None:
    base = system_for_instance(load_catalog(), "p6-b200.48xlarge", 1)
    fabric = base.group_fabric(2 * attention_dp, 1)
    with pytest.raises(ClusterSimError) as caught:
        ServingSystem(
            "b200",
            base,
            tp=2,
            tp_fabric=fabric,
            attention_dp=attention_dp,
            ep_fabric=fabric,
            moe_exchange=exchange,  # type: ignore[arg-type]
        )
    assert (caught.value.field, caught.value.value) == ("moe_exchange", exchange)
    assert str(caught.value).startswith(f"moe_exchange: {exchange!r} (valid: ")
