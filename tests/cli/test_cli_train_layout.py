"""``clustersim train``: every layout flag is honoured (a given one holds its dimension fixed in the search) or
refused with the reason; a given layout that does not fit is refused; --compare keeps the ranks per chip."""

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_CATALOG": "", "CLUSTERSIM_MODELS": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}


def train(*args: str):
    return runner.invoke(app, ["train", *args], env=ENV)


def layout_of(*args: str) -> dict:
    result = train(*args, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["layout_chosen"] is True
    return payload["layout"]


def refused(result, *parts: str) -> str:
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    for part in parts:
        assert part in line, line
    return line


def test_every_layout_flag_constrains_the_chosen_layout():
    base = ("llama3-70b", "--instance", "p5.48xlarge", "--nodes", "16")
    layout = layout_of(*base, "--zero", "0", "--recompute", "full", "--micro-batch", "2", "--no-sp")
    assert (layout["zero"], layout["recompute"], layout["micro_batch"]) == (0, "full", 2)
    assert layout["sequence_parallel"] is False


@pytest.mark.parametrize(
    ("args", "field", "value"),
    [
        (["--tp", "4"], "tp", 4),
        (["--pp", "4"], "pp", 4),
        (["--cp", "2"], "cp", 2),
        (["--vp", "2"], "vp", 2),
        (["--zero", "3"], "zero", 3),
        (["--micro-batch", "4"], "micro_batch", 4),
        (["--recompute", "selective"], "recompute", "selective"),
        (["--sp"], "sequence_parallel", True),
    ],
)
def test_one_given_flag_is_held_and_the_rest_searched(args, field, value):
    layout = layout_of("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "2", "--global-batch", "256", *args)
    assert layout[field] == value


def test_expert_parallelism_is_held_for_a_moe_model():
    layout = layout_of(
        "mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "2", "--global-batch", "256", "--ep", "2"
    )
    assert layout["ep"] == 2


def test_impossible_constraints_are_refused_with_the_reason():
    base = ("llama3-70b", "--instance", "p5.48xlarge", "--nodes", "16")
    refused(train(*base, "--micro-batch", "3"), "no layout", "dp*micro_batch")
    refused(train(*base, "--micro-batch", "2048"), "micro-batch 2048 is larger than the global batch")
    refused(train(*base, "--tp", "3"), "tp*pp*cp", "does not divide the 128 devices")
    refused(train(*base, "--ep", "2"), "ep 2 needs a mixture-of-experts model")


def test_a_given_layout_that_does_not_fit_is_refused_with_need_and_capacity():
    args = ["llama3.1-405b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1", "--zero", "0"]
    line = refused(train(*args), "does not fit on 1 x p5.48xlarge", "GiB per device", "80.0 GiB")
    assert "days" not in line and "$" not in line
    refused(train("llama3.1-405b", "--instance", "p5.48xlarge", "--nodes", "1"), "does not fit")  # as when chosen
    assert "ZeRO 3" in line  # Megatron's profile shards deeper


def test_a_layout_that_does_not_fit_suggests_only_the_sharding_the_framework_implements():
    """NxD Training shards the optimizer (ZeRO 1) and no deeper: the hint must not offer ZeRO 3."""
    line = refused(train("llama3.1-405b", "--instance", "trn1.32xlarge", "--nodes", "2", "--tp", "8", "--pp", "2"),
                   "does not fit on 2 x trn1.32xlarge", "full recompute")  # fmt: skip
    assert "ZeRO" not in line.split(";", 1)[1]


def given_layout(*args: str) -> dict:
    result = train(*args, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["layout_chosen"] is False
    return payload["layout"]


@pytest.mark.parametrize(
    ("framework", "expected"),
    [
        ("megatron", {"zero": 1, "sequence_parallel": True, "recompute": "none", "micro_batch": 1}),
        ("fsdp", {"zero": 3, "sequence_parallel": False, "recompute": "none", "micro_batch": 1}),
        ("torchtitan", {"zero": 3, "sequence_parallel": True, "recompute": "selective", "micro_batch": 1}),
        ("deepspeed", {"zero": 0, "sequence_parallel": False, "recompute": "none", "micro_batch": 1}),
        ("neuronx", {"zero": 1, "sequence_parallel": True, "recompute": "selective", "micro_batch": 1}),
    ],
)
def test_a_given_layout_takes_the_frameworks_defaults_for_the_options_left_out(framework, expected):
    instance = "trn1.32xlarge" if framework == "neuronx" else "p5.48xlarge"  # each framework on its own hardware
    args = ("gpt3-5b", "--instance", instance, "--nodes", "1", "--tp", "2", "--pp", "1", "--global-batch", "64")
    layout = given_layout(*args, "--framework", framework)
    assert {key: layout[key] for key in expected} == expected
    # An option given always wins over the framework's default.
    stage = 1 if framework == "neuronx" else 2  # NxD implements ZeRO 0 and 1 only (2 and 3 are refused)
    given = given_layout(*args, "--framework", framework, "--zero", str(stage), "--no-sp", "--recompute", "full")
    assert (given["zero"], given["sequence_parallel"], given["recompute"]) == (stage, False, "full")
    assert given_layout(*args, "--framework", framework, "--micro-batch", "2")["micro_batch"] == 2


def test_on_a100_megatron_is_the_megatron_lm_of_2021_22():
    args = ("gpt3-5b", "--instance", "p4de.24xlarge", "--nodes", "1", "--tp", "2", "--pp", "1", "--global-batch", "64")
    assert (given_layout(*args)["zero"], given_layout(*args)["sequence_parallel"]) == (0, False)


def test_the_search_still_holds_only_what_is_given():
    # Options left out are searched, not pinned to the framework's defaults.
    args = ("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--global-batch", "64", "--framework", "fsdp")
    assert layout_of(*args, "--zero", "1")["zero"] == 1
    assert layout_of(*args, "--tp", "2", "--recompute", "full")["recompute"] == "full"


def test_sequence_parallelism_needs_the_sequence_to_divide_by_tp():
    args = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--tp", "8", "--pp", "1"]
    refused(train(*args, "--seq", "3"), "sequence length 3", "tp*cp = 8")
    assert train(*args, "--seq", "3", "--no-sp", "--global-batch", "8").exit_code == 0
    chosen = layout_of("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--seq", "3", "--global-batch", "8")
    assert not chosen["sequence_parallel"] or 3 % chosen["tp"] == 0


def test_tp_a_multiple_of_the_kv_heads_replicates_them():
    # llama3-70b: 64 heads, 8 KV heads; tp 16 keeps two ranks per KV head (NeuronX Distributed, vLLM).
    args = ["llama3-70b", "--instance", "p5.48xlarge", "--nodes", "8", "--tp", "16", "--pp", "1", "--zero", "3"]
    assert train(*args, "--json").exit_code == 0
    refused(train("llama3-70b", "--instance", "p5.48xlarge", "--nodes", "6", "--tp", "12", "--pp", "1"), "heads")


def test_compare_keeps_the_ranks_per_chip():
    args = ["llama2-70b", "--instance", "trn1.32xlarge", "--nodes", "32", "--devices-per-node", "32"]
    args += ["--tp", "32", "--pp", "8", "--global-batch", "256", "--tokens", "10B"]
    result = train(*args, "--compare", "trn1n.32xlarge", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["first"]["layout"]["dp"] == payload["second"]["layout"]["dp"] == 4
    assert payload["second"]["capacity_bytes"] == payload["first"]["capacity_bytes"]  # a NeuronCore's share
    refused(train(*args, "--compare", "p5.48xlarge"), "--compare p5.48xlarge", "2 ranks per chip")


def test_energy_is_given_or_its_absence_explained():
    trn1 = train("llama2-7b", "--instance", "trn1.32xlarge", "--nodes", "4", "--tp", "8", "--pp", "1")
    assert trn1.exit_code == 0 and "energy unknown" in trn1.stdout
    trn2 = train("llama2-7b", "--instance", "trn2.48xlarge", "--nodes", "2", "--tp", "8", "--pp", "1")
    assert trn2.exit_code == 0 and "MWh at board power" in trn2.stdout


def test_a_search_says_when_it_chose_uneven_stages_and_even_stages_keep_them_even():
    base = ("llama3.1-405b", "--instance", "p5.48xlarge", "--nodes", "2048", "--global-batch", "2048")
    result = train(*base, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    layout = payload["layout"]
    assert (layout["tp"], layout["zero"]) == (8, 1) and layout["pp"] >= 8  # Meta: tp 8 pp 16, not tp 8 pp 2 ZeRO-3
    uneven = 126 % (layout["pp"] * layout["vp"]) != 0
    assert layout["uneven_stages"] is uneven
    note = next(n for n in payload["notes"] if n.startswith("layout chosen"))
    assert ("uneven pipeline stages: 126 layers" in note) is uneven
    even = layout_of(*base, "--even-stages")
    assert 126 % (even["pp"] * even["vp"]) == 0 and even["uneven_stages"] is False


def test_headroom_belongs_to_a_chosen_layout_and_is_kept():
    base = ("llama3-70b", "--instance", "trn1.32xlarge", "--nodes", "32")
    refused(train(*base, "--tp", "8", "--pp", "4", "--headroom", "0.2"), "--headroom", "with --tp and --pp")
    result = train(*base, "--headroom", "0.2", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["memory_bytes"]["required"] <= 0.8 * payload["capacity_bytes"]
    refused(train(*base, "--headroom", "0.9"), "does not fit", "kept free", "--headroom")


def test_mixtral_at_32k_gets_a_step_of_about_four_million_tokens_not_thirty_three():
    result = train("mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "16", "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert (payload["seq_len"], payload["global_batch_sequences"]) == (32768, 128)
    assert payload["global_batch_tokens"] == 2**22


def test_ep_overlap_is_honoured_on_a_moe_model_and_refused_on_a_dense_one():
    given = ("mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "4", "--seq", "4096")
    layout = ("--tp", "2", "--pp", "4", "--ep", "8", "--json")

    def ep_comm(*flag: str) -> tuple[float, float, dict]:
        result = train(*given, *layout, *flag)
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        (term,) = [t for t in payload["terms"] if t["name"] == "ep comm"]
        return term["link_s"], term["exposed_s"], payload["layout"]

    link_on, exposed_on, on = ep_comm("--ep-overlap")
    link_off, exposed_off, off = ep_comm("--no-ep-overlap")
    assert on["ep_overlap"] is True and off["ep_overlap"] is False
    assert link_on == link_off > 0 and exposed_off == link_off and 0 < exposed_on < exposed_off
    chosen = layout_of(*given, "--ep-overlap")  # a search holds it too
    assert chosen["ep_overlap"] is True
    refused(train("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--ep-overlap"), "ep_overlap", "no experts")


def test_etp_is_held_with_a_given_layout_and_in_the_search():
    given = ("mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "4", "--seq", "4096", "--global-batch", "128")
    layout = ("--tp", "4", "--pp", "1", "--ep", "8", "--json")

    def ep_link(*flag: str) -> tuple[float, dict]:
        result = train(*given, *layout, *flag)
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        (term,) = [t for t in payload["terms"] if t["name"] == "ep comm"]
        return term["link_s"], payload["layout"]

    whole, stated = ep_link("--etp", "1")
    split, tps = ep_link("--etp", "4")
    default, recipes = ep_link()  # unstated: megatron's recipes run whole experts
    assert stated["etp"] == 1 and tps["etp"] == 4 and recipes["etp"] == 1 and default == whole
    assert whole < split  # the expert group inside one node instead of across four
    refused(train(*given, *layout[:-1], "--etp", "3"), "etp", "ep*etp = 8*3 must divide")
    # the search holds it: with --tp 4 --ep 8 it keeps the expert group inside a node
    searched = layout_of(*given, "--tp", "4", "--ep", "8", "--etp", "1")
    assert (searched["tp"], searched["ep"], searched["etp"]) == (4, 8, 1)
    free = layout_of(*given, "--tp", "4", "--ep", "8")  # the search tries etp 1 itself and picks it here
    assert free["etp"] == 1 and free["pp"] == searched["pp"]
    refused(
        train("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--etp", "1"), "etp 1", "mixture-of-experts"
    )


def test_the_token_dispatcher_is_priced_held_in_a_search_and_refused_without_experts():
    given = (
        "deepseek-v3", "--instance", "p5.48xlarge", "--nodes", "128", "--global-batch", "8192", "--precision", "fp8",
        "--tp", "2", "--pp", "8", "--ep", "64", "--uneven-stages", "--recompute", "selective", "--json",
    )  # fmt: skip

    def ep_exposed(*flag: str) -> tuple[float, dict]:
        result = train(*given, *flag)
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        (term,) = [t for t in payload["terms"] if t["name"] == "ep comm"]
        return term["exposed_s"], payload["layout"]

    nccl, stated = ep_exposed("--ep-dispatcher", "alltoall")
    deepep, default = ep_exposed()  # megatron's: the flex dispatcher, one copy per remote node
    assert stated["ep_dispatcher"] == "alltoall" and default["ep_dispatcher"] is None
    assert nccl > 1.5 * deepep  # 8 nodes: each token-expert copy on the network against one per node reached
    assert ep_exposed("--ep-dispatcher", "deepep")[0] == deepep
    searched = layout_of("mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "4", "--seq", "4096",
                         "--global-batch", "128", "--ep", "8", "--ep-dispatcher", "alltoall")  # fmt: skip
    assert searched["ep_dispatcher"] == "alltoall"
    refused(train("llama3-8b", "--instance", "p5.48xlarge", "--nodes", "1", "--ep-dispatcher", "alltoall"),
            "ep_dispatcher", "no experts")  # fmt: skip


def test_a_given_pipeline_takes_a_stated_last_stage_and_a_search_refuses_one():
    base = ("deepseek-v3", "--instance", "p6e-gb200.36xlarge", "--nodes", "64", "--precision", "fp8")
    given = ("--tp", "1", "--pp", "4", "--vp", "4", "--ep", "64", "--global-batch", "4096", "--seq", "4096")
    even = train(*base, *given, "--uneven-stages", "--json")
    split = train(*base, *given, "--last-stage-layers", "13", "--json")
    assert even.exit_code == 0 and split.exit_code == 0, even.output + split.output
    stated, plain = json.loads(split.stdout), json.loads(even.stdout)
    assert stated["layout"]["last_stage_layers"] == 13 and plain["layout"]["last_stage_layers"] is None
    assert stated["step_s"] < plain["step_s"]  # three layers off the rank that also runs the head and MTP block
    refused(train(*base, "--last-stage-layers", "13"), "--last-stage-layers 13", "give --tp and --pp")
    too_many = train(*base, "--tp", "1", "--pp", "4", "--last-stage-layers", "59")
    refused(too_many, "last_stage_layers 59", "other pp - 1 = 3 ranks")
