"""How many independent sources identify each shipped fitted constant.

A constant is fitted when its table of the calibration file lists the cases it was fitted on
(``fitted_on``) and does not hold it as a ``prior``. Its identifying sources are the sources of those
cases that inform it (``clustersim.validation.informing``). A fitted constant needs at least
``MIN_SOURCES`` of them, or a ``single_source`` exemption beside it saying why one is accepted
(``clustersim.validation.manifest``); ``unidentified`` lists those that have neither.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clustersim.catalog.registry import Catalog
from clustersim.validation.cases import Case, default_paths, read_all
from clustersim.validation.fit import FitSpec, prepare_cases
from clustersim.validation.informing import informing
from clustersim.validation.manifest import priors, read_manifest, single_source_exemptions

MIN_SOURCES = 2
BUNDLED_FILE = {"training": "training.jsonl", "collective": "collectives.jsonl", "inference": "inference.jsonl"}


@dataclass(frozen=True)
class Identification:
    """A fitted constant, the sources that identify it, and the exemption where there is one."""

    constant: str
    sources: frozenset[str]
    exemption: str | None

    @property
    def identified(self) -> bool:
        return len(self.sources) >= MIN_SOURCES or self.exemption is not None


def identify(spec: FitSpec[Any], catalog: Catalog, cases: Sequence[Case] | None = None) -> list[Identification]:
    """Every fitted constant of ``spec``'s shipped calibration with its identifying sources, over
    ``cases`` (default: the files of the spec's kind the fits read, the bundled copy's and the project's)."""
    if cases is None:
        cases = read_all(default_paths(BUNDLED_FILE[spec.kind]))
    manifest = read_manifest(spec, use_env=False)
    fitted_on = {i for entry in manifest.values() for i in entry.fitted_on}
    start = spec.current()
    prepared, _ = prepare_cases(spec, [c for c in cases if c.id in fitted_on], catalog, start)
    exempt = single_source_exemptions(manifest)
    return [
        Identification(i.constant.name, i.sources, exempt.get((i.constant.table, i.constant.key)))
        for i in informing(spec, prepared, start, priors=frozenset(priors(manifest)))
        if manifest.get(i.constant.table) is not None and manifest[i.constant.table].fitted_on
    ]


def unidentified(identifications: Sequence[Identification]) -> list[Identification]:
    """Those with fewer than ``MIN_SOURCES`` sources and no exemption."""
    return [i for i in identifications if not i.identified]
