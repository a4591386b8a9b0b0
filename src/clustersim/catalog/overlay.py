"""A packaged TOML file with the user's files over it: the one loader behind the efficiencies, the
software and engine profiles and the calibrations.

A module names its file once, as a :class:`RecordFile` (named tables, each one validated record: the
efficiency per family, the profiles) or a :class:`CalibrationFile` (one record whose fields are the
tables, each with its source: the collective and serving calibrations), and keeps its own public
functions as one-line calls to it. Either reads the packaged file, then the files in its environment
variable (separated by ``os.pathsep``), then the ``extra`` paths the caller gives, merged field by
field (:func:`~clustersim.catalog.tomlfiles.overlay_tables`); the result is validated and cached by
the user's files, so the same inputs return the same objects.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar, cast

from pydantic import BaseModel

from clustersim.catalog.tomlfiles import CalibrationEntry, load_calibration, overlay_tables, user_paths, validate_tables

M = TypeVar("M", bound=BaseModel)
C = TypeVar("C")


@dataclass(frozen=True)
class RecordFile(Generic[M]):
    """The packaged file ``file_name`` of ``package``: named tables, each a ``model``.

    ``what`` names the file in messages ("efficiency file"), ``entry`` one of its tables ("family");
    with ``named``, each record's ``name`` field is its table's name.
    """

    model: type[M]
    package: str
    file_name: str
    env_var: str
    what: str
    entry: str
    named: bool = False

    def records(self, extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, M]:
        """The packaged records with the user's files (``env_var``, then ``extra``) merged over them field by
        field. The same inputs return the same (cached) table."""
        return load_records(self, user_paths(self.env_var, extra, use_env=use_env))


@functools.lru_cache(maxsize=64)
def load_records(source: RecordFile[Any], user_files: tuple[str, ...]) -> dict[str, Any]:
    """The records of ``source`` with ``user_files`` over them, cached by both (``cache_clear`` after a
    file changed on disk)."""
    tables = overlay_tables(source.package, source.file_name, user_files, what=source.what, entry=source.entry)
    records = validate_tables(tables, source.model)
    if source.named:
        return {name: record.model_copy(update={"name": name}) for name, record in records.items()}
    return records


class CalibrationFile(Generic[C]):
    """The packaged calibration file ``file_name`` of ``package``, read as one ``cls`` (see
    :func:`~clustersim.catalog.tomlfiles.load_calibration`); the packaged values are read once, here."""

    def __init__(self, cls: type[C], package: str, file_name: str, env_var: str) -> None:
        self.cls, self.package, self.file_name, self.env_var = cls, package, file_name, env_var
        # The packaged values (no user files): what the model was validated with.
        self.packaged: C = self.load(())[0]

    def load(self, user_files: tuple[str, ...]) -> tuple[C, dict[str, CalibrationEntry]]:
        """The calibration with ``user_files`` over the packaged file, and each entry's provenance (cached)."""
        cls: Any = self.cls  # a class is hashable (the cache key), which mypy cannot see of type[C]
        return cast(
            tuple[C, dict[str, CalibrationEntry]], load_calibration(cls, self.package, self.file_name, user_files)
        )

    def calibration(self, extra: Sequence[str | Path] = (), *, use_env: bool = True) -> C:
        """The packaged calibration with the user's files (``env_var``, then ``extra``) over it, field by
        field; the same inputs return the same (cached) object, no user files the packaged one."""
        user_files = user_paths(self.env_var, extra, use_env=use_env)
        return self.load(user_files)[0] if user_files else self.packaged

    def entries(self, extra: Sequence[str | Path] = (), *, use_env: bool = True) -> dict[str, CalibrationEntry]:
        """Each calibrated constant with its source, fitted note and file (see :meth:`calibration`)."""
        return self.load(user_paths(self.env_var, extra, use_env=use_env))[1]

    def default(self) -> C:
        """What a model uses when no calibration is given: the packaged values, with the files in
        ``env_var`` over them when it is set (checked on every call: cheap)."""
        return self.calibration() if os.environ.get(self.env_var) else self.packaged
