"""``clustersim explain``: a measured step set against the prediction, the terms that could explain the gap
ranked with their factors, ranges and sensitivities; the measurement given one way, refused otherwise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app
from clustersim.compute.efficiency import efficiency_table

runner = CliRunner()
ENV = {"CLUSTERSIM_COLLECTIVE_CALIBRATION": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
JOB = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1", "--zero", "1",
       "--global-batch", "128"]  # fmt: skip


def _json(command: str, *args: str, job: list[str] = JOB) -> dict:
    result = runner.invoke(app, [command, *job, *args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _refused(*args: str) -> str:
    result = runner.invoke(app, ["explain", *JOB, *args], env=ENV)
    assert result.exit_code == 2, result.output
    line = result.stderr.strip()
    assert "\n" not in line and "Traceback" not in result.output
    return line


def test_a_step_slowed_by_a_slower_network_is_put_on_data_parallel_communication(tmp_path: Path) -> None:
    """Train with an overlay of a network at 0.4 of line rate, take its step as measured, explain it with the
    packaged calibration: DP communication comes first, needing 0.4 / 0.97 of the modelled busbw."""
    slow = tmp_path / "slow.toml"
    slow.write_text('[network_efficiency]\nvalue = 0.4\nsource = "a slower network than the packaged fit"\n')
    measured = _json("train", "--calibration", str(slow))["step_s"]
    out = _json("explain", "--measured-step", repr(measured))
    assert out["measured_step_s"] == measured and out["gap"] > 0.05 and out["calibration"] == []
    top = out["candidates"][0]
    assert top["term"] == "DP exposed communication" and top["plausible"] is True
    assert top["factor_needed"] == pytest.approx(0.4 / 0.97, rel=1e-5)
    assert "NCCL" in top["hint"] and top["sensitivity"]["d_step_s_d_parameter"] < 0
    assert {"low", "high", "source"} <= set(top["plausible_range"])
    # explained with the same overlay, nothing is left to explain
    same = _json("explain", "--measured-step", repr(measured), "--calibration", str(slow))
    assert same["calibration"] == [str(slow)] and abs(same["gap"]) < 1e-9


def test_a_step_slowed_by_slower_gemms_is_put_on_compute(tmp_path: Path) -> None:
    """A job whose gradient reduce-scatter hides behind a long backward pass, its GEMMs at 0.92 of the fitted
    ceiling (the attention core held): compute comes first, needing 0.92x the GEMM efficiency."""
    hopper = efficiency_table(use_env=False)["hopper"]
    gemm_max = 0.92 * hopper.gemm_max
    attention = hopper.gemm_max * hopper.attention / gemm_max  # the attention core's own fraction held
    slower = tmp_path / "gemm.toml"
    slower.write_text(f'[hopper]\ngemm_max = {gemm_max!r}\nattention = {attention!r}\nsource = "0.92 x the fitted"\n')
    job = [*JOB[:5], "--tp", "1", "--pp", "1", "--zero", "2", "--micro-batch", "1", "--global-batch", "128"]
    measured = _json("train", "--efficiency", str(slower), job=job)["step_s"]
    out = _json("explain", "--measured-step", repr(measured), job=job)
    top = out["candidates"][0]
    assert top["term"] == "compute (GEMMs)" and top["plausible"] is True
    assert top["factor_needed"] == pytest.approx(0.92, rel=1e-4)


def test_tokens_per_second_and_mfu_mean_the_same_step() -> None:
    train = _json("train")
    tokens_per_step = train["global_batch_tokens"]
    by_step = _json("explain", "--measured-step", "1.2")
    by_rate = _json("explain", "--measured-tokens-per-s", repr(tokens_per_step / 1.2))
    assert by_rate["measured_step_s"] == pytest.approx(by_step["measured_step_s"], rel=1e-12)
    at_prediction = _json("explain", "--measured-mfu", repr(train["mfu"]))
    assert at_prediction["measured_step_s"] == pytest.approx(train["step_s"], rel=1e-12)
    assert at_prediction["within_interval"] is True and abs(at_prediction["gap"]) < 1e-9


def test_the_text_names_the_gap_the_interval_and_each_candidates_range() -> None:
    result = runner.invoke(app, ["explain", *JOB, "--measured-step", "0.95"], env=ENV)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert "inside the prediction's 80% interval" in text and "the model's own uncertainty explains it" in text
    assert "DP exposed communication" in text and "range: achieved fraction of line rate 0.3-1" in text


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((), "give the run's measurement: one of --measured-step"),
        (("--measured-step", "1", "--measured-mfu", "0.4"), "--measured-step and --measured-mfu both give"),
        (("--measured-step", "0"), "--measured-step: 0.0 is not a positive number"),
        (("--measured-tokens-per-s", "-5"), "--measured-tokens-per-s: -5.0 is not a positive number"),
        (("--measured-mfu", "42"), "--measured-mfu: 42.0 is above 1"),
    ],
)
def test_a_missing_doubled_or_impossible_measurement_is_refused_in_one_line(args: tuple[str, ...], words: str) -> None:
    assert words in _refused(*args)


DATA = Path(__file__).resolve().parents[1] / "data" / "ingest"
GPT3_LOG = DATA / "megatron_gpt3_7b_tp8_awsome_k8s.log"  # source: tests/data/ingest/SOURCES.md
GPT3 = [str(DATA / "gpt3-7.5b.toml"), "--instance", "p5.48xlarge", "--nodes", "1", "--log", str(GPT3_LOG)]


def test_a_megatron_log_gives_the_measured_step_and_the_settings_it_prints() -> None:
    result = runner.invoke(app, ["explain", *GPT3, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    # iterations 1 and 2 are warm-up: the median of iteration 3 alone (ingest reads the same)
    assert out["measured_step_s"] == 243.3444 and out["measured"]["steps"] == 1
    assert out["measured"]["settings"] == {"tp": 8, "pp": 1, "global_batch": 288, "precision": "fp16"}
    assert out["measured"]["framework"] == out["framework"] == "megatron"
    assert out["layout"]["tp"] == 8 and out["layout"]["dp"] == 1 and out["layout_chosen"] is False
    same = runner.invoke(app, ["explain", *GPT3, "--tp", "8", "--precision", "fp16", "--json"], env=ENV)
    assert same.exit_code == 0 and json.loads(same.stdout)["predicted_step_s"] == out["predicted_step_s"]


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ((*GPT3, "--tp", "4"), "line 13: the log says tp 8, --tp says 4"),
        ((*GPT3, "--precision", "bf16"), "the log says precision fp16, --precision says bf16"),
        ((*GPT3, "--measured-step", "3"), "--measured-step and --log both give the measurement"),
        (("llama3-8b", *GPT3[1:]), "line 11: the log's model has vocab 51200, llama3-8b has 128256"),
        ((*GPT3[:-1], str(DATA / "p5_2nodes_all_reduce_awsome.log")), "is neither a Megatron-LM training log"),
        ((*GPT3, "--framework", "torchtitan"), "the log is a megatron run, --framework says torchtitan"),
        ((*GPT3, "--headroom", "0.2"), "line 13: the log gives the layout (tp 8, pp 1); --headroom is the memory"),
    ],
)
def test_a_log_that_disagrees_with_the_options_or_is_not_a_training_log_is_refused(
    args: tuple[str, ...], words: str
) -> None:
    result = runner.invoke(app, ["explain", *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert words in result.stderr and "\n" not in result.stderr.strip()


def test_a_megatron_deepspeed_log_is_priced_as_megatron_deepspeed() -> None:
    from clustersim.cli.explain_log import read_log

    logged = read_log(DATA / "megatron_deepspeed_llama_tp2_pp2_llm_action.log")  # iterations 1-3 and 2498-2500
    assert (logged.framework, logged.measure, logged.world_size, logged.dp) == ("megatron-deepspeed", "step_time_s",
                                                                                 8, 2)  # fmt: skip
    assert logged.settings["tp"] == logged.settings["pp"] == 2 and logged.settings["global_batch"] == 32
    assert logged.steps == 4  # iteration 3 and 2498-2500: the median of the last four logged


def test_a_scenario_file_is_explained_as_its_job_and_a_log_must_agree_with_it(tmp_path: Path) -> None:
    saved, other = tmp_path / "gpt3.toml", tmp_path / "half.toml"
    job = [*GPT3[:-2], "--tp", "8", "--pp", "1", "--precision", "fp16", "--global-batch"]
    for path, batch in ((saved, "288"), (other, "144")):
        result = runner.invoke(app, ["train", *job, batch, "--save-scenario", str(path)], env=ENV)
        assert result.exit_code == 0, result.output
    by_options = _json("explain", job=GPT3)
    replayed = _json("explain", "--log", str(GPT3_LOG), job=["--scenario", str(saved)])
    assert replayed["predicted_step_s"] == by_options["predicted_step_s"]
    assert replayed["measured_step_s"] == by_options["measured_step_s"] == 243.3444
    assert replayed["candidates"] == by_options["candidates"]
    result = runner.invoke(app, ["explain", "--scenario", str(other), "--log", str(GPT3_LOG)], env=ENV)
    assert result.exit_code == 2 and "\n" not in result.stderr.strip()
    assert f"the log says global_batch 288, the scenario {other} runs 144" in result.stderr
    result = runner.invoke(app, ["explain", "--scenario", str(saved), "--tp", "8", "--measured-step", "9"], env=ENV)
    assert result.exit_code == 2 and "--tp cannot be combined with a scenario file" in result.stderr
    result = runner.invoke(app, ["explain", "--measured-step", "9"], env=ENV)
    assert result.exit_code == 2 and "give a MODEL (e.g. llama3-70b) or --scenario FILE" in result.stderr


def test_the_text_says_a_chosen_layout_once_and_each_ranges_source_once() -> None:
    """A chosen layout is said on the first line with what to do about it, not again as a note; the training
    residuals the compute terms and the optimizer share are named once, the optimizer's step_s bound after them."""
    job = [*JOB[:5], "--global-batch", "128"]  # no --tp, --pp: the layout is chosen
    result = runner.invoke(app, ["explain", *job, "--measured-step", "1.5"], env=ENV)
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())
    assert _json("explain", "--measured-step", "1.5", job=job)["layout_chosen"] is True
    assert text.startswith("llama3-8b on 16 x p5.48xlarge, layout chosen (fastest that fits): tp ")
    assert text.count("layout chosen (fastest that fits)") == 1 and "note: layout chosen" not in text
    assert text.count("the run's own layout should be given with --tp and --pp") == 1
    ranges = [line for line in result.output.splitlines() if line.startswith("range: ")]
    training = [line for line in ranges if "left-out residuals (training, hopper, megatron" in line]
    assert len(training) == 1, ranges
    assert training[0].endswith(
        "at 80%; optimizer step: within step_s 0.001-0.3 s (the training fit's range, clustersim.validation.specs)"
    )
    given = runner.invoke(app, ["explain", *JOB, "--measured-step", "1.5"], env=ENV)
    assert given.exit_code == 0, given.output
    first = "llama3-8b on 16 x p5.48xlarge, layout tp 8 pp 1 dp 16 mb 1 zero 1 sp recompute none"
    assert given.output.splitlines()[0] == first
    assert "chosen" not in given.output and "should be given" not in given.output


