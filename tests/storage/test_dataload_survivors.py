"""Data loading at its edges: the uint16 vocabulary boundary, the positivity guard and its message, and the
clients' bound where an instance's own NICs cap the FSx client ceiling."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import load_catalog
from clustersim.errors import ClusterSimError
from clustersim.storage.dataload import UINT16_VOCAB_LIMIT, bytes_per_token, data_loading
from clustersim.storage.fsx import ClientPath, file_system

CATALOG = load_catalog(use_env=False)
P4D = CATALOG.instance("p4d.24xlarge")  # 400 Gbps of NICs: under the 1,200 Gbps EFA + GDS client ceiling
FS = file_system(CATALOG, "PERSISTENT_2-1000", "100800GiB", efa=True)  # 100.8 GB/s uncached read baseline
EXAMPLES = settings(max_examples=50, deadline=None, derandomize=True)  # the same draws on every run


def test_megatron_stores_ids_in_16_bits_below_65500_ids_only():
    """Megatron-Core's DType.optimal_dtype: uint16 for fewer than 65,500 ids, int32 from 65,500 on, so the
    vocabularies between 65,500 and 2**16 ids take 4 bytes a token although their ids would fit 16 bits."""
    assert UINT16_VOCAB_LIMIT == 65_500
    assert bytes_per_token(65_499) == 2.0
    assert bytes_per_token(65_500) == bytes_per_token(65_536) == 4.0
    assert bytes_per_token(32_000) == 2.0  # Llama 2
    assert bytes_per_token(128_256) == 4.0  # Llama 3


@EXAMPLES
@given(vocab=st.integers(1, 2**31))
def test_token_width_follows_megatrons_rule(vocab):
    """Two bytes a token below 65,500 ids, four from there on."""
    assert bytes_per_token(vocab) == (2.0 if vocab < 65_500 else 4.0)


def load(tokens_per_s, token_bytes, num_nodes=1, instance=P4D, path=ClientPath.EFA_GDS):
    return data_loading(
        FS, tokens_per_s=tokens_per_s, token_bytes=token_bytes, num_nodes=num_nodes, path=path, instance=instance
    )


@pytest.mark.parametrize(
    ("tokens_per_s", "token_bytes"), [(0, 4), (0.0, 2.0), (-1e6, 4), (2e6, 0), (2e6, 0.0), (2e6, -2), (0, 0)]
)
def test_a_rate_or_width_that_is_not_positive_is_refused_naming_it(tokens_per_s, token_bytes):
    """Zero or negative tokens/s or bytes/token (zero included: the guard is strict) is a user error that
    names the first field at fault and its value."""
    with pytest.raises(ClusterSimError) as caught:
        load(tokens_per_s, token_bytes)
    name, value = ("tokens_per_s", tokens_per_s) if not tokens_per_s > 0 else ("token_bytes", token_bytes)
    assert str(caught.value) == f"{name}: must be a positive number, got {value!r}"
    assert caught.value.field == name and caught.value.value == value


def test_a_rate_that_is_not_a_number_is_refused():
    """NaN compares false to everything: the guard reads 'not > 0', so NaN is refused, not passed on."""
    with pytest.raises(ClusterSimError, match="tokens_per_s: must be a positive number, got nan"):
        load(float("nan"), 4.0)


@EXAMPLES
@given(tokens_per_s=st.floats(-1e9, 0.0), token_bytes=st.sampled_from([1.0, 2.0, 4.0]))
def test_no_tokens_per_second_is_refused_whatever_the_width(tokens_per_s, token_bytes):
    """A positive width does not rescue a rate of zero or less."""
    with pytest.raises(ClusterSimError, match="tokens_per_s: must be a positive number"):
        load(tokens_per_s, token_bytes)


def test_any_positive_rate_and_width_is_accepted_even_below_one():
    """The guard is > 0, not >= 1: half a token per second of 1-byte tokens needs 0.5 B/s."""
    trickle = load(0.5, 1.0)
    assert trickle.need_bytes_per_s == 0.5
    one = load(1.0, 1.0)
    assert one.need_bytes_per_s == 1.0
    assert one.headroom == one.supply_bytes_per_s  # supply over a need of 1 B/s


def test_the_instance_nics_cap_the_clients_bound():
    """p4d on EFA + GDS: min(1,200 Gbps, 400 Gbps) / 8 = 50 GB/s a node, under the 100.8 GB/s file system."""
    one = load(2e6, 4.0)
    assert one.supply.bounds_bytes_per_s == {"clients": 50e9, "file system": FS.read_bytes_per_s}
    assert FS.read_bytes_per_s == pytest.approx(100.8e9)
    assert one.supply.bound == "clients" and one.supply_bytes_per_s == 50e9
    assert one.headroom == 50e9 / 8e6  # need: 2e6 tokens/s x 4 B
    # Two nodes (100 GB/s) still bind on their clients; three (150 GB/s) pass the file system's 100.8 GB/s.
    assert load(2e6, 4.0, num_nodes=2).supply.bound == "clients"
    three = load(2e6, 4.0, num_nodes=3)
    assert three.supply.bound == "file system" and three.supply_bytes_per_s == FS.read_bytes_per_s


def test_without_an_instance_the_client_ceiling_is_the_service_figure():
    """No instance: one client reads at the full 1,200 Gbps = 150 GB/s, so the file system binds."""
    free = load(2e6, 4.0, instance=None)
    assert free.supply.bounds_bytes_per_s["clients"] == 150e9
    assert free.supply.bound == "file system"


@EXAMPLES
@given(
    tokens_per_s=st.floats(1.0, 1e9),
    token_bytes=st.sampled_from([1.0, 2.0, 4.0]),
    num_nodes=st.integers(1, 64),
    path=st.sampled_from(list(ClientPath)),
)
def test_supply_is_the_lower_bound_and_headroom_its_ratio_to_need(tokens_per_s, token_bytes, num_nodes, path):
    """Need = tokens/s x bytes/token; supply = min(nodes x client ceiling, read baseline); headroom = supply/need."""
    loading = load(tokens_per_s, token_bytes, num_nodes=num_nodes, path=path)
    clients = num_nodes * FS.client_bytes_per_s(path, P4D)
    assert loading.need_bytes_per_s == tokens_per_s * token_bytes
    assert loading.supply.bounds_bytes_per_s == {"clients": clients, "file system": FS.read_bytes_per_s}
    assert loading.supply_bytes_per_s == min(clients, FS.read_bytes_per_s)
    assert loading.supply.bound == ("clients" if clients <= FS.read_bytes_per_s else "file system")
    assert loading.headroom == pytest.approx(loading.supply_bytes_per_s / loading.need_bytes_per_s)
