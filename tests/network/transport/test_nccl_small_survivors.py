"""Tests that kill what mutation testing of ``nccl_small`` left alive (benchmarks/mutation.py).

``published_cases`` is cached and first called while the tests are collected, so no test body reached
it: here it is read afresh and checked field by field against the TOML it comes from."""

import tomllib
from importlib import resources

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.network.transport import nccl_small
from clustersim.network.transport.nccl_small import (
    BASE_LATENCY_S,
    PUBLISHED_FILE,
    SIMPLE_FLUSH_S,
    Fabric,
    best,
    estimate,
    instance_fabric,
    published_case,
    published_cases,
)


def _raw_cases() -> list[dict]:
    text = resources.files(nccl_small.__package__).joinpath(PUBLISHED_FILE).read_text(encoding="utf-8")
    return tomllib.loads(text)["case"]


def test_a_fresh_read_of_the_published_table_keeps_every_field_in_its_unit():
    published_cases.cache_clear()
    cases = published_cases()
    raw = _raw_cases()
    assert len(cases) == len(raw) >= 10
    for case, entry in zip(cases, raw, strict=True):
        assert (case.id, case.instance, case.num_nodes, case.collective) == (
            entry["id"],
            entry["instance"],
            entry["nodes"],
            entry["collective"],
        )
        assert case.message_bytes == entry["message_bytes"] and case.source == entry["source"]
        assert case.time_s == pytest.approx(entry["time_us"] * 1e-6, rel=1e-15)  # microseconds to seconds
        assert case.in_scope is entry["in_scope"] and case.note == entry.get("note", "")
    fitted = cases[0]
    assert (fitted.id, fitted.num_nodes, fitted.message_bytes, fitted.time_s) == ("awsome_p5_2n_8B", 2, 8, 69.12e-6)
    assert fitted.in_scope and fitted.note.startswith("in sample")
    assert cases[1].note == ""  # a case without a note reads as an empty one
    assert {c.in_scope for c in cases} == {True, False}  # the table lists what the model misses too


def test_published_case_finds_exactly_the_key_and_nothing_else():
    case = published_case("p5.48xlarge", 2, "all_reduce", 1024)
    assert case is not None and case.id == "awsome_p5_2n_1KiB"
    assert published_case("p5.48xlarge", 2, "all_reduce", 1023) is None
    assert published_case("p5.48xlarge", 2, "all_gather", 1024) is None


CATALOG = load_catalog(use_env=False)
P5_2 = instance_fabric(CATALOG.instance("p5.48xlarge"), 2)


def test_ring_ll_raises_the_thread_threshold_by_the_rank_count_and_no_other_pair_does():
    # 16 ranks: ring LL opens a channel per 512 threads x 8 B x 16 = 64 KiB; tree LL per 4 KiB, LL128 per 5 KiB.
    ring_ll = [estimate(P5_2, "all_reduce", s, "ring", "LL").num_channels for s in (65536, 65537, 8 * 65536 + 1)]
    assert ring_ll == [1, 2, 9]
    assert estimate(P5_2, "all_reduce", 65536, "tree", "LL").num_channels == 16
    assert estimate(P5_2, "all_reduce", 65536, "ring", "LL128").num_channels == 13  # ceil(65536 / 5120)
    assert estimate(P5_2, "all_reduce", 65536, "ring", "Simple").num_channels == 2  # ceil(65536 / 32768)


