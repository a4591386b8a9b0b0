"""Registry: loading, lookup by id and alias, user overrides, and errors on bad files."""

import contextlib
import tomllib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clustersim.catalog.registry import ENV_VAR, build_catalog, load_catalog, normalize
from clustersim.errors import CatalogFileError, ClusterSimError, UnknownNameError


@pytest.fixture(scope="module")
def catalog():
    return load_catalog(use_env=False)


@pytest.mark.parametrize("name", ["H100", "h100-sxm", "H100 SXM5", "h100_sxm", "  H100-SXM "])
def test_aliases_find_the_same_entry(catalog, name):
    assert catalog.get(name).id == "h100-sxm"


def test_normalize():
    assert normalize(" H100  SXM5 ") == "h100-sxm5"
    assert normalize("h100_sxm") == "h100-sxm"


def test_unknown_id_suggests_close_matches(catalog):
    with pytest.raises(UnknownNameError) as info:
        catalog.get("h100-sxn")
    assert "h100-sxm" in info.value.suggestions
    assert "h100-sxn" in str(info.value)


def test_kind_filter_rejects_other_kinds(catalog):
    with pytest.raises(UnknownNameError, match="unknown instance"):
        catalog.get("h100-sxm", "instance")
    with pytest.raises(UnknownNameError, match="unknown kind"):
        catalog.list("gpu")


ACCEL = """
[[accelerator]]
id = "my-gpu"
name = "My GPU"
aliases = ["MyGPU"]
vendor = "nvidia"
family = "hopper"
form_factor = "sxm"
memory_type = "HBM3"
memory_bytes = { value = "96GiB", source = "my lab" }
memory_bandwidth_bytes_per_s = { value = "4TB/s", source = "my lab" }
dense_flop_per_s = { bf16 = { value = "1PFLOPS", basis = "dense", source = "my lab" } }
"""


def test_user_file_extends_the_catalog(tmp_path):
    (tmp_path / "mine.toml").write_text(ACCEL)
    catalog = load_catalog([tmp_path], use_env=False)
    gpu = catalog.accelerator("mygpu")
    assert gpu.memory_bytes.value == 96 * 2**30
    assert gpu.dense_peak_flop_per_s("bf16") == 1e15
    assert catalog.origins["my-gpu"].endswith("mine.toml")
    assert "h100-sxm" in catalog


def test_environment_variable_adds_files(tmp_path, monkeypatch):
    (tmp_path / "mine.toml").write_text(ACCEL)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert "my-gpu" in load_catalog()
    assert "my-gpu" not in load_catalog(use_env=False)


def test_same_id_overrides_and_based_on_changes_only_given_fields(tmp_path):
    (tmp_path / "a.toml").write_text(
        ACCEL
        + """
[[accelerator]]
id = "my-gpu-oc"
name = "My GPU, overclocked"
based_on = "my-gpu"
memory_bandwidth_bytes_per_s = { value = "5TB/s", source = "my lab, overclocked" }
"""
    )
    catalog = load_catalog([tmp_path], use_env=False)
    oc = catalog.accelerator("my-gpu-oc")
    assert oc.memory_bandwidth_bytes_per_s.value == 5e12
    assert oc.memory_bytes.value == 96 * 2**30
    assert oc.aliases == ()
    (tmp_path / "b.toml").write_text(ACCEL.replace('"96GiB"', '"141GiB"'))
    assert load_catalog([tmp_path], use_env=False).accelerator("my-gpu").memory_bytes.value == 141 * 2**30


def _error(tmp_path, text):
    (tmp_path / "bad.toml").write_text(text)
    with pytest.raises(CatalogFileError) as info:
        load_catalog([tmp_path / "bad.toml"], use_env=False)
    return info.value


def test_bad_value_names_file_entry_field_value_and_rule(tmp_path):
    error = _error(tmp_path, ACCEL.replace('"96GiB"', '"96 parsecs"'))
    message = str(error)
    assert "bad.toml" in message
    assert error.entry == "my-gpu"
    assert error.field == "memory_bytes.value"
    assert error.value == "96 parsecs"
    assert "unknown unit" in message


def test_missing_source_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace(', source = "my lab" }', " }", 1))
    assert error.field == "memory_bytes.source"
    assert "required" in error.rule.lower()


