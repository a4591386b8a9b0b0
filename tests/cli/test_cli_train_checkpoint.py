"""``clustersim train --storage ... --checkpoint-every ... [--async-checkpoint]``: the totals include
checkpoint stalls, failure losses and the file system's price; scenario files keep the policy."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "CLUSTERSIM_SOFTWARE": ""}
TRAIN = ("train", "llama3-8b", "--instance", "p5.48xlarge", "--nodes", "4", "--tp", "8", "--pp", "1", "--tokens", "1T")
FSX = ("--storage", "fsx:PERSISTENT_2-1000:24000GiB")


def run(*args):
    return runner.invoke(app, list(args), env=ENV)


def job(*args):
    result = run(*TRAIN, *args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["job"]


def test_checkpoint_policy_adds_goodput_and_costs():
    plain = job()
    with_policy = job(*FSX)
    assert "goodput" not in plain
    goodput = with_policy["goodput"]
    assert 0 < goodput < 1 and with_policy["checkpoint_interval_s"] > 0
    assert with_policy["failure_free_time_s"] == pytest.approx(plain["time_s"])
    assert with_policy["time_s"] == pytest.approx(plain["time_s"] / goodput)
    assert with_policy["device_hours"] == pytest.approx(plain["device_hours"] / goodput)
    storage = with_policy["storage_cost_usd"]
    assert storage == pytest.approx(0.600 * 24000 / 730 * with_policy["time_s"] / 3600)
    assert with_policy["cost_usd"] == pytest.approx(plain["cost_usd"] / goodput + storage)


def test_given_interval_and_async_are_honoured():
    sync = job(*FSX, "--checkpoint-every", "2h")
    assert sync["checkpoint_interval_s"] == 7200
    asynchronous = job(*FSX, "--checkpoint-every", "2h", "--async-checkpoint")
    assert asynchronous["checkpoint_stall_s"] < sync["checkpoint_stall_s"]
    assert asynchronous["goodput"] > sync["goodput"]
    rsc1 = job(*FSX, "--failure-rate", "rsc1")
    assert rsc1["failure_rate"] == "rsc1" and rsc1["job_mtbf_s"] < sync["job_mtbf_s"]


def test_table_shows_the_policy():
    result = run(*TRAIN, *FSX)
    assert result.exit_code == 0, result.output
    assert "checkpoints and failures (llama3" in result.stdout and "goodput" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--checkpoint-every", "2h"), "--checkpoint-every need --storage"),
        (("--async-checkpoint",), "--async-checkpoint need --storage"),
        (("--nvme-checkpoint",), "--nvme-checkpoint need --storage"),
        ((*FSX, "--nvme-checkpoint", "--async-checkpoint"), "choose one way"),
        ((*FSX, "--checkpoint-every", "soon"), "--checkpoint-every"),
        (("--storage", "fsx:PERSISTENT_2-1000:100TiB"), "nearest valid"),
        ((*FSX, "--failure-rate", "often"), "often"),
    ],
)
def test_errors(args, message):
    result = run(*TRAIN, *args)
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output


def test_scenario_saves_and_replays_the_policy(tmp_path):
    path = tmp_path / "job.toml"
    first = run(*TRAIN, *FSX, "--checkpoint-every", "90min", "--async-checkpoint", "--save-scenario", str(path),
                "--json")  # fmt: skip
    assert first.exit_code == 0, first.output
    text = path.read_text()
    assert "[checkpoint]" in text and 'every = "90min"' in text and "async_save = true" in text
    replay = run("train", "--scenario", str(path), "--json")
    assert replay.exit_code == 0, replay.output
    assert replay.stdout == first.stdout
    refused = run("train", "--scenario", str(path), "--storage", "fsx:SCRATCH_2:2400GiB")
    assert refused.exit_code == 2 and "--storage" in refused.output


def test_nvme_tier_stalls_for_the_local_write_and_replays(tmp_path):
    """llama3-8b (8.03e9 params x 14 B = 112 GB) from 4 p5: the local write is 8 x 3.5 GB/s per instance,
    1.0 s, against a 24,000 GiB PERSISTENT_2-1000 file system's 24 GB/s, 4.7 s."""
    sync = job(*FSX, "--checkpoint-every", "2h")
    nvme = job(*FSX, "--checkpoint-every", "2h", "--nvme-checkpoint")
    size = 8_030_261_248 * 14
    assert nvme["checkpoint_tier"] == "nvme" and sync["checkpoint_tier"] == "fsx"
    assert nvme["checkpoint_stall_s"] == pytest.approx(size / (4 * 8 * 3.5e9))
    assert sync["checkpoint_stall_s"] == pytest.approx(size / 24e9)
    assert nvme["goodput"] > sync["goodput"]
    path = tmp_path / "nvme.toml"
    first = run(*TRAIN, *FSX, "--nvme-checkpoint", "--save-scenario", str(path), "--json")
    assert first.exit_code == 0, first.output
    assert "nvme = true" in path.read_text()
    replay = run("train", "--scenario", str(path), "--json")
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["job"] == json.loads(first.stdout)["job"]
