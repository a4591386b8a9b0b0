"""``clustersim plan``: the JSON has the fields issue 25 lists, --plot writes the front, every option is honoured
or refused in one line naming it, and the binding constraint is named when nothing is left."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
BASE = ("llama3-70b", "--tokens", "2T", "--instances", "p5.48xlarge,p6-b200.48xlarge", "--nodes", "16..64")


def plan(*args: str):
    return runner.invoke(app, ["plan", *args], env=ENV)


def planned(*args: str) -> dict:
    result = plan(*args, "--json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def refused(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    for part in parts:
        assert part in line, line
    return line


def test_the_json_has_the_front_the_top_rows_and_the_search_figures():
    payload = planned(*BASE, "--objective", "cost", "--top", "3")
    for key in ("pareto", "top", "evaluated", "elapsed_s", "layouts_per_s"):
        assert key in payload
    assert payload["evaluated"] > 0 and payload["elapsed_s"] > 0 and payload["layouts_per_s"] > 0
    assert payload["pareto"] and len(payload["top"]) == 3
    for row in payload["pareto"] + payload["top"]:
        for key in ("instance", "nodes", "layout", "time_s", "cost_usd", "energy_j", "interval", "why", "margin"):
            assert key in row
        assert row["interval"]["time_s"]["low"] < row["time_s"] < row["interval"]["time_s"]["high"]
        assert row["interval"]["level"] == 0.8
    costs = [row["cost_usd"] for row in payload["top"]]
    assert costs == sorted(costs)
    assert {row["nodes"] for row in payload["top"]} <= {16, 32, 64}


def test_the_table_shows_the_front_the_top_rows_and_the_speed():
    result = plan(*BASE, "--deadline", "200d")
    assert result.exit_code == 0, result.output
    for words in ("Pareto front", "top", "why it wins", "layouts/s", "80%:"):
        assert words in result.stdout


def test_plot_writes_the_front(tmp_path):
    path = tmp_path / "front.png"
    result = plan(*BASE, "--plot", str(path))
    assert result.exit_code == 0, result.output
    assert path.stat().st_size > 1000
    refused(plan(*BASE, "--plot", str(tmp_path / "front.txt")), "--plot")


def test_a_framework_that_does_not_run_on_a_chip_is_skipped_with_a_note():
    payload = planned(
        "llama3-70b", "--instances", "p5.48xlarge,trn2.48xlarge", "--nodes", "16", "--framework", "megatron,neuronx",
        "--price", "capacity_block",
    )  # fmt: skip
    assert any("'megatron' does not run on trainium2" in note for note in payload["notes"])
    assert {row["framework"] for row in payload["top"]} == {"megatron", "neuronx"}


def test_checkpoints_give_the_goodput_adjusted_time():
    payload = planned(
        *BASE, "--storage", "fsx:PERSISTENT_2-1000:100800GiB:efa", "--checkpoint", "sync,async", "--objective",
        "goodput",
    )  # fmt: skip
    for row in payload["top"]:
        assert row["goodput_time_s"] > row["time_s"] and row["checkpoint"].startswith(("sync", "async"))


@pytest.mark.parametrize(
    ("args", "parts"),
    [
        (("--deadline", "1d"), ("--deadline", "the fastest")),
        (("--budget", "1000"), ("--budget", "the cheapest")),
        (("--max-nodes", "8"), ("--max-nodes 8",)),
        (("--objective", "speed"), ("objective", "speed", "time, cost, energy, goodput")),
        (("--objective", "goodput"), ("goodput", "--storage")),
        (("--price", "spot"), ("--price", "spot", "on_demand")),
        (("--precision", "fp4"), ("--precision",)),
        (("--framework", "jax"), ("--framework", "jax")),
        (("--checkpoint", "sync"), ("--checkpoint", "--storage")),
        (("--global-batch", "512", "--batch-tokens", "4M"), ("--batch-tokens",)),
        (("--deadline", "soon"), ("--deadline", "soon")),
        (("--dataset", "sharegpt"), ("--dataset",)),
    ],
)
def test_bad_input_is_one_line_naming_the_option(args, parts):
    refused(plan(*BASE, *args), *parts)


@pytest.mark.parametrize("nodes", ["0..4", "64..16", "16,,32", "many"])
def test_bad_node_counts_are_refused(nodes):
    refused(plan("llama3-70b", "--nodes", nodes), "--nodes", nodes)


def test_an_error_with_json_is_json():
    result = plan(*BASE, "--deadline", "1d", "--json")
    assert result.exit_code == 2
    error = json.loads(result.stderr)
    assert error["field"] == "--deadline"


def test_mt_nlg_on_its_own_hardware_and_batch_plans_the_published_layout():
    """Narayanan et al. SC'21: MT-NLG 530B on 280 DGX A100 (2,240 GPUs), batch 1,920: tp 8 pp 35 dp 8."""
    base = (
        "mt-nlg-530b",
        "--instances",
        "p4de.24xlarge",
        "--nodes",
        "280",
        "--global-batch",
        "1920",
        "--tokens",
        "270B",
    )
    for space in ((), ("--micro-batch", "1,2", "--vp", "1")):
        payload = planned(*base, *space, "--top", "1")
        fields = payload["top"][0]["layout_fields"]
        assert (fields["tp"], fields["pp"], fields["dp"]) == (8, 35, 8)
    wide = planned(*base, "--top", "1")
    narrow = planned(*base, "--micro-batch", "1,2", "--vp", "1", "--keep", "5")
    assert 0 < narrow["evaluated"] < wide["evaluated"]
    assert {row["layout_fields"]["micro_batch"] for row in narrow["top"]} <= {1, 2}
    refused(plan(*base, "--vp", "0"), "--vp", "0")