def test_a_logs_selective_recompute_modules_are_priced_as_the_flag_prices_them(tmp_path: Path) -> None:
    """Megatron-Core prints the modules a selective recompute repeats: explain prices those (as
    --recompute-modules would), not the framework's default attention core, and refuses a flag naming others."""
    base = (DATA / "megatron_gpt2_345m_tp2_pp2_a800_llm_action.log").read_text()
    model = tmp_path / "gpt2-345m.toml"
    model.write_text(
        '[gpt2-345m]\nsource = "GPT-2 medium as the log prints it"\nlayers = 24\nhidden = 1024\nffn_hidden = 4096\n'
        'heads = 16\nvocab = 50432\nseq_len = 1024\nffn_type = "gelu"\n'
    )

    def explained(modules: str, *args: str) -> dict:
        log = tmp_path / f"{modules.strip('[]').replace(chr(39), '')}.log"
        log.write_text(
            base.replace(
                "  recompute_granularity ........................... None\n",
                "  recompute_granularity ........................... selective\n"
                f"  recompute_modules ............................... {modules}\n",
            )
        )
        job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(log), *args]
        return _json("explain", job=job)

    mlp = explained("['mlp']")
    assert mlp["measured"]["settings"]["recompute_modules"] == "mlp"
    assert mlp["layout"]["recompute"] == "selective" and mlp["layout"]["recompute_modules"] == ["mlp"]
    flag = explained("['mlp']", "--recompute-modules", "mlp")
    assert flag["predicted_step_s"] == mlp["predicted_step_s"]
    assert explained("['core_attn']")["predicted_step_s"] != mlp["predicted_step_s"]
    both = explained("['layernorm', 'mlp']", "--recompute-modules", "mlp,layernorm")  # one set, either order
    assert set(both["layout"]["recompute_modules"]) == {"layernorm", "mlp"}
    refused = runner.invoke(
        app,
        ["explain", str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log",
         str(tmp_path / "mlp.log"), "--recompute-modules", "core_attn"],
        env=ENV,
    )  # fmt: skip
    assert refused.exit_code == 2
    assert "the log says recompute_modules mlp, --recompute-modules says core_attn" in refused.stderr


