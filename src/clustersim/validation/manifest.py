"""The fit's manifest and the stated priors, kept in the calibration files beside the fitted values.

Each fitted table of a calibration file (a family of ``compute/efficiency.toml``, an entry of
``network/calibration.toml`` or ``serving/calibration.toml``) may hold:

* ``fitted_on``: the ids of the ground-truth cases its fitted values were fitted on;
* ``residual``: the fit's objective over those cases at the written values (what it measures is in
  the ``fitted`` note, e.g. the mean over sources of the mean |log error|);
* ``prior``: a table ``field = "source"`` of the fields the data cannot pin down, held at their
  value on the stated source instead of fitted (``fit`` leaves them out);
* ``single_source``: a table ``field = "why"`` of the fitted fields that the cases of one source
  alone inform (``clustersim.validation.informing``), each with why that is accepted: a fitted
  constant needs two independent sources or this exemption (the suite checks it).

``benchmarks/calibrate_*.py --write`` writes ``fitted_on`` and ``residual`` (``manifest_updates``);
``prior`` is written by hand with its source. ``clustersim validate`` reads ``fitted_on`` to say, per
source, whether its cases were fitted on (``ValidationReport.fit_status``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clustersim.catalog.tomlfiles import Table, overlay_tables, read_toml, user_paths
from clustersim.validation.fit import Fit, FitSpec
from clustersim.validation.specs import SPECS

PRIOR, SINGLE_SOURCE, FITTED_ON, RESIDUAL = "prior", "single_source", "fitted_on", "residual"
RESIDUAL_DIGITS = 4


@dataclass(frozen=True)
class EntryManifest:
    """What one table of a calibration file says about its fit."""

    priors: dict[str, str]  # field -> the prior's source
    single_source: dict[str, str]  # field -> why one source is accepted
    fitted_on: tuple[str, ...]
    residual: float | None


def read_manifest(
    spec: FitSpec[Any], toml: str | Path | None = None, *, use_env: bool = True
) -> dict[str, EntryManifest]:
    """The manifest of each table of the spec's calibration file: ``toml`` alone when given (a file a
    script fits and writes), else the packaged file with the user's files over it."""
    if toml is not None:
        tables = {
            name: Table(dict(fields), str(toml)) for name, fields in read_toml(toml).items() if isinstance(fields, dict)
        }
    else:
        user_files = user_paths(spec.env_var, (), use_env=use_env)
        tables = overlay_tables(spec.package, spec.file_name, user_files, what="calibration file", entry="entry")
    return {name: _entry(table.fields) for name, table in tables.items()}


def _entry(fields: Mapping[str, Any]) -> EntryManifest:
    residual = fields.get(RESIDUAL)
    return EntryManifest(
        _noted(fields.get(PRIOR)),
        _noted(fields.get(SINGLE_SOURCE)),
        tuple(str(i) for i in fields.get(FITTED_ON) or ()),
        float(residual) if isinstance(residual, int | float) else None,
    )


def _noted(table: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}


def single_source_exemptions(manifest: Mapping[str, EntryManifest]) -> dict[tuple[str, str], str]:
    """``(table, field)`` -> why, of every fitted constant accepted with one informing source."""
    return {(table, key): why for table, entry in manifest.items() for key, why in entry.single_source.items()}


def priors(manifest: Mapping[str, EntryManifest]) -> set[tuple[str, str]]:
    """``(table, field)`` of every constant held as a stated prior."""
    return {(table, key) for table, entry in manifest.items() for key in entry.priors}


def fitted_case_ids(manifest: Mapping[str, EntryManifest]) -> frozenset[str] | None:
    """The ids of every case some constant was fitted on; None when the file holds no manifest."""
    if not any(entry.fitted_on for entry in manifest.values()):
        return None
    return frozenset(i for entry in manifest.values() for i in entry.fitted_on)


def fitted_on_by_kind(*, use_env: bool = True) -> dict[str, frozenset[str] | None]:
    """Per calibrated case kind, the ids of the cases its constants were fitted on (None: no manifest)."""
    return {kind: fitted_case_ids(read_manifest(spec, use_env=use_env)) for kind, spec in SPECS.items()}


def manifest_updates(fit: Fit[Any]) -> dict[str, dict[str, Any]]:
    """Per table: the fitted values, ``fitted_on`` (sorted case ids) and ``residual``, for
    ``update_toml_file``."""
    updates: dict[str, dict[str, Any]] = {}
    for group in fit.groups:
        for constant in group.constants:
            table = updates.setdefault(constant.table, {})
            table[constant.key] = fit.spec.get(fit.calibration, constant)
            table[FITTED_ON] = sorted(set(table.get(FITTED_ON, [])) | set(group.case_ids))
            table[RESIDUAL] = float(f"{group.residual:.{RESIDUAL_DIGITS}g}")
    return updates
