"""``train --recompute-modules``: what a given layout's selective recompute runs again, honoured or refused."""

from __future__ import annotations

import json

import pytest

from tests.cli.test_cli_train_layout import refused, train

GIVEN = ("qwen3-30b-a3b", "--instance", "p5.48xlarge", "--nodes", "2", "--tp", "1", "--pp", "1", "--ep", "8")


def terms(*args: str) -> tuple[dict, dict[str, float]]:
    result = train(*GIVEN, *args, "--json")
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    return payload["layout"], {t["name"]: t["link_s"] for t in payload["terms"]}


def test_named_modules_are_priced_and_imply_selective_recompute():
    layout, default = terms("--recompute", "selective")
    assert layout["recompute_modules"] is None
    layout, moe = terms("--recompute-modules", "layernorm, MOE")
    assert layout["recompute"] == "selective" and layout["recompute_modules"] == ["layernorm", "moe"]
    # The whole MoE layer runs again, its dispatch and combine too: a third pass of the all-to-alls.
    assert moe["ep comm"] == pytest.approx(1.5 * default["ep comm"], rel=1e-9)
    assert moe["recompute"] > default["recompute"]
    _, act = terms("--recompute-modules", "moe_act")
    assert act["ep comm"] == default["ep comm"] and act["recompute"] < moe["recompute"]


def test_unknown_missing_or_impossible_modules_are_refused():
    refused(train(*GIVEN, "--recompute-modules", "layernorm,bogus"), "--recompute-modules", "unknown bogus", "moe_act")
    refused(train(*GIVEN, "--recompute-modules", " , "), "no module named")
    refused(train(*GIVEN, "--recompute-modules", "mla_up_proj"), "has no mla_up_proj", "valid for it")
    refused(train(*GIVEN, "--recompute", "full", "--recompute-modules", "moe"), "need selective recompute")
    search = ("qwen3-30b-a3b", "--instance", "p5.48xlarge", "--nodes", "2", "--ep", "8")
    refused(train(*search, "--recompute-modules", "mla_up_proj"), "search space", "has no mla_up_proj")
    refused(train(*search, "--recompute", "none", "--recompute-modules", "moe"), "need selective recompute")


def test_a_search_prices_every_selective_layout_with_the_named_modules():
    search = ("qwen3-30b-a3b", "--instance", "p5.48xlarge", "--nodes", "2", "--ep", "8", "--json")
    result = train(*search, "--recompute-modules", "moe_act,layernorm")
    assert result.exit_code == 0, result.output
    chosen = json.loads(result.stdout)["layout"]
    assert chosen["recompute"] == "selective" and set(chosen["recompute_modules"]) == {"moe_act", "layernorm"}
    given = [f"--{k.replace('_', '-')}={chosen[k]}" for k in ("tp", "pp", "micro_batch", "zero")]
    again = train(*search[:-1], *given, "--recompute-modules", "moe_act,layernorm", "--json")
    assert json.loads(again.stdout)["step_s"] == pytest.approx(json.loads(result.stdout)["step_s"], rel=1e-12)


def test_an_overlapped_expert_all_to_all_refuses_full_and_moe_layer_recompute():
    """Megatron-Core asserts the overlap off under full recompute and the moe module: refused when given, never
    chosen by a search."""
    refused(train(*GIVEN, "--ep-overlap", "--recompute", "full"), "ep_overlap", "full recompute", "turn one off")
    refused(train(*GIVEN, "--ep-overlap", "--recompute-modules", "moe"), "the moe recompute module")
    layout, _ = terms("--ep-overlap", "--recompute-modules", "moe_act,layernorm")  # the others combine with it
    assert layout["ep_overlap"] is True
    search = ("qwen3-30b-a3b", "--instance", "p5.48xlarge", "--nodes", "2", "--ep", "8", "--ep-overlap", "--json")
    chosen = json.loads(train(*search).stdout)["layout"]
    assert chosen["ep_overlap"] is True and chosen["recompute"] != "full"
    refused(train(*search[:-1], "--recompute", "full"), "no expert all-to-all overlap beside full")
