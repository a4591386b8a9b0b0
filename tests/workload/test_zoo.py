"""The model zoo: exact parameter counts, FLOPs, Hugging Face configs, user files and errors."""

from __future__ import annotations

import json
import tempfile
from fractions import Fraction
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clustersim.errors import ClusterSimError, UnknownNameError
from clustersim.validation.cases import bundled_dir
from clustersim.workload.transformer import Transformer
from clustersim.workload.zoo import ENV_VAR, list_models, load_entry, load_model, model_source, read_hf_config

REQUIRED = [
    "gpt3-175b", "gpt3-5b", "gpt3-20b", "megatron-22b", "mt-nlg-530b", "megatron-1t",
    "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b",
    "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "llama3.3-70b", "mixtral-8x7b",
]  # fmt: skip
VALIDATION = bundled_dir()
SHAPE = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "head_dim", "vocab", "ffn_type")


def test_zoo_has_every_required_model_with_a_source() -> None:
    ids = list_models(use_env=False)
    assert set(REQUIRED) <= set(ids)
    for model_id in ids:
        assert load_model(model_id, use_env=False).name == model_id
        assert model_source(model_id, use_env=False).strip()


@pytest.mark.parametrize(
    ("model_id", "params"),
    [
        ("llama2-7b", 6_738_415_616),
        ("llama2-13b", 13_015_864_320),
        ("llama2-70b", 68_976_648_192),
        ("llama3-8b", 8_030_261_248),
        ("llama3-70b", 70_553_706_496),
        ("llama3.1-8b", 8_030_261_248),
        ("llama3.1-70b", 70_553_706_496),
        ("llama3.3-70b", 70_553_706_496),
        ("llama3.1-405b", 405_853_388_800),
        ("mixtral-8x7b", 46_702_792_704),
    ],
)
def test_published_parameter_counts(model_id: str, params: int) -> None:
    assert load_model(model_id, use_env=False).num_params() == params


def test_mixtral_active_parameters() -> None:
    assert load_model("mixtral-8x7b", use_env=False).active_params() == 12_879_925_248


@pytest.mark.parametrize("model_id", ["gpt3-175b", "gpt3-5b", "gpt3-20b", "megatron-22b", "mt-nlg-530b", "megatron-1t"])
def test_gpt_parameters_follow_the_megatron_formula(model_id: str) -> None:
    m = load_model(model_id, use_env=False)
    assert m.tied_embeddings and m.position == "learned"
    n, h, v, s = m.layers, m.hidden, m.vocab, m.seq_len
    formula = 12 * n * h**2 * (1 + Fraction(13, 12 * h) + Fraction(v + s, 12 * n * h))
    assert formula.denominator == 1
    # Narayanan et al. 2021 leave out the final LayerNorm (2h).
    assert m.num_params() == formula + 2 * h


def test_gpt3_175b_model_flops_follow_the_megatron_formula() -> None:
    m = load_model("gpt3-175b", use_env=False)
    n, h, v, s = m.layers, m.hidden, m.vocab, m.seq_len
    expected = 72 * s * n * h**2 * (1 + s / (6 * h) + v / (12 * n * h))
    assert m.model_flops_per_token() * s == pytest.approx(expected, rel=1e-9)
    assert round(m.num_params() / 1e9, 1) == 174.6


def test_zoo_matches_the_validation_cases() -> None:
    checked = 0
    for path in sorted(VALIDATION.glob("*.jsonl")) if VALIDATION.is_dir() else []:
        for line in path.read_text().splitlines():
            case = json.loads(line) if line.strip() else {}
            shape = case.get("model") or {}
            if shape.get("name") not in REQUIRED or shape.get("vocab") == 50257:  # Neuron runs: unpadded
                continue
            model = load_model(shape["name"], use_env=False)
            expected = Transformer.model_validate({k: v for k, v in shape.items() if k in Transformer.model_fields})
            assert [getattr(model, k) for k in SHAPE] == [getattr(expected, k) for k in SHAPE], case["id"]
            checked += 1
    assert checked, "no validation cases found"


@pytest.mark.parametrize("spec", ["LLAMA2-7B", " Llama3.1-405B ", "Mixtral-8x7B"])
def test_ids_are_case_insensitive(spec: str) -> None:
    assert load_model(spec, use_env=False).name == spec.strip().lower()


def test_packaged_zoo_is_cached() -> None:
    assert load_entry("llama2-7b", use_env=False) is load_entry("llama2-7b", use_env=False)


