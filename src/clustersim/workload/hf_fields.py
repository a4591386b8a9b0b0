"""The checked fields of a Hugging Face ``config.json`` and the pieces its family readers share: the
shape every rotary decoder states and the layers a sliding window covers. See
:mod:`clustersim.workload.hf` for the rules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from clustersim.errors import CatalogFileError
from clustersim.workload.hf_limits import context_tokens, yarn_concentration

MAX_DEFAULT_SEQ_LEN = 8192
SILU = ("silu", "swish")
_ABSENT = object()


class Config:
    """The fields of one config (or its ``text_config``) with checked access: every problem is a
    ``CatalogFileError`` naming the file, the field, the value and the rule."""

    def __init__(self, path: str, data: dict[str, Any], prefix: str = "", defaults: dict[str, Any] | None = None):
        self.path, self.data, self.prefix, self.defaults = path, data, prefix, defaults or {}

    def fail(self, key: str, value: object, rule: str) -> CatalogFileError:
        """The error for ``key`` (shown with the text config's prefix)."""
        return CatalogFileError(self.path, None, self.prefix + key, value, rule)

    def raw(self, key: str) -> Any:
        """The value, the family default when absent, or None; JSON null counts as absent."""
        value = self.data.get(key)
        return self.defaults.get(key) if value is None else value

    def count(self, key: str, default: Any = _ABSENT, minimum: int = 1) -> int:
        """A whole number of at least ``minimum``; a missing key takes ``default`` or is refused."""
        value = self.raw(key)
        if value is None:
            if default is _ABSENT:
                raise self.fail(key, None, "required field missing from the config")
            return int(default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(key, value, f"must be a whole number of at least {minimum} (not a boolean or a string)")
        if value < minimum:
            raise self.fail(key, value, f"must be at least {minimum}")
        return value

    def flag(self, key: str, default: bool) -> bool:
        """A JSON boolean, ``default`` when absent."""
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self.fail(key, value, "must be true or false")
        return value

    def text(self, key: str, default: str) -> str:
        """A string (lower case), ``default`` when absent."""
        value = self.raw(key)
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(key, value, "must be a string")
        return value.lower()

    def refuse_if(self, key: str, value: object, why: str) -> None:
        """Refuse an option the count does not model when the config sets it to ``value``."""
        if self.raw(key) == value:
            raise self.fail(key, value, f"not modelled: {why}")

    def activation(self, keys: tuple[str, ...], default: str, valid: tuple[str, ...]) -> str:
        """The first activation field present (or ``default``), which must be one of ``valid``."""
        key = next((k for k in keys if self.raw(k) is not None), keys[0])
        act = self.text(key, default)
        if act not in valid:
            raise self.fail(key, act, f"this family's MLP takes {', '.join(valid)}")
        return act


def rotary_fields(cfg: Config, ffn_type: str, *, tied: bool, head_dim: int | None = None) -> dict[str, Any]:
    """The fields every rotary decoder shares: shape, vocabulary, sequence length and tying."""
    heads = cfg.count("num_attention_heads")
    fields: dict[str, Any] = {
        "layers": cfg.count("num_hidden_layers"),
        "hidden": cfg.count("hidden_size"),
        "ffn_hidden": cfg.count("intermediate_size"),
        "heads": heads,
        "kv_heads": cfg.count("num_key_value_heads", heads),
        "head_dim": cfg.count("head_dim", head_dim or 0),
        "vocab": cfg.count("vocab_size"),
        "seq_len": min(cfg.count("max_position_embeddings", 2048), MAX_DEFAULT_SEQ_LEN),
        "max_context_tokens": context_tokens(cfg),
        "ffn_type": ffn_type,
        "position": "rotary",
        "tied_embeddings": cfg.flag("tie_word_embeddings", tied),
    }
    concentration = yarn_concentration(cfg)
    if concentration != 1.0:
        fields["rope_concentration"] = concentration
    return fields


def window_fields(cfg: Config, layers: int, windowed: Callable[[int], bool] | None) -> dict[str, Any]:
    """``sliding_window`` and how many layers use it: from ``layer_types`` when given, else the
    family's rule ``windowed(layer index)`` (None: no window)."""
    types = cfg.raw("layer_types")
    if types is not None:
        kinds = ("full_attention", "sliding_attention")
        if not isinstance(types, list) or len(types) != layers or any(t not in kinds for t in types):
            raise cfg.fail("layer_types", types, f"a list of {layers} entries, each one of {', '.join(kinds)}")
        count = types.count("sliding_attention")
    else:
        count = sum(1 for i in range(layers) if windowed(i)) if windowed else 0
    if not count:
        return {}
    return {"sliding_window": cfg.count("sliding_window"), "window_layers": count}


def no_extra_biases(cfg: Config) -> None:
    """Refuse biases on the attention projections or the MLP (a family without them)."""
    cfg.refuse_if("attention_bias", True, "biases on the attention projections")
    cfg.refuse_if("mlp_bias", True, "biases on the MLP")