@pytest.mark.parametrize(
    ("call", "field", "value", "start"),
    [
        (lambda: estimate(P5_2, "all_gather", 8, "tree", "LL"), "algorithm", "tree", "algorithm: NCCL all-gather"),
        (lambda: estimate(P5_2, "all_reduce", 0, "ring", "LL"), "message_bytes", 0, "message_bytes: 0 must"),
        (lambda: estimate(P5_2, "all_reduce", 2.5, "ring", "LL"), "message_bytes", 2.5, "message_bytes: 2.5 must"),
        (lambda: best(P5_2, "all_reduce", 8, algorithm="nvls"), "algorithm", "nvls", "algorithm: 'nvls' is not"),
        (lambda: best(P5_2, "all_reduce", 8, protocol="ll"), "protocol", "ll", "protocol: 'll' is not"),
        (lambda: best(P5_2, "alltoall", 8), "collective", "alltoall", "collective: 'alltoall' is not"),
        (lambda: Fabric(0, 8, P5_2.net_path, 20e9, 8, 4), "num_nodes", 0, "num_nodes: 0 must be a whole number"),
        (lambda: Fabric(2, 8, P5_2.net_path, 20e9, 8, 0), "num_nics", 0, "num_nics: 0 must be a whole number"),
        (lambda: Fabric(1, 1, P5_2.net_path, 20e9, 8, 4), "num_nodes", 1, "num_nodes: a collective needs at least 2"),
        (
            lambda: instance_fabric(CATALOG.instance("p5.48xlarge"), 2, path="tcp-ena"),
            "path",
            "tcp-ena",
            "path: 'tcp-ena' is not an EFA path p5.48xlarge has in the catalog (valid: efa-host, efa-gdr)",
        ),
        (
            lambda: instance_fabric(CATALOG.instance("trn1.32xlarge"), 2),
            "instance",
            "trn1.32xlarge",
            "instance: trn1.32xlarge has trainium1, not an NVLink GPU this model covers"
            " (valid: a100, b200, b300, h100, h200)",
        ),
    ],
)
def test_refusals_name_the_field_and_the_value(call, field, value, start):
    with pytest.raises(ClusterSimError) as err:
        call()
    assert (err.value.field, err.value.value) == (field, value)
    assert str(err.value).startswith(start)


def test_only_simple_pays_the_completion_flush_on_each_network_hop():
    path = P5_2.net_path
    simple = estimate(P5_2, "all_reduce", 8, "tree", "Simple").hops[2]
    assert (simple.count, simple.each_s) == (2, pytest.approx(path.one_way_s(8) + SIMPLE_FLUSH_S, rel=1e-12))
    ll128 = estimate(P5_2, "all_reduce", 120, "tree", "LL128").hops[2]
    assert ll128.each_s == pytest.approx(path.one_way_s(128), rel=1e-12)  # 120 payload bytes in 128 on the wire


def test_a_ring_ll_streams_its_pieces_in_wire_bytes_at_one_nics_rate():
    # 1 MiB ring LL on 16 ranks: 16 channels (64 KiB each), 4 KiB a step, 8 KiB of LL lines on the wire;
    # 2 x 15 pieces cross the busiest link. 32 NICs for 16 channels: a NIC each, never two NICs' worth.
    ring = estimate(P5_2, "all_reduce", 1 << 20, "ring", "LL")
    assert (ring.num_channels, ring.chunk_bytes) == (16, 4096)
    rate = P5_2.net_path.ceiling_bytes_per_s
    assert rate < P5_2.nvlink_channel_bytes_per_s < 2 * rate
    busiest = next(h for h in ring.hops if h.name.startswith("busiest link"))
    assert busiest.each_s == pytest.approx((30 * 8192 - 8192) / rate, rel=1e-12)


def test_the_breakdown_names_each_kind_of_hop():
    hops = estimate(P5_2, "all_reduce", 8, "tree", "LL").hops
    assert [h.name for h in hops] == [
        "NVLink hops",
        "NVLink fill (one piece)",
        "network hops (efa-gdr)",
        "copies into GPU memory",
        "proxy: the other operations",
        "busiest link: the other pieces",
    ]


def test_two_ranks_are_enough_for_a_collective():
    pair = Fabric(1, 2, P5_2.net_path, 20.6e9, 8, 4)  # one node of 2 GPUs: NVLink only
    ring = estimate(pair, "all_reduce", 8, "ring", "LL")
    assert [h.count for h in ring.hops][:3] == [2, 1, 0] and ring.launch_s == BASE_LATENCY_S["ring", "LL"]