def _moe_model(where: Path, expert_width: int) -> Path:
    """GPT-2 medium as a MoE model (the shape of ``tests.ingest.test_training_logs._moe_log``)."""
    model = where / f"moe{expert_width}.toml"
    model.write_text(
        f'[gpt2-moe]\nsource = "a MoE GPT-2 medium"\nlayers = 24\nhidden = 1024\nffn_hidden = 4096\nheads = 16\n'
        f'vocab = 50432\nseq_len = 1024\nffn_type = "gelu"\ndense_layers = 1\n[gpt2-moe.moe]\nexperts = 64\n'
        f"top_k = 6\nshared_experts = 2\nexpert_ffn_hidden = {expert_width}\n"
    )
    return model


def test_a_moe_logs_ffn_hidden_is_an_experts_width_checked_against_the_models(tmp_path: Path) -> None:
    """Megatron-Core prints a dense width (ffn_hidden_size) and an expert's (moe_ffn_hidden_size): the log agrees
    with a model whose experts have that width, whatever its dense blocks', and is refused against another."""
    from tests.ingest.test_training_logs import _moe_log

    def explain(expert_width: int):
        model = _moe_model(tmp_path, expert_width)
        job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(_moe_log(tmp_path))]
        return runner.invoke(app, ["explain", *job, "--json"], env=ENV)

    agreed = explain(1024)
    assert agreed.exit_code == 0, agreed.output
    refused = explain(512)
    assert refused.exit_code == 2 and "the log's model has ffn_hidden 1024, gpt2-moe has 512" in refused.stderr


