"""``based_on`` in a zoo file: a table started from a model read before it, and gpt-oss's released checkpoints
(the zoo's ``gpt-oss-*-mxfp4``: the bf16 shape with the release's MXFP4 experts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from clustersim.catalog.schema import Dtype
from clustersim.errors import CatalogFileError, ClusterSimError
from clustersim.serving.memory import weight_bytes_per_device
from clustersim.workload.quantization import MXFP4_EXPERTS
from clustersim.workload.zoo import load_entry, load_model, read_zoo_file

GIB = 2**30


@pytest.mark.parametrize(("release", "trains", "card_gib"), [("gpt-oss-120b-mxfp4", "gpt-oss-120b", 60.8),
                                                              ("gpt-oss-20b-mxfp4", "gpt-oss-20b", 12.8)])  # fmt: skip
def test_gpt_oss_releases_are_the_trained_shape_with_mxfp4_experts(release: str, trains: str, card_gib: float):
    served, bf16 = load_model(release, use_env=False), load_model(trains, use_env=False)
    assert served.quantization == MXFP4_EXPERTS and bf16.quantization is None
    assert served.model_copy(update={"name": trains, "quantization": None}) == bf16
    # the model card's checkpoint sizes (arXiv 2508.10925, Table 1), as the release's config.json reads
    assert weight_bytes_per_device(served, Dtype.BF16) / GIB == pytest.approx(card_gib, abs=0.05)
    assert "openai/" + trains in load_entry(release, use_env=False).source
    with pytest.raises(ClusterSimError, match="training is priced for 16-bit weights"):
        served.check_unquantized("training")


def test_a_table_based_on_an_earlier_one_replaces_only_its_own_fields(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text(
        '[base]\nlayers = 4\nhidden = 256\nffn_hidden = 1024\nheads = 4\nvocab = 1000\nseq_len = 512\n'
        '[deeper]\nbased_on = "base"\nlayers = 8\n'
        '[deeper-still]\nbased_on = "DEEPER"\nseq_len = 1024\n'
    )  # fmt: skip
    entries = read_zoo_file(path)
    base, deeper, still = entries["base"].model, entries["deeper"].model, entries["deeper-still"].model
    assert (deeper.layers, deeper.hidden, deeper.seq_len) == (8, 256, 512)
    assert (still.layers, still.hidden, still.seq_len) == (8, 256, 1024)
    assert base.layers == 4 and entries["deeper"].source == str(path)  # a base's source is not inherited


def test_a_user_file_may_start_from_a_packaged_model(tmp_path: Path):
    (tmp_path / "mine.toml").write_text('[llama3-70b-deep]\nbased_on = "llama3-70b"\nlayers = 100\n')
    mine, packaged = load_model("llama3-70b-deep", [tmp_path], use_env=False), load_model("llama3-70b", use_env=False)
    assert mine.layers == 100 and mine.model_copy(update={"layers": 80, "name": packaged.name}) == packaged


@pytest.mark.parametrize(("base", "rule"), [('"llama3-70"', "no model read before this table has this id; did you "
                                             "mean llama3-70b"), ("7", "no model read before this table")])  # fmt: skip
def test_an_unknown_base_names_the_file_entry_field_and_value(tmp_path: Path, base: str, rule: str):
    (tmp_path / "mine.toml").write_text(f"[mine]\nbased_on = {base}\nlayers = 2\n")
    with pytest.raises(CatalogFileError, match="based_on") as err:
        load_model("mine", [tmp_path], use_env=False)
    assert "mine.toml" in str(err.value) and "'mine'" in str(err.value) and rule in str(err.value)


def test_a_base_must_come_before_the_table(tmp_path: Path):
    path = tmp_path / "mine.toml"
    path.write_text('[later]\nbased_on = "first"\nlayers = 2\n[first]\nlayers = 4\nhidden = 256\nheads = 4\n')
    with pytest.raises(CatalogFileError, match="table 'first' comes after this one in the file; write the base first"):
        read_zoo_file(path)


def test_the_zoo_table_says_how_each_checkpoint_stores_its_weights():
    from clustersim.present.zoo import model_json, weights_label

    labels = {m: weights_label(model_json(load_entry(m, use_env=False)).get("quantization"))
              for m in ("gpt-oss-120b", "gpt-oss-120b-mxfp4")}  # fmt: skip
    assert labels == {"gpt-oss-120b": "16-bit", "gpt-oss-120b-mxfp4": "4-bit mxfp4 (experts)"}
    assert weights_label({"bits": 4, "method": "awq", "experts_only": False}) == "4-bit awq"
