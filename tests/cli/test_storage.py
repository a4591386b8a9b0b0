"""``clustersim storage``: checkpoint and striping, their --json keys and their errors."""

import itertools
import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "COLUMNS": "200"}
PARAMS_405B = 405_853_388_800


def run(*args):
    return runner.invoke(app, ["storage", *args], env=ENV)


def test_checkpoint_json_has_the_issue_keys():
    result = run("checkpoint", "llama3.1-405b", "--nodes", "2048", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["checkpoint_bytes"] == PARAMS_405B * 14
    assert payload["bound"] == "file system"
    assert payload["save_s"] == pytest.approx(PARAMS_405B * 14 / 100.8e9)
    assert payload["load_s"] > 0 and payload["path"] == "efa-gds"
    assert set(payload["modes"]) == {"sync", "async", "nvme"}
    assert payload["modes"]["async"]["stall_s"] < payload["modes"]["nvme"]["stall_s"] < payload["save_s"]


def test_checkpoint_stripes_and_async_are_honoured():
    result = run(
        "checkpoint", "llama3-8b", "--nodes", "1", "--pattern", "aggregated", "--stripes", "1", "--async", "--json"
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["bound"] == "stripes" and payload["mode"] == "async" and payload["stall_bound"] == "host copy"
    assert payload["layout"] == [{"end_bytes": None, "stripes": 1}]
    assert payload["stall_s"] < payload["save_s"] == pytest.approx(payload["drain_s"])


def test_checkpoint_table_names_the_bound():
    result = run("checkpoint", "llama3-8b", "--storage", "fsx:SCRATCH_2:2400GiB", "--nodes", "1")
    assert result.exit_code == 0, result.output
    assert "over ena" in result.stdout and "file system" in result.stdout and "*" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--storage", "fsx:PERSISTENT_2-1000:100TiB"), "nearest valid: 100,800 GiB or 103,200 GiB"),
        (("--storage", "fsx:PERSISTENT_2-1000:600GiB"), "below the"),
        (("--stripes", "22"), "22 is not between 1 and the 21 storage targets"),
        (("--storage", "fsx:PERSISTENT_2-1000:100800GiB", "--stripes", "85"), "85 is not between 1 and the 84"),
        (("--storage", "fsx:SCRATCH_2:2400GiB", "--path", "efa"), "only PERSISTENT_2 file systems created EFA-enabled"),
        (("--storage", "fsx:PERSISTENT_2-1000:100800GiB", "--path", "efa"), "fsx:PERSISTENT_2-1000:CAPACITY:efa"),
        (("--storage", "fsx:PERSISTENT_2-1000:7200GiB:efa"), "whole file servers of 4,800 GiB"),
        (("--storage", "fsx:SCRATCH_2:4800GiB:efa"), "cannot be created EFA-enabled"),
        (("--storage", "fsx:PERSISTENT_2-1000:4800GiB:mdiops=5000"), "metadata IOPS 5000 is not offered"),
        (("--storage", "fsx:PERSISTENT_2-1000:4800GiB:fast"), "unknown or repeated part 'fast'"),
        (("--every", "0s"), "--every: must be a positive duration"),
        (("--async", "--nvme"), "choose one"),
        (("--format", "pickle"), "--format: unknown value 'pickle'"),
    ],
)
def test_checkpoint_errors(args, message):
    result = run("checkpoint", "llama3-8b", *args)
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


def test_striping_rises_until_the_client_bound():
    result = run("striping", "--path", "efa", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)["rows"]
    assert len(rows) == 21 and rows[0]["bytes_per_s"] == pytest.approx(4.8e9) and rows[0]["bound"] == "stripes"
    assert rows[-1]["bound"] == "clients" and rows[-1]["bytes_per_s"] == pytest.approx(700e9 / 8)
    assert all(b["bytes_per_s"] >= a["bytes_per_s"] for a, b in itertools.pairwise(rows))


def test_striping_error_in_json():
    result = run("striping", "--size", "0", "--json")
    assert result.exit_code == 2
    assert json.loads(result.stderr)["field"] == "--size"


def test_burst_credits_drain_over_repeated_checkpoints():
    """PERSISTENT_2-125 on 24,000 GiB: 3 GB/s baseline, 12 GB/s burst; a full bucket (30 min x 9 GB/s of
    credit = 16.2 TB) covers five 5.68 TB saves at burst; every 10 min the gap refills 1.8 TB, i.e. 200 s at
    burst (2.4 TB) per save, the rest at the baseline."""
    result = run("checkpoint", "llama3.1-405b", "--nodes", "2048", "--storage", "fsx:PERSISTENT_2-125:24000GiB",
                 "--every", "10min", "--json")  # fmt: skip
    assert result.exit_code == 0, result.output
    burst = json.loads(result.stdout)["burst"]
    size = PARAMS_405B * 14
    assert burst["bucket_bytes"] == pytest.approx(9e9 * 1800)
    assert burst["first_save_s"] == pytest.approx(size / 12e9) and burst["first_burst_fraction"] == 1.0
    assert burst["repeated_save_s"] == pytest.approx(200 + (size - 200 * 12e9) / 3e9)
    assert burst["sequence_save_s"][:5] == pytest.approx([size / 12e9] * 5)
    assert burst["sequence_save_s"][5] > burst["first_save_s"]
    assert json.loads(run("checkpoint", "llama3-8b", "--json").stdout)["burst"] is None  # PERSISTENT_2-1000: none


def test_metadata_bound_binds_many_small_files():
    """16,384 files of llama3-8b with 1,500 provisioned metadata IOPS (one per file created and closed) take
    16,384 / 1,500 = 10.9 s, ten times the file system's 100.8 GB/s; Automatic mode on the same 100,800 GiB
    gives 48,000 IOPS and the file system binds again."""
    storage = "fsx:PERSISTENT_2-1000:100800GiB:efa"
    slow = json.loads(run("checkpoint", "llama3-8b", "--nodes", "2048", "--storage", f"{storage}:mdiops=1500",
                          "--json").stdout)  # fmt: skip
    assert slow["bound"] == "metadata" and slow["save_s"] == pytest.approx(16_384 / 1500)
    auto = json.loads(run("checkpoint", "llama3-8b", "--nodes", "2048", "--storage", storage, "--json").stdout)
    assert auto["file_system"]["metadata_iops"] == 48_000 and auto["bound"] == "file system"
    table = run("checkpoint", "llama3-8b", "--nodes", "2048", "--storage", f"{storage}:mdiops=1500").stdout
    assert "metadata" in table and "*" in table.split("metadata")[1].splitlines()[0]