def test_a_moe_logs_expert_layout_fills_explains_options_unless_a_flag_says_otherwise(tmp_path: Path) -> None:
    """The dispatcher, the expert tensor parallelism and the all-to-all overlap a Megatron-Core log prints fill
    --ep-dispatcher (HybridEP as deepep, priced alike), --etp and --ep-overlap; a flag that says otherwise is
    refused naming the log's line."""
    from tests.ingest.test_training_logs import _moe_log

    model = _moe_model(tmp_path, 1024)
    log = _moe_log(
        tmp_path, moe_token_dispatcher_type="flex", moe_flex_dispatcher_backend="hybridep",
        expert_tensor_parallel_size="1", overlap_moe_expert_parallel_comm="True",
    )  # fmt: skip
    job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(log)]
    out = _json("explain", job=job)
    assert {k: out["layout"][k] for k in ("etp", "ep_dispatcher", "ep_overlap")} == {
        "etp": 1, "ep_dispatcher": "deepep", "ep_overlap": True,
    }  # fmt: skip
    assert _json("explain", "--ep-dispatcher", "deepep", job=job)["predicted_step_s"] == out["predicted_step_s"]
    refused = runner.invoke(app, ["explain", *job, "--ep-dispatcher", "alltoall"], env=ENV)
    assert (
        refused.exit_code == 2 and "the log says ep_dispatcher deepep, --ep-dispatcher says alltoall" in refused.stderr
    )


