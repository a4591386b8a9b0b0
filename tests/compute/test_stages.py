"""Pipeline stages: the layers each rank holds, a stated last stage, and which rank sets the pace.

Megatron-Bridge's DeepSeek-V3 layouts give the last rank three decoder layers fewer than the others for its MTP
block and the loss (@v0.6.0 src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py, and the perf recipes'
'Et*4|(t*4|)*14tmL'): 13 of 61 at PP 4 x VP 4, 29 at PP 2 x VP 8, 5 at PP 8 x VP 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.compute.stages import slowest_stage, stage_layers, stage_split
from clustersim.errors import ClusterSimError
from clustersim.execution import Layout, LayoutArrays
from clustersim.validation.cases import project_dir, read_cases
from clustersim.validation.training import case_setup
from clustersim.workload.zoo import load_model

DSV3 = load_model("deepseek-v3", use_env=False)
CATALOG = load_catalog(use_env=False)


def arrays(**layout) -> LayoutArrays:
    return LayoutArrays.of([Layout(uneven_stages=True, **layout)])


def split(model, **layout) -> tuple[float, float]:
    others, last = stage_split(model, arrays(**layout))
    return float(others[0]), float(last[0])


def test_an_even_split_gives_every_rank_the_same_layers_and_the_last_the_head():
    assert DSV3.layers == 61 and DSV3.mtp_layers == 1
    assert split(DSV3, pp=4, vp=4) == (16.0, 16.0)  # ceil(62 / 16) per chunk, the MTP block as a layer
    layers, on_last, before = slowest_stage(DSV3, arrays(pp=4, vp=4), np.array([1.0]), np.array([0.0]))
    assert (layers[0], on_last[0], before[0]) == (16.0, 1.0, 16.0)


@pytest.mark.parametrize(
    ("pp", "vp", "last", "others"),
    [(4, 4, 13, 16), (2, 8, 29, 32), (8, 1, 5, 8), (8, 2, 5, 4 * 2)],
)
def test_megatron_bridge_deepseek_layouts_leave_the_others_their_even_share(pp, vp, last, others):
    assert split(DSV3, pp=pp, vp=vp, last_stage_layers=last) == (others, last + 1)  # the MTP block beside them
    assert stage_layers(DSV3, arrays(pp=pp, vp=vp, last_stage_layers=last))[0] == others


def test_the_slower_rank_sets_the_pace_and_only_the_last_runs_the_head():
    lay = arrays(pp=4, vp=4, last_stage_layers=13)  # 16 layers before the last, 13 + MTP on it
    one_layer = np.array([1.0])
    for head, expected in ((1.0, (16.0, 0.0)), (2.0, (14.0, 1.0)), (5.0, (14.0, 1.0))):
        layers, on_last, before = slowest_stage(DSV3, lay, one_layer, np.array([head]))
        assert (layers[0], on_last[0], before[0]) == (*expected, 16.0)


@given(
    layers=st.integers(2, 200),
    pp=st.integers(2, 16),
    vp=st.integers(1, 8),
    last=st.integers(1, 200),
)
def test_a_stated_last_stage_leaves_room_for_every_layer_and_no_more_than_a_chunk_of_slack(layers, pp, vp, last):
    model = DSV3.model_copy(update={"layers": layers, "mtp_layers": 0, "dense_layers": 0})
    if last > layers - (pp - 1):  # the layout rule: every other rank keeps a layer
        with pytest.raises(ClusterSimError, match="last_stage_layers"):
            Layout(pp=pp, vp=vp, dp=1, last_stage_layers=last).check(
                model, num_devices=pp, global_batch=1, seq_len=4096
            )
        return
    others, on_last = split(model, pp=pp, vp=vp, last_stage_layers=last)
    assert on_last == last
    assert others * (pp - 1) >= layers - last  # the other ranks hold the rest
    assert (others - vp) * (pp - 1) < layers - last  # whole layers per chunk, rounded up once
    assert others <= layers - last


def test_a_last_stage_needs_a_pipeline_and_round_trips_through_the_arrays():
    layout = Layout(pp=4, vp=4, dp=64, ep=64, last_stage_layers=13, uneven_stages=True)
    assert LayoutArrays.of([layout]).layout(0) == layout
    assert "last stage 13 layers" in layout.describe()
    with pytest.raises(ClusterSimError, match=r"last_stage_layers 2 needs pipeline parallelism \(pp > 1\)") as e:
        Layout(dp=8, last_stage_layers=2).check(DSV3, num_devices=8, global_batch=8, seq_len=4096)
    assert e.value.field == "last_stage_layers" and "\n" not in str(e.value)


def test_the_deepseek_cases_carry_their_recipes_last_stage_into_the_layout():
    cases = {c.id: c for c in read_cases(project_dir() / "training.jsonl")}
    for case_id, last in (
        ("mbridge2608_deepseek-v3_gb200_256gpu_pp4_vp4_ep64_mxfp8", 13),
        ("mbridge2608_deepseek-v3_gb300_256gpu_pp2_vp8_ep32_mxfp8", 29),
        ("mbridge2606_deepseek-v3_b300_256gpu_pp8_ep8_mxfp8", 5),
    ):
        assert case_setup(cases[case_id], CATALOG).layout.last_stage_layers == last


def test_a_stated_split_needs_no_uneven_flag_and_the_search_splits_evenly():
    layout = Layout(pp=4, vp=4, dp=64, ep=64, last_stage_layers=13)  # 61 layers do not divide by 16
    layout.check(DSV3, num_devices=256, global_batch=4096, seq_len=4096)
    with pytest.raises(ClusterSimError, match="layers 61 must divide by pp\\*vp = 16"):
        Layout(pp=4, vp=4, dp=64, ep=64).check(DSV3, num_devices=256, global_batch=4096, seq_len=4096)