def test_etp_chooses_the_expert_tp_degrees_searched():
    """``--etp`` replaces the MoE default (derived and 1): stated degrees, or 'derived' for tp's."""
    job = ("mixtral-8x7b", "--instances", "p5.48xlarge", "--nodes", "4", "--global-batch", "128", "--seq", "4096")
    whole, derived, both = (planned(*job, "--etp", etp) for etp in ("1", "derived", "derived,1"))
    assert all(row["layout_fields"]["etp"] == 1 for row in whole["top"])
    assert all(row["layout_fields"]["etp"] is None for row in derived["top"])
    assert both["evaluated"] > derived["evaluated"] and both["evaluated"] == planned(*job)["evaluated"]
    refused = plan("llama3-8b", "--instances", "p5.48xlarge", "--nodes", "1", "--etp", "1")
    assert refused.exit_code == 2 and "etp 1 needs a mixture-of-experts model" in refused.stderr


def test_bf16_layers_are_priced_at_the_low_precision_points_only_and_refused_where_none_is_tried():
    base = ("llama3-8b", "--instances", "p6-b200.48xlarge", "--nodes", "1", "--tokens", "100B", "--precision")
    steps = {}
    for n in ("0", "8"):
        payload = planned(*base, "nvfp4,bf16", "--bf16-layers", n, "--top", "2")
        steps[n] = {row["precision"]: row["step_s"] for row in payload["top"]}
    assert steps["8"]["bf16"] == steps["0"]["bf16"]  # a 16-bit point's layers are all 16-bit
    assert steps["0"]["fp4"] < steps["8"]["fp4"] < steps["0"]["bf16"]  # 8 of 32 layers a quarter of the way
    assert steps["8"]["fp4"] == pytest.approx(
        steps["0"]["fp4"] + (steps["0"]["bf16"] - steps["0"]["fp4"]) / 4, rel=0.02
    )
    refused(plan(*base, "bf16", "--bf16-layers", "8"), "--bf16-layers 8: every --precision tried (bf16)")
    refused(plan(*base, "fp8", "--bf16-layers", "40"), "--bf16-layers 40: llama3-8b has 32 layers")


def test_operation_formats_are_priced_at_the_low_precision_points_only_and_refused_where_they_cannot_apply():
    base = ("llama3-8b", "--instances", "p6-b200.48xlarge", "--nodes", "1", "--tokens", "100B", "--precision")
    steps, notes = {}, {}
    for extra in ((), ("--operation-format", "attention_projections=bf16")):
        payload = planned(*base, "nvfp4,bf16", *extra, "--top", "2")
        steps[extra] = {row["precision"]: row["step_s"] for row in payload["top"]}
        notes[extra] = payload["notes"]
    plain, wider = steps[()], steps[("--operation-format", "attention_projections=bf16")]
    assert wider["bf16"] == plain["bf16"] and plain["fp4"] < wider["fp4"] < plain["bf16"]
    said = "operation formats at the 8- and 4-bit precisions: attention_projections=bf16"
    assert said in notes[("--operation-format", "attention_projections=bf16")] and said not in notes[()]
    refused(
        plan(*base, "bf16", "--operation-format", "attention_projections=bf16"),
        "--operation-format attention_projections=bf16: every --precision tried (bf16) runs every layer in 16 bits",
    )
    refused(
        plan(*base, "nvfp4,fp8", "--operation-format", "attention_projections=fp8"),
        "--operation-format attention_projections=fp8: not wider than the fp8 job's own format",
    )  # wider than the NVFP4 point's, not the FP8 point's
    refused(plan(*base, "fp8", "--operation-format", "mtp=bf16"), "--operation-format: llama3-8b has no mtp")