# ---- Hugging Face config.json (each family and every refusal: test_hf.py) ---------------------------------
def _write(path: Path, data: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


@settings(max_examples=40, deadline=None)
@given(
    model_type=st.sampled_from(["llama", "mistral", "qwen2", "phi3"]),
    act=st.sampled_from(["silu", "swish"]),
    layers=st.integers(1, 96),
    head_dim=st.sampled_from([64, 128]),
    heads=st.sampled_from([8, 16, 32]),
    groups=st.sampled_from([1, 2, 8]),
    ffn=st.integers(1, 50_000),
    vocab=st.integers(1, 300_000),
    tied=st.booleans(),
)
def test_hf_config_reads_every_shape_field(
    model_type: str, act: str, layers: int, head_dim: int, heads: int, groups: int, ffn: int, vocab: int, tied: bool
) -> None:
    config = {
        "model_type": model_type,
        "hidden_act": act,
        "num_hidden_layers": layers,
        "hidden_size": heads * head_dim,
        "intermediate_size": ffn,
        "num_attention_heads": heads,
        "num_key_value_heads": heads // groups,
        "vocab_size": vocab,
        "max_position_embeddings": 4096,
        "rope_theta": 10000.0,
        "tie_word_embeddings": tied,
    }
    expected = Transformer(
        layers=layers,
        hidden=heads * head_dim,
        ffn_hidden=ffn,
        heads=heads,
        kv_heads=heads // groups,
        vocab=vocab,
        seq_len=4096,
        ffn_type="swiglu",
        tied_embeddings=tied,
        qkv_bias=model_type == "qwen2",  # Qwen2's Q, K and V carry biases
    )
    with tempfile.TemporaryDirectory() as folder:
        model = read_hf_config(_write(Path(folder) / "config.json", config))
    assert model.num_params() == expected.num_params()
    assert model.model_flops_per_token() == expected.model_flops_per_token()


# ---- user zoo files and errors -----------------------------------------------------------------
USER_TOML = """
[llama2-7b]
source = "our fork"
layers = 2
hidden = 256
ffn_hidden = 512
heads = 4
vocab = 1000
ffn_type = "swiglu"

["tiny.v1"]
layers = 1
hidden = 64
ffn_hidden = 256
heads = 2
vocab = 100
"""


def test_user_dir_overrides_and_extends(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(USER_TOML)
    entry = load_entry("llama2-7b", extra_dirs=[tmp_path], use_env=False)
    assert (entry.model.layers, entry.source) == (2, "our fork")
    assert load_model("TINY.V1", extra_dirs=[tmp_path], use_env=False).hidden == 64
    assert model_source("tiny.v1", extra_dirs=[tmp_path], use_env=False) == str(tmp_path / "mine.toml")
    assert "tiny.v1" in list_models([tmp_path], use_env=False)
    assert load_model("llama2-7b", use_env=False).layers == 32  # the packaged zoo is untouched


def test_env_var_overrides(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "mine.toml").write_text(USER_TOML)
    monkeypatch.setenv(ENV_VAR, str(tmp_path))
    assert load_model("llama2-7b").layers == 2
    assert load_model("llama2-7b", use_env=False).layers == 32


def test_single_model_toml_file(tmp_path: Path) -> None:
    path = tmp_path / "one.toml"
    path.write_text('[mine]\nsource = "me"\nlayers = 4\nhidden = 512\nffn_hidden = 2048\nheads = 8\nvocab = 5000\n')
    assert load_model(str(path)).name == "mine"
    (tmp_path / "two.toml").write_text(USER_TOML)
    with pytest.raises(ClusterSimError, match="exactly one model"):
        load_model(str(tmp_path / "two.toml"))


def test_unknown_id_suggests_close_matches() -> None:
    with pytest.raises(UnknownNameError, match="llama2-7b") as info:
        load_model("lama2-7b", use_env=False)
    assert "llama2-7b" in info.value.suggestions
    assert "\n" not in str(info.value)


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    (tmp_path / "broken.toml").write_text("[oops\nlayers = 1\n")
    with pytest.raises(ClusterSimError, match=r"broken\.toml.*not valid TOML"):
        load_model("llama2-7b", extra_dirs=[tmp_path], use_env=False)


def test_bad_field_names_file_entry_field_and_value(tmp_path: Path) -> None:
    (tmp_path / "bad.toml").write_text(USER_TOML.replace("heads = 4", "heads = 0"))
    with pytest.raises(ClusterSimError) as info:
        load_model("llama2-7b", extra_dirs=[tmp_path], use_env=False)
    message = str(info.value)
    assert all(part in message for part in ("bad.toml", "'llama2-7b'", "'heads'", "value 0", "greater than 0"))


def test_unquoted_dotted_id_is_explained(tmp_path: Path) -> None:
    (tmp_path / "dots.toml").write_text(USER_TOML.replace('["tiny.v1"]', "[tiny.v1]"))
    with pytest.raises(ClusterSimError, match="quote an id with a dot"):
        list_models([tmp_path], use_env=False)


@pytest.mark.parametrize("spec", ["missing/config.json", "nowhere.toml"])
def test_missing_path(spec: str, tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match="no such model file"):
        load_model(str(tmp_path / spec))


def test_missing_user_dir(tmp_path: Path) -> None:
    with pytest.raises(ClusterSimError, match="no such model directory"):
        list_models([tmp_path / "absent"], use_env=False)


def test_a_model_toml_or_zoo_file_that_is_not_utf8_is_one_clear_error(tmp_path: Path) -> None:
    latin = USER_TOML.replace('source = "our fork"', 'source = "caf\xe9"').encode("latin-1")
    (tmp_path / "zoo").mkdir()
    (tmp_path / "zoo" / "mine.toml").write_bytes(latin)
    (tmp_path / "one.toml").write_bytes(latin)
    with pytest.raises(ClusterSimError, match=r"zoo/mine\.toml: cannot read the file: not UTF-8 text"):
        list_models([tmp_path / "zoo"], use_env=False)
    with pytest.raises(ClusterSimError, match=r"one\.toml: cannot read the file: not UTF-8 text"):
        load_model(str(tmp_path / "one.toml"))