def test_a_moe_log_without_cuda_graphs_prices_the_host_on_grace_and_says_so_elsewhere(tmp_path: Path) -> None:
    """A MoE run the log says captured no CUDA graphs waits on its host's launches: on a GB200 (Grace) the
    estimate prices the wait (clustersim.training.host_launches) and explain adds no caveat (an x86 host's is in
    tests/training/test_host_launches.py); a run with partial graphs waits less (only at its routed experts), one
    with none said pays none; a --cuda-graphs that says otherwise than the log is refused."""
    from tests.ingest.test_training_logs import _moe_log

    model = _moe_model(tmp_path, 1024)

    def explained(*lines: str, as_json: bool = True):
        log = _moe_log(tmp_path, **dict(zip(lines[::2], lines[1::2], strict=True)))
        job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(log)]
        if as_json:
            return _json("explain", job=job)
        result = runner.invoke(app, ["explain", *job], env=ENV)
        assert result.exit_code == 0, result.output
        return result.stdout

    eager = explained("cuda_graph_impl", "none")
    graphed = explained("cuda_graph_impl", "transformer_engine", "cuda_graph_scope", "['moe_router']")
    assert eager["measured"]["cuda_graphs"] == "none" and eager["caveats"] == []
    assert graphed["measured"]["cuda_graphs"] == "partial" and graphed["caveats"] == []
    assert eager["predicted_step_s"] > graphed["predicted_step_s"] > explained()["predicted_step_s"]
    assert "without CUDA graphs" not in explained("cuda_graph_impl", "none", as_json=False)
    log = _moe_log(tmp_path, cuda_graph_impl="none")
    job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(log), "--cuda-graphs", "full"]
    result = runner.invoke(app, ["explain", *job], env=ENV)
    assert result.exit_code == 2 and "the log ran CUDA graphs none, --cuda-graphs says full" in result.output


def test_explain_prices_the_layers_a_log_keeps_in_bf16_and_refuses_a_flag_that_says_otherwise(tmp_path: Path) -> None:
    from tests.ingest.test_training_logs import _moe_log

    model = _moe_model(tmp_path, 1024)
    fp8 = {"fp8": "hybrid", "fp16": "False", "bf16": "True"}
    kept = _moe_log(tmp_path, **fp8, first_last_layers_bf16="True", num_layers_at_end_in_bf16="7")
    job = [str(model), "--instance", "p6e-gb200.36xlarge", "--nodes", "1", "--log", str(kept)]
    with_them = _json("explain", job=job)
    assert _json("explain", "--bf16-layers", "8", job=job)["predicted_step_s"] == with_them["predicted_step_s"]
    none = _json("explain", job=[*job[:-1], str(_moe_log(tmp_path, **fp8))])
    assert with_them["predicted_step_s"] != none["predicted_step_s"]  # 8 of 24 layers' GEMMs at their BF16 time
    kept = _moe_log(tmp_path, **fp8, first_last_layers_bf16="True", num_layers_at_end_in_bf16="7")
    refused = runner.invoke(app, ["explain", *job[:-1], str(kept), "--bf16-layers", "4"], env=ENV)
    assert refused.exit_code == 2 and "the log says bf16_layers 8, --bf16-layers says 4" in refused.output


def test_explain_prices_a_recipes_wider_operations_as_train_does() -> None:
    job = ["llama3-8b", "--instance", "p6-b200.48xlarge", "--nodes", "1", "--tp", "1", "--pp", "1"]
    job += ["--global-batch", "64", "--seq", "4096", "--precision", "nvfp4"]
    wider = ["--operation-format", "attention_projections=bf16"]
    explained = _json("explain", "--measured-step", "1.2", *wider, job=job)
    trained = runner.invoke(app, ["train", *job, *wider, "--json"], env=ENV)
    assert trained.exit_code == 0, trained.output
    assert explained["predicted_step_s"] == pytest.approx(json.loads(trained.stdout)["step_s"], rel=1e-12)
    assert explained["predicted_step_s"] > _json("explain", "--measured-step", "1.2", job=job)["predicted_step_s"]
