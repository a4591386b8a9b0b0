"""The catalog's ``ib-rc`` and ``roce-v2`` entries describe RC as the packet simulator runs it (issue 23): lossless
links (credits for InfiniBand, PFC for RoCE), DCQCN on RoCE, selective repeat on current NICs with go-back-N for
older ones, and the local ACK timeout with NCCL's default; the numbers they quote are the simulator's."""

from __future__ import annotations

import re

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.network.transport.dcqcn import DcqcnParams
from clustersim.network.transport.lossless import LosslessSpec
from clustersim.network.transport.rc import IB_TIMEOUT_UNIT_S, NCCL_IB_TIMEOUT, RECOVERIES


def _entry(name: str):
    return load_catalog([]).get(name)


def _text(name: str) -> str:
    entry = _entry(name)
    return " ".join([entry.description, *(f.text for f in entry.facts)])


@pytest.mark.parametrize(("name", "links"), [("ib-rc", "credit-based"), ("roce-v2", "PFC")])
def test_each_entry_names_its_lossless_links_both_recoveries_and_ncclss_timeout(name: str, links: str):
    description = _entry(name).description
    assert links in description and "lossless" in description
    assert "selective repeat" in description and "go-back-N" in description  # RECOVERIES, both
    assert set(RECOVERIES) == {"selective", "go-back-n"}
    timeout_s = IB_TIMEOUT_UNIT_S * 2**NCCL_IB_TIMEOUT
    assert f"2^{NCCL_IB_TIMEOUT}" in description and f"{timeout_s:.1f} s" in description
    assert all(len(fact.source) > 10 for fact in _entry(name).facts)


def test_roce_names_dcqcn_and_its_constants_are_the_simulators():
    text = _text("roce-v2")
    assert "DCQCN" in _entry("roce-v2").description and "ECN" in _entry("roce-v2").description
    p, ecn = DcqcnParams(), LosslessSpec(mode="pfc", ecn=True)
    assert f"{round((1 - p.g) * 1024)}/1024 per {p.alpha_period_s * 1e6:g} us" in text
    assert f"initial alpha {round(p.initial_alpha * 1024)}/1024" in text
    assert f"timer {p.time_reset_s * 1e6:g} us" in text and f"{p.byte_reset_bytes // 64} x 64 B" in text
    assert f"AI {p.ai_bits_per_s / 1e6:g} Mbit/s" in text and f"HAI {p.hai_bits_per_s / 1e6:g} Mbit/s" in text
    assert f"one cut per {p.reduce_period_s * 1e6:g} us" in text
    kmin, kmax, pmax = (float(v) for v in re.search(r"Kmin (\d+) KB, Kmax (\d+) KB, Pmax (\d+)%", text).groups())
    assert (kmin * 1e3, kmax * 1e3, pmax / 100) == (ecn.kmin_bytes, ecn.kmax_bytes, ecn.pmax)


def test_go_back_n_is_never_given_as_rcs_only_recovery():
    """Every statement of an entry that names go-back-N says whose it is (the specification's, older NICs') or
    sets selective repeat beside it."""
    for name in ("ib-rc", "roce-v2"):
        entry = _entry(name)
        for text in (entry.description, *(f.text for f in entry.facts)):
            if "go-back-n" in text.lower() or "go back n" in text.lower():
                assert re.search(r"specification|older|selective", text), (name, text)
