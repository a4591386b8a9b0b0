"""Load the catalog (the package's TOML files, then the user's) and look entries up by id or alias.

A catalog file holds arrays of tables named by kind (``[[accelerator]]``, ``[[instance]]``, ...).
Files are read in order: the embedded data, then each directory in ``CLUSTERSIM_CATALOG``
(separated by ``os.pathsep``), then the directories or files given to ``load_catalog``. An entry
whose id is already known replaces it; ``based_on = "<id>"`` starts from a known entry and changes
only the fields given. Lookup is case-insensitive and treats spaces, ``_`` and ``-`` alike.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from clustersim.catalog.schema import (
    ENTRY_TYPES,
    REFERENCES,
    Accelerator,
    Entry,
    Instance,
    Kind,
)
from clustersim.catalog.tomlfiles import expand_toml_paths, read_toml, user_paths
from clustersim.errors import CatalogFileError, UnknownNameError, close_matches

ENV_VAR = "CLUSTERSIM_CATALOG"
# Words people write for a kind (a [[gpu]] table is an [[accelerator]]).
_KIND_SYNONYMS = {
    "gpu": "accelerator",
    "gpus": "accelerator",
    "chip": "accelerator",
    "tpu": "accelerator",
    "accelerators": "accelerator",
    "node": "instance",
    "server": "instance",
    "instances": "instance",
    "instance_type": "instance",
    "nic": "network",
    "efa": "network",
    "adapter": "network",
    "filesystem": "storage",
    "file_system": "storage",
    "fsx": "storage",
    "nvlink": "link",
    "nvswitch": "switch",
    "ultracluster": "cluster",
}
_SEPARATORS = re.compile(r"[\s_]+")
E = TypeVar("E", bound=Entry)


def normalize(name: str) -> str:
    """The lookup key of a name: lowercase, with runs of spaces and underscores as one '-'."""
    return _SEPARATORS.sub("-", name.strip().lower())


@dataclass(frozen=True)
class Catalog:
    """Validated entries by kind and id, with an index of ids and aliases."""

    entries: dict[Kind, dict[str, Entry]]
    origins: dict[str, str] = field(default_factory=dict)
    _index: dict[str, str] = field(default_factory=dict, repr=False)
    _kinds: dict[str, Kind] = field(default_factory=dict, repr=False)

    def __len__(self) -> int:
        return sum(len(by_id) for by_id in self.entries.values())

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize(name) in self._index

    def ids(self, kind: Kind | str | None = None) -> list[str]:
        """Ids of every entry, or of one kind, in file order."""
        return [entry.id for entry in self.list(kind)]

    def list(self, kind: Kind | str | None = None) -> list[Entry]:
        """Every entry, or the entries of one kind."""
        if kind is None:
            return [entry for by_id in self.entries.values() for entry in by_id.values()]
        return list(self.entries.get(_kind(kind), {}).values())

    def get(self, name: str, kind: Kind | str | None = None) -> Entry:
        """The entry with this id or alias; ``UnknownNameError`` with close matches if none."""
        wanted = _kind(kind) if kind is not None else None
        entry_id = self._index.get(normalize(name))
        if entry_id is not None and (wanted is None or self._kinds[entry_id] is wanted):
            return self.entries[self._kinds[entry_id]][entry_id]
        field = wanted.value if wanted else "catalog_entry"
        names = self.ids(wanted)
        aliases = [a for e in self.list(wanted) for a in e.aliases]
        resolved = []
        for suggestion in close_matches(name, names + aliases):
            target = self._index[normalize(suggestion)]
            resolved.append(target if target == suggestion else f"{suggestion} (= {target})")
        raise UnknownNameError(field, name, names, resolved)

    def typed(self, name: str, cls: type[E]) -> E:
        """The entry ``name`` as an instance of ``cls`` (its kind is ``cls.kind``)."""
        entry = self.get(name, cls.kind)
        assert isinstance(entry, cls)
        return entry

    def accelerator(self, name: str) -> Accelerator:
        """The accelerator with this id or alias."""
        return self.typed(name, Accelerator)

    def instance(self, name: str) -> Instance:
        """The instance type with this id or alias."""
        return self.typed(name, Instance)

    def kind_of(self, entry_id: str) -> Kind:
        """The kind of the entry with this exact id."""
        return self._kinds[entry_id]


def _kind(kind: Kind | str) -> Kind:
    try:
        return Kind(kind)
    except ValueError:
        raise UnknownNameError("kind", str(kind), [k.value for k in Kind]) from None


def default_data_files() -> list[Path]:
    """The TOML files embedded in the package, in name order."""
    data = resources.files("clustersim.catalog") / "data"
    return sorted(Path(str(item)) for item in data.iterdir() if item.name.endswith(".toml"))


def catalog_files(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> list[Path]:
    """Every file ``load_catalog`` would read, in order."""
    return default_data_files() + expand_toml_paths(user_paths(ENV_VAR, extra, use_env=use_env))


def load_catalog(extra: Sequence[str | Path] = (), *, use_env: bool = True) -> Catalog:
    """Read, merge and validate the embedded catalog and the user's files (the same unchanged files give
    the same, cached, catalog).

    Raises ``CatalogFileError`` naming the file, the entry, the field, the value and the rule.
    """
    files = catalog_files(extra, use_env=use_env)
    try:
        stamps = tuple((str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in files)
    except OSError:
        return build_catalog([(str(path), read_toml(path)) for path in files])  # names the unreadable file
    return _load(stamps)


@functools.lru_cache(maxsize=16)
def _load(stamps: tuple[tuple[str, int, int], ...]) -> Catalog:
    """The catalog of these files as they are (path, modification time, size): read once per process."""
    return build_catalog([(path, read_toml(path)) for path, _, _ in stamps])


def build_catalog(documents: Iterable[tuple[str, Any]]) -> Catalog:
    """Validate parsed TOML documents ``(path, data)`` into a ``Catalog`` (later ones override)."""
    raw: dict[str, dict[str, Any]] = {}
    kinds: dict[str, Kind] = {}
    origins: dict[str, str] = {}
    for path, data in documents:
        for kind, entry_id, table in _tables(path, data):
            if entry_id in kinds and kinds[entry_id] is not kind:
                raise CatalogFileError(
                    path, entry_id, "id", entry_id, f"id already used by a {kinds[entry_id].value} entry"
                )
            raw[entry_id] = _resolve_base(path, entry_id, table, raw, kinds, kind)
            kinds[entry_id] = kind
            origins[entry_id] = path
    entries: dict[Kind, dict[str, Entry]] = {kind: {} for kind in Kind}
    for entry_id, table in raw.items():
        entries[kinds[entry_id]][entry_id] = _validate(origins[entry_id], kinds[entry_id], entry_id, table)
    index = _build_index(entries, origins)
    catalog = Catalog(entries=entries, origins=origins, _index=index, _kinds=kinds)
    _check_references(catalog)
    return catalog


def _tables(path: str, data: Any) -> Iterable[tuple[Kind, str, dict[str, Any]]]:
    if not isinstance(data, dict):
        raise CatalogFileError(path, None, None, None, "a catalog file is a TOML document of [[kind]] tables")
    for key, tables in data.items():
        try:
            kind = Kind(key)
        except ValueError:
            valid = ", ".join(f"[[{k.value}]]" for k in Kind)
            hint = [_KIND_SYNONYMS[key.lower()]] if key.lower() in _KIND_SYNONYMS else close_matches(key, Kind)
            did = f" (did you mean [[{hint[0]}]]?)" if hint else ""
            raise CatalogFileError(path, None, key, None, f"unknown kind{did}; valid: {valid}") from None
        if not isinstance(tables, list):
            raise CatalogFileError(path, None, key, None, f"write entries as [[{key}]] tables")
        for position, table in enumerate(tables, start=1):
            label = f"{key} #{position}"
            if not isinstance(table, dict):
                raise CatalogFileError(path, label, None, None, "an entry must be a table")
            entry_id = table.get("id")
            if not isinstance(entry_id, str) or not entry_id.strip():
                raise CatalogFileError(path, label, "id", entry_id, "every entry needs a non-empty string id")
            yield kind, entry_id, table


def _resolve_base(
    path: str,
    entry_id: str,
    table: dict[str, Any],
    raw: dict[str, dict[str, Any]],
    kinds: dict[str, Kind],
    kind: Kind,
) -> dict[str, Any]:
    base_id = table.get("based_on")
    if base_id is None:
        return table
    if not isinstance(base_id, str) or base_id not in raw or kinds[base_id] is not kind:
        known = [i for i, k in kinds.items() if k is kind]
        hint = close_matches(str(base_id), known)
        rule = f"no earlier {kind.value} entry with this id" + (f"; did you mean {', '.join(hint)}?" if hint else "")
        raise CatalogFileError(path, entry_id, "based_on", base_id, rule)
    base = dict(raw[base_id])
    if base_id != entry_id:
        base.pop("aliases", None)  # aliases name the base entry, not its variant
    own = {k: v for k, v in table.items() if k != "based_on"}
    return _merge(base, own)


def _merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in override.items():
        # A figure, price or flag (it has a value or a source) is replaced whole; other tables merge.
        is_sourced = "value" in value or "source" in value if isinstance(value, dict) else True
        if isinstance(value, dict) and isinstance(merged.get(key), dict) and not is_sourced:
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _validate(path: str, kind: Kind, entry_id: str, table: dict[str, Any]) -> Entry:
    try:
        return ENTRY_TYPES[kind].model_validate(table)
    except ValidationError as exc:
        first = exc.errors()[0]
        location = ".".join(str(part) for part in first["loc"])
        message = str(first["msg"]).removeprefix("Value error, ")
        value = first.get("input") if first["type"] != "missing" else None
        named = re.match(r"^([\w.\[\]]+): (.*)$", message)
        if not location and named:  # an entry-wide check that names the field itself
            location, message, value = named.group(1), named.group(2), None
        more = exc.error_count() - 1
        rule = message + (f" (and {more} more problem{'s' if more > 1 else ''} in this entry)" if more else "")
        if isinstance(value, dict | BaseModel):
            value = None
        raise CatalogFileError(path, entry_id, location or None, value, rule) from None


def _build_index(entries: dict[Kind, dict[str, Entry]], origins: dict[str, str]) -> dict[str, str]:
    index: dict[str, str] = {}
    for by_id in entries.values():
        for entry in by_id.values():
            index[normalize(entry.id)] = entry.id
    for by_id in entries.values():
        for entry in by_id.values():
            for alias in entry.aliases:
                key = normalize(alias)
                owner = index.setdefault(key, entry.id)
                if owner != entry.id:
                    rule = f"alias already names {owner!r}; aliases must be unique"
                    raise CatalogFileError(origins[entry.id], entry.id, "aliases", alias, rule)
    return index


def _dotted(entry: Entry, dotted: str) -> list[str]:
    values: list[Any] = [entry]
    for part in dotted.split("."):
        next_values: list[Any] = []
        for value in values:
            items = value if isinstance(value, tuple) else (value,)
            next_values.extend(getattr(item, part) for item in items if item is not None)
        values = next_values
    return [v for v in values if v is not None]


def _check_references(catalog: Catalog) -> None:
    for kind, references in REFERENCES.items():
        for entry in catalog.list(kind):
            for dotted, target in references:
                for value in _dotted(entry, dotted):
                    if value not in catalog.entries[target]:
                        hint = close_matches(value, catalog.ids(target))
                        rule = f"no {target.value} with this id" + (
                            f"; did you mean {', '.join(hint)}?" if hint else ""
                        )
                        raise CatalogFileError(catalog.origins[entry.id], entry.id, dotted, value, rule)
