"""The max-min solver's pruning and level-by-level filling, pinned where the flowsim_solver mutation run found them
unpinned (benchmarks/mutation.py): the flows connected to a change found exactly (through shared resources, not
through a table's padding, the scratch left clean for the next call, every flow once the search runs past its
depth), and level-by-level filling's rates and round count."""

from __future__ import annotations

import numpy as np
import pytest

from clustersim.network.flowsim.filling import level_rounds
from clustersim.network.flowsim.solver import PRUNE_DEPTH, MaxMinState, prepare

# Five flows over six resources: 0-1 and 1-2 chain through resource 1, 2-3 and 3-4 through 3, flow 4 alone on 5.
# Flows 2 and 4 cross one resource, the others two, so a slot x flow table pads their second slot.
FLOWS = np.array([0, 0, 1, 1, 2, 3, 3, 4])
RESOURCES = np.array([0, 1, 1, 2, 3, 3, 4, 5])


def _state(table: bool) -> MaxMinState:
    p = prepare(FLOWS, RESOURCES, np.ones(FLOWS.size), 5, 6, table=table)
    assert p.has_table == table
    return MaxMinState(p, np.ones(6))


@pytest.mark.parametrize("table", [True, False])
def test_the_flows_connected_to_a_change_are_exactly_its_component(table: bool):
    state, every = _state(table), np.arange(5)
    assert state._connected(every, np.array([0])).tolist() == [0, 1]  # 0 reaches 1 through resource 1, in two steps
    assert state._connected(every, np.array([4])).tolist() == [2, 3]
    assert state._connected(every, np.array([5])).tolist() == [4]  # alone: the padding joins it to nothing
    assert state._connected(np.array([1, 4]), np.array([2])).tolist() == [1]  # only among the flows asked about
    assert not state._mark.any()  # the scratch is clean between calls


def test_a_search_past_its_depth_takes_every_flow():
    """A chain of PRUNE_DEPTH + 2 flows, each sharing a resource with the next, and one flow apart: the search from
    the chain's first resource stops after PRUNE_DEPTH steps and returns them all, the one apart too."""
    n = PRUNE_DEPTH + 2
    flows = np.concatenate([np.repeat(np.arange(n), 2), [n]])
    resources = np.concatenate([np.stack([np.arange(n), np.arange(n) + 1], axis=1).reshape(-1), [n + 1]])
    state = MaxMinState(prepare(flows, resources, np.ones(flows.size), n + 1, n + 2), np.ones(n + 2))
    assert state._connected(np.arange(n + 1), np.array([0])).tolist() == list(range(n + 1))
    short = np.arange(PRUNE_DEPTH - 1)  # within the depth: the search ends by itself, the flow apart is not taken
    assert state._connected(np.append(short, n), np.array([0])).tolist() == short.tolist()


def test_level_by_level_filling_takes_a_round_per_level():
    """Three flows alone on resources of 1, 2 and 3 units freeze at three levels, one round each; two flows sharing a
    resource of 2 freeze together at 1, and the second's other resource (10) then has no flow left growing."""
    p = prepare(np.arange(3), np.arange(3), np.ones(3), 3, 3)
    rate, remaining = np.zeros(3), np.array([1.0, 2.0, 3.0])
    by_flow, by_res = (p.flow, p.resource, p.weight, p.flow_ptr), (p.res_ptr, p.res_order)
    assert level_rounds(by_flow, by_res, remaining, remaining.copy(), np.arange(3), rate, 0.0, 5) == 8
    assert rate.tolist() == [1.0, 2.0, 3.0]
    p = prepare(np.array([0, 1, 1]), np.array([0, 0, 1]), np.ones(3), 2, 2)
    rate, remaining = np.zeros(2), np.array([2.0, 10.0])
    by_flow, by_res = (p.flow, p.resource, p.weight, p.flow_ptr), (p.res_ptr, p.res_order)
    assert level_rounds(by_flow, by_res, remaining, remaining.copy(), np.arange(2), rate, 0.5, 0) == 1
    assert rate.tolist() == [1.5, 1.5]  # from the base of 0.5
