"""`hw compare` of instances: the figures a buyer decides on, each ratio equal to the product of its
factors' ratios, and each reason naming the factors that moved it."""

import json
import math

import pytest
from typer.testing import CliRunner

from clustersim.catalog.instance_figures import compare_instances
from clustersim.catalog.registry import load_catalog
from clustersim.cli.app import app

FOUR = ["p5en.48xlarge", "p6-b200.48xlarge", "p6e-gb200.36xlarge", "trn2.48xlarge"]


@pytest.fixture(scope="module")
def figures():
    catalog = load_catalog()
    rows = compare_instances(catalog, [catalog.instance(i) for i in FOUR])
    return {row.key: row for row in rows}


def test_per_instance_peak_is_devices_times_the_device_peak(figures):
    bf16 = figures["bf16_flop_per_s"]
    assert bf16.values == pytest.approx((8 * 989.4e12, 8 * 2.25e15, 4 * 2.5e15, 16 * 667e12))
    # the ratio splits into its factors: 4 GPUs vs 8 (0.5x) times 2.5 vs 0.9894 PFLOPS (2.53x)
    assert bf16.ratios[2] == pytest.approx(0.5 * 2.5e15 / 989.4e12)
    assert bf16.reasons[2].startswith("1.26x: 4 GPUs vs 8 GPUs (0.50x) x 2.5 PFLOPS bf16 vs 989.4 TFLOPS bf16")
    assert bf16.reasons[3].startswith("1.35x: 16 chips vs 8 GPUs (2.00x)")


def test_network_per_device_names_the_cards_and_the_devices(figures):
    per_device = figures["network_bits_per_s_per_device"]
    assert per_device.values == pytest.approx((400e9, 400e9, 400e9, 200e9))
    assert per_device.reasons[1] == "same"
    assert per_device.reasons[2] == "1.00x: 1.6 Tbps vs 3.2 Tbps (0.50x) x per 4 GPUs vs per 8 GPUs (2.00x)"
    assert per_device.reasons[3] == "0.50x: per 16 chips vs per 8 GPUs"


def test_the_ultraserver_domain_is_the_scale_up_size(figures):
    domain = figures["scaleup_domain_devices"]
    assert domain.values == (8, 8, 72, 16)
    assert "gb200-nvl72 over 18 instances" in domain.reasons[2]


def test_price_per_pflop_hour_is_price_over_peak(figures):
    price = figures["capacity_block_usd_per_bf16_pflop_hour"]
    expected = [54.92 / 7.9152, 98.84 / 18.0, 42.328 / 10.0, 35.7608 / 10.672]
    assert price.values == pytest.approx(expected, rel=1e-4)
    for ratio, value in zip(price.ratios, price.values, strict=True):
        assert ratio == pytest.approx(value / price.values[0])


def test_a_missing_factor_leaves_the_figure_unknown_and_says_which(figures):
    on_demand = figures["on_demand_usd_per_device_hour"]
    assert on_demand.values[2] is None and on_demand.reasons[2] == "no on-demand offer"
    assert on_demand.values[3] is None and on_demand.reasons[3] == "no on-demand offer"
    fp4 = figures["fp4_flop_per_s"]
    assert fp4.values[0] is None and fp4.ratios[1] is None  # no FP4 on H200: no ratio, never a zero
    assert fp4.values[1] == pytest.approx(72e15) and not any(v == 0 for v in fp4.values if v is not None)
    assert all(v is None or math.isfinite(v) for row in figures.values() for v in row.values)


def test_cli_compare_of_instances_prints_the_figures_and_gives_them_in_json():
    runner = CliRunner()
    env = {"CLUSTERSIM_CATALOG": "", "COLUMNS": "400"}
    table = runner.invoke(app, ["hw", "compare", *FOUR], env=env)
    assert table.exit_code == 0, table.output
    assert "what you buy" in table.stdout and "Capacity Block $ per dense BF16 PFLOP-hour" in table.stdout
    assert "no on-demand offer" in table.stdout
    result = runner.invoke(app, ["hw", "compare", *FOUR, "--json"], env=env)
    payload = json.loads(result.stdout)
    assert payload["ids"] == FOUR and payload["fields"]  # the field-by-field rows are still there
    rows = {row["figure"]: row for row in payload["figures"]}
    assert rows["devices"]["ratios_to_first"]["trn2.48xlarge"] == 2.0
    assert rows["devices"]["reasons"]["trn2.48xlarge"] == "2.00x: 16 chips vs 8 GPUs"
    accelerators = runner.invoke(app, ["hw", "compare", "b200", "gb200", "--json"], env=env)
    assert "figures" not in json.loads(accelerators.stdout)  # instance figures are for instances only


def test_scale_up_per_device_is_the_chips_share_of_its_instance_domain():
    catalog = load_catalog()
    ids = ["trn2.48xlarge", "trn2u.48xlarge"]
    rows = {row.key: row for row in compare_instances(catalog, [catalog.instance(i) for i in ids])}
    # Trainium2's 1.28 TB/s counts the UltraServer ring; a trn2.48xlarge joins its chips with 1,024 GB/s
    assert rows["scaleup_bytes_per_s_per_device"].values == pytest.approx((512e9, 640e9))
    assert rows["scaleup_domain_devices"].values == (16, 64)
    scaleup = rows["scaleup_bytes_per_s_per_device"]
    assert scaleup.reasons[1] == "1.25x: 640 GB/s each way vs 512 GB/s each way in trn2-16"
