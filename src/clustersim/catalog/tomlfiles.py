"""The one way clustersim reads its TOML files: the catalog, the model zoo, the efficiencies and the
calibrations.

* :func:`read_toml` reads one file; every failure is a ``CatalogFileError`` naming the file and the
  problem.
* :func:`expand_toml_paths` turns the user's paths (files, or directories of ``*.toml``) into files,
  and :func:`env_paths` reads such paths from an environment variable (separated by ``os.pathsep``).
* :func:`overlay_tables` reads a packaged file of named tables and the user's files over it, merged
  table by table and field by field; ``based_on = "<table>"`` starts a new table from a known one.
  :func:`validate_tables` turns the merged tables into validated records, and
  :func:`load_calibration` into one calibration record whose fields are the tables (each table holds
  ``value``, or the fields of a nested record, with a ``source`` and an optional ``fitted`` note).
  Any table may also hold a fit's manifest (``METADATA``: ``prior``, ``single_source``, ``fitted_on``, ``residual``,
  checked by :func:`check_metadata`), which the records themselves never see.
* :func:`update_toml_file` writes fitted values back into such a file (a calibration script's job),
  keeping its header comment and every ``source``.

A module that ships such a file names it once in :mod:`clustersim.catalog.overlay` (``RecordFile``,
``CalibrationFile``), which reads it with the user's files from its environment variable over it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tomllib
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, TypeAdapter, ValidationError

from clustersim.catalog.toml_cache import parse_toml
from clustersim.errors import CatalogFileError, close_matches, validation_problems

M = TypeVar("M", bound=BaseModel)
C = TypeVar("C")
# The fit's manifest beside a fitted table (clustersim.validation.manifest): the fields held as stated
# priors (field -> the prior's source), the fitted fields only one source informs (field -> why that is
# accepted), the case ids the others were fitted on, and the fit's residual.
METADATA = ("prior", "single_source", "fitted_on", "residual")
_NOTED = {"prior": "the prior's source", "single_source": "why one source is accepted"}
PROVENANCE = ("source", "fitted", *METADATA)


def read_toml(path: str | Path, what: str = "file") -> dict[str, Any]:
    """The parsed TOML document at ``path``; ``CatalogFileError`` naming the file and the problem."""
    try:
        return parse_toml(Path(path).expanduser().read_bytes().decode("utf-8"))
    except FileNotFoundError:
        raise CatalogFileError(str(path), None, None, None, f"no such {what}") from None
    except tomllib.TOMLDecodeError as exc:
        raise CatalogFileError(str(path), None, None, None, f"cannot read the file: not valid TOML: {exc}") from None
    except UnicodeDecodeError as exc:
        rule = f"cannot read the file: not UTF-8 text ({exc.reason} at byte {exc.start}); TOML files are UTF-8"
        raise CatalogFileError(str(path), None, None, None, rule) from None
    except OSError as exc:
        raise CatalogFileError(str(path), None, None, None, f"cannot read the file: {exc}") from None


def packaged_toml(package: str, name: str) -> tuple[str, dict[str, Any]]:
    """``(path, document)`` of the TOML file ``name`` shipped in ``package``."""
    item = resources.files(package).joinpath(name)
    try:
        return str(item), parse_toml(item.read_text("utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise CatalogFileError(str(item), None, None, None, f"cannot read the file: not valid TOML: {exc}") from None


def packaged_path(package: str, name: str) -> Path:
    """The file system path of the file ``name`` shipped in ``package`` (for the calibration scripts)."""
    return Path(str(resources.files(package).joinpath(name)))


def expand_toml_paths(paths: Iterable[str | Path], what: str = "file or directory") -> list[Path]:
    """The TOML files named by ``paths``: a directory's ``*.toml`` (sorted), or a file itself."""
    files: list[Path] = []
    for raw in paths:
        path = Path(raw).expanduser()
        if path.is_dir():
            files.extend(sorted(path.glob("*.toml")))
        elif path.is_file():
            files.append(path)
        else:
            raise CatalogFileError(str(path), None, None, None, f"no such {what}")
    return files


def env_paths(env_var: str) -> list[str]:
    """The paths in the environment variable ``env_var``, separated by ``os.pathsep`` (empty: none)."""
    return [p for p in os.environ.get(env_var, "").split(os.pathsep) if p]


def user_paths(env_var: str, extra: Sequence[str | Path], *, use_env: bool) -> tuple[str, ...]:
    """The user's files: those in ``env_var`` (if ``use_env``), then ``extra``, as strings."""
    return (*(env_paths(env_var) if use_env else ()), *(str(p) for p in extra))


# ---- packaged tables with the user's files over them ------------------------------------------------


@dataclass(frozen=True)
class Table:
    """The merged fields of one named table and the file that last changed it."""

    fields: dict[str, Any]
    path: str