def test_sparse_figure_in_dense_table_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace('basis = "dense"', 'basis = "sparse"'))
    assert "dense" in error.rule


def test_unknown_field_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace('family = "hopper"', 'family = "hopper"\nfamly = "x"'))
    assert error.field == "famly"


def test_unknown_kind_suggests_the_right_one(tmp_path):
    error = _error(tmp_path, ACCEL.replace("[[accelerator]]", "[[acelerator]]"))
    assert "did you mean [[accelerator]]" in str(error)


def test_negative_number_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace('"4TB/s"', "-4"))
    assert error.value == -4
    assert "greater than or equal to 0" in error.rule


def test_dangling_reference_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace('form_factor = "sxm"', 'form_factor = "sxm"\nscaleup_link = "nvlink-9"'))
    assert error.field == "scaleup_link"
    assert error.value == "nvlink-9"


def test_duplicate_alias_is_an_error(tmp_path):
    error = _error(tmp_path, ACCEL.replace('["MyGPU"]', '["H100"]'))
    assert error.field == "aliases"
    assert "h100-sxm" in error.rule


def test_invalid_toml_and_missing_path(tmp_path):
    error = _error(tmp_path, "[[accelerator]\nid=")
    assert "not valid TOML" in str(error)
    with pytest.raises(CatalogFileError, match="no such file"):
        load_catalog([tmp_path / "nope"], use_env=False)


def test_based_on_unknown_entry(tmp_path):
    error = _error(tmp_path, '[[accelerator]]\nid = "x"\nbased_on = "h100-sxn"\n')
    assert error.field == "based_on"
    assert "h100-sxm" in error.rule


toml_scalars = st.one_of(
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.sampled_from(["80GiB", "3.35TB/s", "h100-sxm", "nvlink-4", "sxm", "dense", "1e400"]),
)
keys = st.sampled_from(
    [
        "id",
        "name",
        "vendor",
        "family",
        "form_factor",
        "memory_type",
        "memory_bytes",
        "value",
        "source",
        "basis",
        "dense_flop_per_s",
        "bf16",
        "scaleup_link",
        "based_on",
        "aliases",
        "accelerator",
        "network",
        "x",
    ]
)
tables = st.recursive(
    toml_scalars,
    lambda children: st.one_of(st.lists(children, max_size=3), st.dictionaries(keys, children, max_size=6)),
    max_leaves=20,
)
documents = st.dictionaries(
    st.sampled_from(["accelerator", "link", "instance", "storage", "gpu"]),
    st.one_of(st.lists(st.dictionaries(keys, tables, max_size=8), max_size=3), tables),
    max_size=3,
)


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(document=documents)
def test_loader_never_crashes(document):
    with contextlib.suppress(ClusterSimError):
        build_catalog([("fuzz.toml", document)])


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=200))
def test_loader_never_crashes_on_text(text, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz.toml"
    path.write_text(text, encoding="utf-8")
    with contextlib.suppress(tomllib.TOMLDecodeError):
        tomllib.loads(text)
    with contextlib.suppress(ClusterSimError):
        load_catalog([path], use_env=False)


def test_an_unknown_name_s_field_is_an_identifier_and_its_message_reads_in_words(catalog):
    """A JSON consumer reads ``field`` as every other error's: snake_case, no spaces; the message keeps words."""
    from clustersim.network.cost import cost_model
    from clustersim.reliability.failures import failure_rate
    from clustersim.storage.fsx import tier_by_name

    cases = [
        (lambda: catalog.get("h100-sxn"), "catalog_entry", "unknown catalog entry 'h100-sxn'"),
        (lambda: catalog.get("h100-sxm", "instance"), "instance", "unknown instance 'h100-sxm'"),
        (lambda: failure_rate("often"), "failure_rate", "unknown failure rate 'often'"),
        (lambda: tier_by_name(catalog, "PERSISTENT_9"), "storage_tier", "unknown storage tier 'PERSISTENT_9'"),
        (lambda: cost_model("packet"), "network_model", "unknown network model 'packet'"),
    ]
    for call, field, start in cases:
        with pytest.raises(UnknownNameError) as info:
            call()
        assert info.value.field == field and str(info.value).startswith(start)
