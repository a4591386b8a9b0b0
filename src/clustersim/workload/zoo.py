"""The model zoo: known transformer shapes by id, user zoo files and Hugging Face ``config.json``.

The packaged zoo is ``catalog/models/*.toml``: one table per model, keyed by its id, holding the
fields of :class:`~clustersim.workload.transformer.Transformer`, a ``source`` and optionally ``aliases``: the
ids of other checkpoints of the same shape (DeepSeek-R1 is DeepSeek-V3's), which name the entry itself (its
answers say the id they priced). ``based_on = "<id>"`` starts a table from a model read before it (an earlier
table of its file, or an entry of the zoo read before the file), its own fields replacing the base's: a released
checkpoint of a model is its shape with a ``quantization``. Directories in
``CLUSTERSIM_MODELS`` (separated by ``os.pathsep``) and then those given as ``extra_dirs`` are read
after it; an entry with a known id replaces it. A ``config.json`` is read by
:mod:`clustersim.workload.hf`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from clustersim.catalog.tomlfiles import expand_toml_paths, read_toml, user_paths
from clustersim.errors import CatalogFileError, UnknownNameError, close_matches
from clustersim.workload.hf import read_hf_config
from clustersim.workload.transformer import Transformer, transformer_from_mapping

__all__ = ["ENV_VAR", "ZooEntry", "list_models", "load_entry", "load_model", "model_source", "read_hf_config", "zoo"]

ENV_VAR = "CLUSTERSIM_MODELS"


@dataclass(frozen=True)
class ZooEntry:
    """A model with where its shape comes from (paper, model card or config) and the file it is in."""

    model: Transformer
    source: str
    path: str
    aliases: tuple[str, ...] = ()


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
        if path.is_dir():
            if not (path / "config.json").is_file():
                rule = "a folder without a config.json; give a model .toml, a config.json or a folder holding one"
                raise CatalogFileError(str(path), None, None, None, rule)
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
    key = spec.strip().lower()
    if key in entries:
        return entries[key]
    for entry in entries.values():
        if key in entry.aliases:
            return entry
    raise UnknownNameError("model", spec, entries)


def zoo(extra_dirs: Sequence[Path] = (), use_env: bool = True) -> dict[str, ZooEntry]:
    """Every zoo entry by lower-case id: the packaged zoo, then ``CLUSTERSIM_MODELS``, then ``extra_dirs``."""
    entries = dict(_packaged())
    for path in expand_toml_paths(user_paths(ENV_VAR, extra_dirs, use_env=use_env), what="model directory or file"):
        entries.update(read_zoo_file(path, entries))
    return entries


def _check_aliases(entries: dict[str, ZooEntry], path: Path) -> None:
    """No alias is an entry's id or another entry's alias (a name names one shape); ``path``: the file read last."""
    owners: dict[str, str] = {}
    for key, entry in entries.items():
        for alias in entry.aliases:
            owner = alias if alias in entries else owners.setdefault(alias, key)
            if owner != key:
                rule = f"alias {alias!r} already names model {owner!r}"
                raise CatalogFileError(str(path), key, "aliases", alias, rule)


@lru_cache(maxsize=1)
def _packaged() -> dict[str, ZooEntry]:
    folder = resources.files("clustersim.catalog") / "models"
    entries: dict[str, ZooEntry] = {}
    for path in sorted(Path(str(item)) for item in folder.iterdir() if item.name.endswith(".toml")):
        for key, entry in read_zoo_file(path, entries).items():
            if key in entries:
                raise CatalogFileError(str(path), key, None, None, f"duplicate model id (also in {entries[key].path})")
            entries[key] = entry
        _check_aliases(entries, path)
    return entries


def _looks_like_path(spec: str) -> bool:
    return spec.endswith((".toml", ".json")) or "/" in spec or os.sep in spec


def read_zoo_file(path: Path, known: Mapping[str, ZooEntry] | None = None) -> dict[str, ZooEntry]:
    """The models of one zoo TOML file by lower-case id (``known``: the zoo read before it, which ``based_on``
    may name); ``CatalogFileError`` or ``ClusterSimError`` naming the file, entry, field, value and rule.
    ``source`` defaults to the file's path."""
    data = read_toml(path, "model file")
    if "layers" in data:  # a single model written without a table header
        data = {path.stem: data}
    entries: dict[str, ZooEntry] = {}
    read: dict[str, dict[str, Any]] = {}  # each table's model fields, its base's merged in
    for key, table in data.items():
        if not isinstance(table, dict):
            raise CatalogFileError(str(path), key, None, table, "write each model as a [model-id] table")
        if table and "layers" not in table and all(isinstance(v, dict) for v in table.values()):
            raise CatalogFileError(str(path), key, None, None, 'quote an id with a dot: ["llama3.1-8b"]')
        fields = dict(table)
        source = fields.pop("source", str(path))
        if not isinstance(source, str) or not source.strip():
            raise CatalogFileError(str(path), key, "source", source, "source must be a non-empty string")
        aliases = fields.pop("aliases", [])
        if not isinstance(aliases, list) or not all(isinstance(a, str) and a.strip() for a in aliases):
            raise CatalogFileError(str(path), key, "aliases", aliases, "aliases must be a list of model ids")
        fields = _with_base(fields, path, key, read, known or {}, [k.lower() for k in data])
        read[key.lower()] = dict(fields)
        fields["name"] = key
        model = transformer_from_mapping(fields, where=f"{path}, entry {key!r}")
        own = tuple(alias.strip().lower() for alias in aliases)
        entries[key.lower()] = ZooEntry(model, source, str(path), own)
    _check_aliases(entries, path)
    return entries


def _with_base(
    fields: dict[str, Any],
    path: Path,
    key: str,
    read: Mapping[str, dict[str, Any]],
    known: Mapping[str, ZooEntry],
    in_file: Sequence[str],
) -> dict[str, Any]:
    """``fields`` over the model its ``based_on`` names (an earlier table of the file, else a known entry);
    ``in_file``: every table id of the file, to say so when the base comes after the table."""
    base_id = fields.pop("based_on", None)
    if base_id is None:
        return fields
    name = base_id.strip().lower() if isinstance(base_id, str) else ""
    if name in read:
        base = dict(read[name])
    elif name in known:
        base = known[name].model.model_dump(mode="json", exclude_defaults=True, exclude={"name"})
    elif name in in_file:
        rule = f"table {base_id!r} comes after this one in the file; write the base first"
        raise CatalogFileError(str(path), key, "based_on", base_id, rule)
    else:
        hint = close_matches(str(base_id), [*read, *known])
        rule = "no model read before this table has this id" + (f"; did you mean {', '.join(hint)}?" if hint else "")
        raise CatalogFileError(str(path), key, "based_on", base_id, rule)
    return {**base, **fields}