def merge_tables(
    documents: Iterable[tuple[str, Mapping[str, Any]]], *, entry: str = "table", own_provenance: bool = False
) -> dict[str, Table]:
    """Merge documents ``(path, data)`` of named tables, later ones over earlier ones, field by field.

    ``based_on = "<name>"`` starts a table from an earlier one (its ``fitted`` note is not carried
    over, nor the base's sub-table values of fields the new table sets itself: a profile that states its
    own attention rate is not overridden by its base's per-family one). With ``own_provenance``, a later
    file that changes a table and gives no ``source`` makes its own path the source, and drops the earlier
    ``fitted`` note: a value says where it came from.
    """
    merged: dict[str, Table] = {}
    for path, data in documents:
        for name, fields in data.items():
            if not isinstance(fields, dict):
                raise CatalogFileError(path, name, None, fields, f"each {entry} is a table of fields")
            fields = dict(fields)
            base = fields.pop("based_on", None)
            start = dict(merged[name].fields) if name in merged else {}
            if base is not None:
                if not isinstance(base, str) or base not in merged:
                    hint = close_matches(str(base), list(merged))
                    did = f"did you mean {', '.join(hint)}? " if hint else ""
                    rule = f"no such {entry} ({did}known: {', '.join(merged)})"
                    raise CatalogFileError(path, name, "based_on", base, rule)
                fit_only = ("fitted", "fitted_on", "residual", "single_source")
                start = {k: v for k, v in merged[base].fields.items() if k not in fit_only}
                start = _without_shadowed_subtables(start, fields)
            if own_provenance and name in merged and fields:
                start = {k: v for k, v in start.items() if k not in PROVENANCE}
                fields.setdefault("source", f"set in {path}")
            merged[name] = Table({**start, **fields}, path)
    return merged


