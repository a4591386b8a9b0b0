"""DCQCN in steady state against the DCQCN paper's testbed (Zhu et al., SIGCOMM 2015, Figure 8: 4 senders into
one receiver at 40 Gbit/s each hold about 9.5 Gbit/s of the 10 Gbit/s fair share, near-equal; a secondary
reading of the plot, see benchmarks/transport_vs_published.py). With the paper's settings the simulator gives
9.76 Gbit/s a sender (+2.7%). The tolerance, 10%, is wider than the reading's few percent and than the gap
between the 4 KiB-MTU payload ceiling (9.80) and the published figure (+3.2%); it fails if DCQCN under-uses
the link (cuts that do not recover) or lets one sender take another's share."""

from __future__ import annotations

import pytest

from clustersim.errors import ClusterSimError
from clustersim.network.transport.lossless import LosslessSpec
from clustersim.network.transport.rc import RcParams
from clustersim.network.transport.steady_incast import steady_incast

PUBLISHED_BITS_PER_S = 9.5e9
LINE_BITS_PER_S = 40e9
PAYLOAD_SHARE = RcParams().payload_bytes / (RcParams().payload_bytes + RcParams().header_bytes)


def test_four_senders_hold_the_papers_share_each_and_fill_the_link():
    found = steady_incast(4, line_bits_per_s=LINE_BITS_PER_S, window_s=0.01)
    assert found.mean_bits_per_s == pytest.approx(PUBLISHED_BITS_PER_S, rel=0.10)
    assert found.jain >= 0.95  # near-equal, as the testbed's four
    # no more payload than the receiver's port carries, and DCQCN cut the rates (not PFC alone)
    assert sum(found.per_sender_bits_per_s) <= LINE_BITS_PER_S * PAYLOAD_SHARE * (1 + 1e-3)
    assert found.cuts > 0


def test_eight_senders_share_the_port_fully_and_fairly():
    found = steady_incast(8, line_bits_per_s=LINE_BITS_PER_S, window_s=0.01)
    used = sum(found.per_sender_bits_per_s) / (LINE_BITS_PER_S * PAYLOAD_SHARE)
    assert 0.9 <= used <= 1 + 1e-3 and found.jain >= 0.95
    assert found.fair_share_bits_per_s == LINE_BITS_PER_S / 8


def test_bad_settings_are_refused_by_name():
    with pytest.raises(ClusterSimError, match="senders 0 >= 1") as refused:
        steady_incast(0)
    assert refused.value.field == "senders"
    with pytest.raises(ClusterSimError, match=r"marking\.mode pfc") as refused:
        steady_incast(4, marking=LosslessSpec(mode="credit"))
    assert refused.value.field == "marking"
