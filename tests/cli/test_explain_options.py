"""``clustersim explain`` honours ``train``'s options that change a step (uneven stages, the MoE all-to-all
overlap, memory headroom, a sequence beyond the context, the simulated fabric's contention): each predicted
step equals ``train``'s, and the ranked terms move as the option moves the step; fabric options without
--network sim are refused in one line."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from clustersim.cli.app import app

runner = CliRunner()
ENV = {"CLUSTERSIM_COLLECTIVE_CALIBRATION": "", "CLUSTERSIM_EFFICIENCY": "", "COLUMNS": "200"}
UNEVEN = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "3", "--tp", "8", "--pp", "3", "--global-batch", "96",
          "--uneven-stages"]  # 32 layers on 3 stages  # fmt: skip
# selective recompute: the expert all-to-all overlap refuses full
MOE = ["mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "4", "--tp", "2", "--pp", "1", "--ep", "8", "--zero",
       "1", "--recompute", "selective", "--global-batch", "256", "--seq", "4096"]  # fmt: skip
CHOSEN = ["llama3-70b", "--instance", "p5.48xlarge", "--nodes", "4", "--global-batch", "64"]


def _invoke(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _refused(*args: str) -> str:
    result = runner.invoke(app, ["explain", *args], env=ENV)
    assert result.exit_code == 2, result.output
    assert "\n" not in result.stderr.strip() and "Traceback" not in result.output
    return result.stderr


def _term(out: dict, term: str) -> dict:
    (found,) = [c for c in out["candidates"] if c["term"] == term]
    return found


def test_uneven_stages_are_priced_as_train_prices_them_and_the_bubble_closes_what_it_alone_adds() -> None:
    train = _invoke("train", *UNEVEN)
    bubble_s = next(t["exposed_s"] for t in train["terms"] if t["name"] == "pipeline bubble")
    at = _invoke("explain", *UNEVEN, "--measured-step", repr(train["step_s"]))
    assert at["layout"]["uneven_stages"] is True and abs(at["gap"]) < 1e-9
    assert _term(at, "pipeline bubble")["seconds"] == pytest.approx(bubble_s, rel=1e-6)
    # half a bubble more: the bubble term alone needs 1.5x its idle seconds, and the step's slope in it is 1
    slower = _invoke("explain", *UNEVEN, "--measured-step", repr(train["step_s"] + 0.5 * bubble_s))
    bubble = _term(slower, "pipeline bubble")
    assert bubble["factor_needed"] == pytest.approx(1.5, rel=1e-6)
    assert bubble["sensitivity"]["d_step_s_d_parameter"] == pytest.approx(1.0, rel=1e-6)
    even = _refused(*UNEVEN[:-1], "--measured-step", "4")
    assert "layers 32 must divide by pp*vp = 3 (or allow uneven stages" in even


@pytest.mark.parametrize("overlap", ["--ep-overlap", "--no-ep-overlap"])
def test_the_expert_all_to_all_overlap_moves_the_prediction_and_the_ep_term_as_in_train(overlap: str) -> None:
    train = _invoke("train", *MOE, overlap)
    out = _invoke("explain", *MOE, overlap, "--measured-step", repr(1.1 * train["step_s"]))
    assert out["layout"]["ep_overlap"] is (overlap == "--ep-overlap")
    assert out["predicted_step_s"] == pytest.approx(train["step_s"], rel=1e-12)
    exposed = next(t["exposed_s"] for t in train["terms"] if t["name"] == "ep comm")
    link = next(t["link_s"] for t in train["terms"] if t["name"] == "ep comm")
    assert (exposed < 0.8 * link) is (overlap == "--ep-overlap")  # overlapped: part of it hidden
    # the lever's seconds scale with the bandwidth: the exposed all-to-all but its latency (the part that does not)
    assert 0.85 * exposed < _term(out, "EP exposed communication")["seconds"] <= exposed * (1 + 1e-9)


def test_memory_headroom_chooses_the_layout_train_chooses() -> None:
    lean = _invoke("explain", *CHOSEN, "--headroom", "0.3", "--measured-step", "18")
    assert lean["layout_chosen"] is True
    assert lean["layout"] == _invoke("train", *CHOSEN, "--headroom", "0.3")["layout"]
    assert lean["layout"] != _invoke("explain", *CHOSEN, "--measured-step", "18")["layout"]
    assert "--headroom is the memory a chosen layout leaves free" in _refused(
        *CHOSEN, "--tp", "8", "--pp", "4", "--headroom", "0.3", "--measured-step", "18"
    )


def test_a_sequence_beyond_the_context_is_refused_unless_asked_for() -> None:
    job = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1", "--seq", "16384"]
    assert "beyond the context of llama3-8b" in _refused(*job, "--measured-step", "3")
    out = _invoke("explain", *job, "--beyond-context", "--measured-step", "3")
    assert out["predicted_step_s"] == pytest.approx(_invoke("train", *job, "--beyond-context")["step_s"], rel=1e-12)


SIM = ["llama3-8b", "--instance", "p5.48xlarge", "--nodes", "16", "--tp", "8", "--pp", "1", "--zero", "1",
       "--global-batch", "128", "--network", "sim", "--placement", "random", "--routing", "ecmp",
       "--oversubscription", "2", "--fabric-seeds", "1"]  # fmt: skip


def test_the_simulated_fabric_s_contention_is_priced_as_train_prices_it_and_held_while_a_lever_moves() -> None:
    train = _invoke("train", *SIM)
    out = _invoke("explain", *SIM, "--measured-step", "1.2")
    assert out["network"] == "sim" and out["predicted_step_s"] == pytest.approx(train["step_s"], rel=1e-9)
    contention = out["contention"]
    assert contention["placement"] == "random" and contention["routing"] == "ecmp"
    assert contention["step_s"] == pytest.approx(out["predicted_step_s"], rel=1e-12)
    assert contention["analytic_step_s"] < contention["step_s"]  # 2:1 and hashed paths slow the DP collectives
    assert min(v for k, v in contention["factors"].items() if k.startswith("dp")) > 1.2
    # the same measurement against the analytic prediction asks more of the network than its range allows; with
    # the fabric's contention priced, what is left is inside it, and DP communication comes first
    analytic = _invoke("explain", *SIM[: SIM.index("--network")], "--measured-step", "1.2")
    dp_sim, dp_analytic = _term(out, "DP exposed communication"), _term(analytic, "DP exposed communication")
    assert out["candidates"][0]["term"] == "DP exposed communication" and dp_sim["plausible"] is True
    assert dp_analytic["plausible"] is False and dp_analytic["factor_needed"] < dp_sim["factor_needed"] < 1


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("--placement", "random"), "place the job on the simulated fabric: they need --network sim"),
        (("--background", "0.5"), "--background 0.5: other tenants' traffic runs on the simulated fabric"),
        (("--network", "ns3"), "network: 'ns3' is not analytic or sim"),
    ],
)
def test_fabric_options_without_the_simulated_fabric_are_refused(args: tuple[str, ...], words: str) -> None:
    assert words in _refused(*SIM[: SIM.index("--network")], *args, "--measured-step", "1.2")


def test_safe_and_etp_choose_and_hold_the_layout_train_does() -> None:
    moe = ["mixtral-8x7b", "--instance", "p5.48xlarge", "--nodes", "4", "--global-batch", "128", "--seq", "4096"]
    safe = _invoke("explain", *moe, "--safe", "--measured-step", "3")
    assert safe["layout_chosen"] is True and safe["layout"] == _invoke("train", *moe, "--safe")["layout"]
    given = [*moe, "--tp", "4", "--pp", "1", "--ep", "8"]
    whole = _invoke("explain", *given, "--etp", "1", "--measured-step", "3")
    split = _invoke("explain", *given, "--etp", "4", "--measured-step", "3")
    default = _invoke("explain", *given, "--measured-step", "3")  # megatron's recipes: whole experts
    assert (whole["layout"]["etp"], split["layout"]["etp"], default["layout"]["etp"]) == (1, 4, 1)
    assert whole["predicted_step_s"] == pytest.approx(_invoke("train", *given, "--etp", "1")["step_s"], rel=1e-12)
    assert whole["predicted_step_s"] < split["predicted_step_s"]  # the expert group inside one node
    assert "--safe chooses a layout by the upper end of its interval" in _refused(
        *given, "--safe", "--measured-step", "3"
    )