def _without_shadowed_subtables(start: dict[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``start`` with each sub-table (e.g. ``family.<name>``) stripped of the fields ``own`` sets at top level."""
    out = dict(start)
    for key, value in start.items():
        if key in own or not isinstance(value, dict):
            continue
        subs = {name: {k: v for k, v in sub.items() if k not in own} if isinstance(sub, dict) else sub
                for name, sub in value.items()}  # fmt: skip
        out[key] = {name: sub for name, sub in subs.items() if sub != {}}
    return out


def overlay_tables(
    package: str, name: str, user_files: Sequence[str], *, what: str, entry: str, own_provenance: bool = False
) -> dict[str, Table]:
    """The packaged file ``name`` of ``package`` with ``user_files`` (files or directories) merged over it."""
    documents: list[tuple[str, Mapping[str, Any]]] = [packaged_toml(package, name)]
    documents += [(str(path), read_toml(path, what)) for path in expand_toml_paths(user_files, what)]
    return merge_tables(documents, entry=entry, own_provenance=own_provenance)


def validate_tables(tables: Mapping[str, Table], model: type[M]) -> dict[str, M]:
    """Each merged table as a ``model``; ``CatalogFileError`` naming the file, table, field, value and rule."""
    out: dict[str, M] = {}
    for name, table in tables.items():
        check_metadata(table, name, tuple(model.model_fields))
        fields = {k: v for k, v in table.fields.items() if k not in METADATA or k in model.model_fields}
        try:
            out[name] = model.model_validate(fields)
        except ValidationError as exc:
            raise CatalogFileError(table.path, name, None, None, validation_problems(exc.errors())) from None
    return out


def check_metadata(table: Table, name: str, fields: Sequence[str]) -> None:
    """The manifest keys of a table, if any, are well formed: ``prior`` and ``single_source`` tables
    naming some of ``fields``, each with its words; ``fitted_on`` a list of case ids; ``residual`` >= 0."""
    for kind, words in _NOTED.items():
        noted = table.fields.get(kind, {})
        if not isinstance(noted, dict):
            raise CatalogFileError(table.path, name, kind, noted, f'{kind} is a table: field = "{words}"')
        for key, why in noted.items():
            if key not in fields:
                hint = close_matches(key, list(fields))
                did = f"did you mean {', '.join(hint)}? " if hint else ""
                raise CatalogFileError(
                    table.path, name, f"{kind}.{key}", why, f"no such field ({did}valid: {', '.join(fields)})"
                )
            if not isinstance(why, str) or not why.strip():
                raise CatalogFileError(
                    table.path, name, f"{kind}.{key}", why, f"{kind}.{key} needs {words} (a non-empty string)"
                )
    fitted_on = table.fields.get("fitted_on", [])
    if not isinstance(fitted_on, list) or not all(isinstance(i, str) for i in fitted_on):
        raise CatalogFileError(table.path, name, "fitted_on", fitted_on, "fitted_on is a list of case ids (strings)")
    residual = table.fields.get("residual", 0.0)
    if isinstance(residual, bool) or not isinstance(residual, int | float) or not residual >= 0:
        raise CatalogFileError(table.path, name, "residual", residual, "residual is a number >= 0")


# ---- calibrations: one record whose fields are the tables -------------------------------------------


@dataclass(frozen=True)
class CalibrationEntry:
    """One calibrated constant as its file gives it: the value (or values), where it comes from, when fitted."""

    name: str
    value: Any
    source: str
    fitted: str | None
    path: str


def _nested_fields(cls: type[Any]) -> dict[str, tuple[str, ...] | None]:
    """For each field of ``cls``: the field names of its type when that is itself a dataclass (a table
    of values), else None."""
    hints = typing.get_type_hints(cls)
    return {
        f.name: tuple(g.name for g in dataclasses.fields(hints[f.name]))
        if dataclasses.is_dataclass(hints[f.name])
        else None
        for f in dataclasses.fields(cls)
    }


def calibration_from_tables(cls: type[C], tables: Mapping[str, Table]) -> tuple[C, dict[str, CalibrationEntry]]:
    """A calibration dataclass ``cls`` (validated by pydantic) from merged tables, one per field.

    A table holds ``value`` (or, for a field that is itself a dataclass, that record's fields), a
    ``source`` and optionally a ``fitted`` note. Every problem is a ``CatalogFileError`` naming the
    file, the table, the field, the value and the rule.
    """
    nested_fields = _nested_fields(cls)
    names = list(nested_fields)
    values: dict[str, Any] = {}
    entries: dict[str, CalibrationEntry] = {}
    for name, table in tables.items():
        if name not in names:
            hint = close_matches(name, names)
            did = f"did you mean {', '.join(hint)}? " if hint else ""
            raise CatalogFileError(table.path, name, None, None, f"unknown entry ({did}valid: {', '.join(names)})")
        nested = nested_fields[name]
        allowed = (*(nested or ("value",)), *PROVENANCE)  # the message leaves out the manifest keys (METADATA)
        check_metadata(table, name, nested or ("value",))
        for key in table.fields:
            if key not in allowed:
                rule = f"unknown field (valid: {', '.join(k for k in allowed if k not in METADATA)})"
                raise CatalogFileError(table.path, name, key, table.fields[key], rule)
        source, fitted = table.fields.get("source"), table.fields.get("fitted")
        if not isinstance(source, str) or not source.strip():
            raise CatalogFileError(table.path, name, "source", source, "every value needs a non-empty source string")
        if fitted is not None and not isinstance(fitted, str):
            raise CatalogFileError(table.path, name, "fitted", fitted, "fitted is a note (a string)")
        if nested is None:
            if "value" not in table.fields:
                raise CatalogFileError(table.path, name, "value", None, "missing: give the value")
            values[name] = table.fields["value"]
        else:
            values[name] = {k: v for k, v in table.fields.items() if k not in PROVENANCE}
        entries[name] = CalibrationEntry(name, values[name], source, fitted, table.path)
    missing = [n for n in names if n not in tables]
    if missing:
        path = next(iter(tables.values())).path if tables else "(no file)"
        raise CatalogFileError(path, None, None, None, f"missing entries: {', '.join(missing)}")
    try:
        record = TypeAdapter(cls).validate_python(values)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = [str(part) for part in first["loc"]]
        table = tables[loc[0]]
        field = ".".join(loc[1:]) if len(loc) > 1 else "value"
        more = exc.error_count() - 1
        rule = first["msg"] + (f" (and {more} more problem{'s' if more > 1 else ''})" if more else "")
        raise CatalogFileError(table.path, loc[0], field, first.get("input"), rule) from None
    return record, entries


@functools.lru_cache(maxsize=32)
def load_calibration(
    cls: type[C], package: str, name: str, user_files: tuple[str, ...] = ()
) -> tuple[C, dict[str, CalibrationEntry]]:
    """The calibration ``cls`` from the packaged ``name`` with ``user_files`` over it, and each entry's
    provenance. The same inputs return the same (cached) objects."""
    tables = overlay_tables(package, name, user_files, what="calibration file", entry="entry", own_provenance=True)
    return calibration_from_tables(cls, tables)


# ---- writing fitted values back -----------------------------------------------------------------------


def header_comment(text: str) -> str:
    """The comment lines (and blank lines) at the top of a TOML text, up to the first table or key."""
    lines = []
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            break
        lines.append(line)
    return "\n".join(lines).strip("\n")


def update_toml_file(path: str | Path, updates: Mapping[str, Mapping[str, Any]], *, fitted: str | None = None) -> None:
    """Set ``updates`` (table name -> field -> value) in the TOML file at ``path``, and ``fitted`` in each
    updated table; every other table, field and ``source`` and the header comment stay as they were.
    Needs ``tomli-w`` (the ``dev`` extra). The file is read back to check it holds what was written."""
    import tomli_w

    path = Path(path)
    text = path.read_text("utf-8")
    data = tomllib.loads(text)
    for name, fields in updates.items():
        if name not in data or not isinstance(data[name], dict):
            raise CatalogFileError(str(path), name, None, None, "no such table to update")
        data[name].update(fields)
        if fitted is not None:
            data[name]["fitted"] = fitted
    header = header_comment(text)
    body = tomli_w.dumps(data)
    path.write_text((header + "\n\n" if header else "") + body, encoding="utf-8")
    if read_toml(path) != data:  # pragma: no cover - tomli-w writes what it is given
        raise CatalogFileError(str(path), None, None, None, "the written file does not read back the same")
