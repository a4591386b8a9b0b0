"""The storage model against published FSx for Lustre figures (tests/data/storage/published.toml)."""

import tomllib
from pathlib import Path

import pytest

from clustersim.catalog.registry import load_catalog
from clustersim.storage.checkpoint import fsx_transfer
from clustersim.storage.fsx import ClientPath, default_layout, file_system

CATALOG = load_catalog(use_env=False)
CASES = tomllib.loads((Path(__file__).parents[1] / "data" / "storage" / "published.toml").read_text())["case"]


def predicted(case: dict) -> float:
    fs = file_system(CATALOG, case["tier"], case["capacity"], efa=case.get("efa", False))
    quantity = case["quantity"]
    if quantity == "write_baseline":
        return fs.write_bytes_per_s
    if quantity == "burst_write":
        return fs.burst_write_bytes_per_s
    if quantity == "read_aggregate":
        return fs.read_bytes_per_s
    instance = CATALOG.instance(case["instance"])
    num_bytes = float(case.get("bytes", 1e12))
    load = fsx_transfer(
        fs, num_bytes, num_files=int(instance.num_accelerators.value), num_clients=1,
        layout=default_layout(fs.service), path=ClientPath(case["path"]), instance=instance, write=False,
    )  # fmt: skip
    return load.time_s if quantity == "checkpoint_load_s" else load.bytes_per_s


def test_the_p5en_measurement_names_the_efa_file_systems_targets():
    """AWS's measurement names 20 OSTs: an EFA-enabled 96,000 GiB file system has exactly that many."""
    case = next(c for c in CASES if c["id"] == "aws-blog-p5en-gds-read")
    assert file_system(CATALOG, case["tier"], case["capacity"], efa=True).num_targets == 20
    assert file_system(CATALOG, case["tier"], case["capacity"]).num_targets == 80


def test_every_case_has_a_source_and_a_target():
    assert len(CASES) >= 5
    for case in CASES:
        assert len(case["source"]) > 20 and ("measured" in case) != ("low" in case)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_published_figure(case):
    value = predicted(case)
    if "measured" in case:
        assert value == pytest.approx(case["measured"], rel=case["tolerance"])
    else:
        assert case["low"] <= value <= case["high"]
