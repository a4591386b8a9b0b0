"""The model zoo: known transformer shapes by id, user zoo files and Hugging Face ``config.json``.

The packaged zoo is ``catalog/models/*.toml``: one table per model, keyed by its id, holding the
fields of :class:`~clustersim.workload.transformer.Transformer` and a ``source``. Directories in
``CLUSTERSIM_MODELS`` (separated by ``os.pathsep``) and then those given as ``extra_dirs`` are read
after it; an entry with a known id replaces it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from clustersim.catalog.tomlfiles import expand_toml_paths, read_toml, user_paths
from clustersim.errors import CatalogFileError, UnknownNameError
from clustersim.workload.transformer import Transformer, transformer_from_mapping

ENV_VAR = "CLUSTERSIM_MODELS"
MAX_DEFAULT_SEQ_LEN = 8192
_GATED_ACTIVATIONS = {"silu", "swish", "swiglu"}


@dataclass(frozen=True)
class ZooEntry:
    """A model with where its shape comes from (paper, model card or config) and the file it is in."""

    model: Transformer
    source: str
    path: str


def load_model(spec: str, extra_dirs: Sequence[Path] = (), use_env: bool = True) -> Transformer:
    """The model named by ``spec``: a zoo id (any case), a ``.toml`` file holding one model table,
    or a Hugging Face ``config.json`` (or a folder holding one)."""
    return load_entry(spec, extra_dirs, use_env).model


def model_source(spec: str, extra_dirs: Sequence[Path] = (), use_env: bool = True) -> str:
    """The source (paper, model card or config URL) of the model named by ``spec``."""
    return load_entry(spec, extra_dirs, use_env).source


def list_models(extra_dirs: Sequence[Path] = (), use_env: bool = True) -> list[str]:
    """Every zoo id, packaged and user, sorted."""
    return sorted(zoo(extra_dirs, use_env))


def load_entry(spec: str, extra_dirs: Sequence[Path] = (), use_env: bool = True) -> ZooEntry:
    """The :class:`ZooEntry` named by ``spec`` (see :func:`load_model`)."""
    if _looks_like_path(spec):
        path = Path(spec).expanduser()
        if path.is_dir() and (path / "config.json").is_file():
            path = path / "config.json"
        if not path.is_file():
            raise CatalogFileError(str(path), None, None, None, "no such model file")
        if path.suffix == ".json":
            return ZooEntry(read_hf_config(path), f"Hugging Face config {path}", str(path))
        entries = read_zoo_file(path)
        if len(entries) != 1:
            rule = f"a model file holds exactly one model table, found {len(entries)}"
            raise CatalogFileError(str(path), None, None, None, rule)
        return next(iter(entries.values()))
    entries = zoo(extra_dirs, use_env)
    try:
        return entries[spec.strip().lower()]
    except KeyError:
        raise UnknownNameError("model", spec, entries) from None


def zoo(extra_dirs: Sequence[Path] = (), use_env: bool = True) -> dict[str, ZooEntry]:
    """Every zoo entry by lower-case id: the packaged zoo, then ``CLUSTERSIM_MODELS``, then ``extra_dirs``."""
    entries = dict(_packaged())
    for path in expand_toml_paths(user_paths(ENV_VAR, extra_dirs, use_env=use_env), what="model directory or file"):
        entries.update(read_zoo_file(path))
    return entries


@lru_cache(maxsize=1)
def _packaged() -> dict[str, ZooEntry]:
    folder = resources.files("clustersim.catalog") / "models"
    entries: dict[str, ZooEntry] = {}
    for path in sorted(Path(str(item)) for item in folder.iterdir() if item.name.endswith(".toml")):
        for key, entry in read_zoo_file(path).items():
            if key in entries:
                raise CatalogFileError(str(path), key, None, None, f"duplicate model id (also in {entries[key].path})")
            entries[key] = entry
    return entries


def _looks_like_path(spec: str) -> bool:
    return spec.endswith((".toml", ".json")) or "/" in spec or os.sep in spec


def read_zoo_file(path: Path) -> dict[str, ZooEntry]:
    """The models of one zoo TOML file by lower-case id; ``CatalogFileError`` or ``ClusterSimError``
    naming the file, entry, field, value and rule. ``source`` defaults to the file's path."""
    data = read_toml(path, "model file")
    if "layers" in data:  # a single model written without a table header
        data = {path.stem: data}
    entries: dict[str, ZooEntry] = {}
    for key, table in data.items():
        if not isinstance(table, dict):
            raise CatalogFileError(str(path), key, None, table, "write each model as a [model-id] table")
        if table and "layers" not in table and all(isinstance(v, dict) for v in table.values()):
            raise CatalogFileError(str(path), key, None, None, 'quote an id with a dot: ["llama3.1-8b"]')
        fields = dict(table)
        source = fields.pop("source", str(path))
        if not isinstance(source, str) or not source.strip():
            raise CatalogFileError(str(path), key, "source", source, "source must be a non-empty string")
        fields["name"] = key
        model = transformer_from_mapping(fields, where=f"{path}, entry {key!r}")
        entries[key.lower()] = ZooEntry(model, source, str(path))
    return entries


def read_hf_config(path: Path) -> Transformer:
    """A ``Transformer`` from a local Hugging Face ``config.json``.

    ``seq_len`` is ``max_position_embeddings`` capped at 8192 (a long-context model's window is not
    its training length). ``hidden_act`` ``silu`` (Llama, Mistral, Qwen: gate, up and down
    projections) reads as ``swiglu``, anything else as ``gelu``. MoE: ``num_local_experts`` /
    ``num_experts`` / ``n_routed_experts``, ``num_experts_per_tok``, ``n_shared_experts`` and
    ``moe_intermediate_size``; DeepSeek's dense first layers and latent attention are not modelled.
    """
    where = str(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CatalogFileError(where, None, None, None, f"cannot read the JSON config: {exc}") from None
    if not isinstance(data, dict):
        raise CatalogFileError(where, None, None, None, "a config.json is a JSON object")

    def need(key: str) -> Any:
        if data.get(key) is None:
            raise CatalogFileError(where, None, key, None, "required key missing from the config")
        return data[key]

    act = str(data.get("hidden_act") or data.get("hidden_activation") or "gelu").lower()
    fields: dict[str, Any] = {
        "name": str(data.get("_name_or_path") or path.resolve().parent.name),
        "layers": need("num_hidden_layers"),
        "hidden": need("hidden_size"),
        "ffn_hidden": need("intermediate_size"),
        "heads": need("num_attention_heads"),
        "kv_heads": data.get("num_key_value_heads") or 0,
        "head_dim": data.get("head_dim") or 0,
        "vocab": need("vocab_size"),
        "seq_len": min(int(data.get("max_position_embeddings") or 2048), MAX_DEFAULT_SEQ_LEN),
        "ffn_type": "swiglu" if act in _GATED_ACTIVATIONS else "gelu",
    }
    if data.get("tie_word_embeddings") is not None:
        fields["tied_embeddings"] = bool(data["tie_word_embeddings"])
    if any(key.startswith(("rope", "rotary")) for key in data):
        fields["position"] = "rotary"
    experts = data.get("num_local_experts") or data.get("n_routed_experts") or data.get("num_experts")
    if experts:
        moe: dict[str, Any] = {
            "experts": experts,
            "top_k": data.get("num_experts_per_tok") or 1,
            "shared_experts": data.get("n_shared_experts") or 0,
        }
        if data.get("moe_intermediate_size"):
            moe["expert_ffn_hidden"] = data["moe_intermediate_size"]
        fields["moe"] = moe
    return transformer_from_mapping(fields, where=where)
