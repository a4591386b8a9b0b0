"""One way to build a CollectiveTable: the analytic model and the flow simulator give the same columns."""

import numpy as np
import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network import Op, busbw_factor, fabric_for_instance, predict_collective
from clustersim.network.analytic import CollectiveTable, candidates, link_busbw_limit
from clustersim.network.flowsim.cost import SIM

CATALOG = load_catalog(use_env=False)
FABRIC = fabric_for_instance(CATALOG, "p5.48xlarge", 2)


@pytest.mark.parametrize("table", [predict_collective, SIM.table])
@pytest.mark.parametrize("bad", [-1.0, float("nan"), float("inf")])
def test_both_models_refuse_a_bad_size_naming_the_field(table, bad):
    with pytest.raises(ClusterSimError, match="finite and non-negative") as exc:
        table(Op.ALL_REDUCE, [1e6, bad], FABRIC)
    assert exc.value.field == "size"


def test_the_table_is_built_from_the_chosen_candidates():
    chosen = candidates(Op.ALL_REDUCE, FABRIC)[:2]
    sizes, time_s = np.array([1e6, 1e9]), np.array([1e-4, 1e-2])
    table = CollectiveTable.from_candidates(Op.ALL_REDUCE, FABRIC, sizes, time_s, chosen, note=", simulated")
    assert np.allclose(table.algbw_bytes_per_s, sizes / time_s)
    assert np.allclose(table.busbw_bytes_per_s, sizes / time_s * busbw_factor(Op.ALL_REDUCE, FABRIC.num_ranks))
    assert table.algorithm == [c.algorithm for c in chosen] and table.protocol == [c.protocol for c in chosen]
    assert table.bound == [f"{c.bound}, simulated" for c in chosen]
    limit = link_busbw_limit(Op.ALL_REDUCE, FABRIC)
    assert table.busbw_exceeds_links == [bool(b > limit) for b in table.busbw_bytes_per_s]
