"""A model's counts are integers, strictly: ``layers = true`` in a model TOML was read as 1 layer,
``layers = "32"`` as 32; both refused naming the field, as are the counts of MoE, MLA and quantization."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import load_model

BASE = {"layers": 32, "hidden": 4096, "ffn_hidden": 11008, "heads": 32, "vocab": 32000}


def _toml(tmp_path, line):
    text = "[m]\n" + "".join(f"{k} = {v}\n" for k, v in BASE.items() if not line.startswith(k + " ")) + line + "\n"
    path = tmp_path / "m.toml"
    path.write_text(text, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(
    "line",
    ["layers = true", 'layers = "32"', "heads = false", "vocab = 32000.0", "kv_heads = true", "seq_len = true"],
)
def test_a_count_that_is_not_an_integer_is_refused_naming_it(tmp_path, line):
    with pytest.raises(ClusterSimError, match=line.split()[0]):
        load_model(_toml(tmp_path, line))


def test_moe_counts_are_strict_too(tmp_path):
    with pytest.raises(ClusterSimError, match="top_k"):
        load_model(_toml(tmp_path, "[m.moe]\nexperts = 8\ntop_k = true"))


def test_integers_still_load(tmp_path):
    model = load_model(_toml(tmp_path, "kv_heads = 8"))
    assert model.layers == 32 and model.kv_heads == 8
    assert Transformer(**BASE).layers == 32
