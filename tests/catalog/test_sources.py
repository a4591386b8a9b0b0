"""Every catalogued figure cites a document outside this repository (a datasheet, a user guide, a source file
at a commit, a price list with its date), never the project's own notes, and every figure is a positive
finite number (issue 11)."""

import re
from pathlib import Path

import pytest

from clustersim.catalog.describe import describe
from clustersim.catalog.registry import build_catalog, default_data_files, load_catalog
from clustersim.catalog.tomlfiles import read_toml
from clustersim.errors import CatalogFileError

CATALOG = load_catalog(use_env=False)
# Files of this project (its notes in ../shared/reference, its source tree): a citation of one of these is
# not a source a reader can check.
INTERNAL = re.compile(
    r"(?:hardware|network|prior-art)\.md|reference/|/work/|\.\./shared|§|src/clustersim|(?<![\w-])tests/"
)


def _sources() -> list[tuple[str, str, str]]:
    return [(entry.id, row.path, row.source) for entry in CATALOG.list() for row in describe(entry) if row.source]


def test_every_source_names_a_document_outside_the_repository():
    sources = _sources()
    assert len(sources) > 300
    internal = [(entry, path, source) for entry, path, source in sources if INTERNAL.search(source)]
    assert internal == []
    words = [(entry, path, source) for entry, path, source in sources if len(re.findall(r"[A-Za-z]{2,}", source)) < 2]
    assert words == []


def test_no_catalog_file_points_at_the_project_notes():
    for path in default_data_files():
        text = path.read_text(encoding="utf-8")
        assert not INTERNAL.search(text), (path.name, INTERNAL.search(text))


def _with(kind: str, entry_id: str, field: str, value: object) -> list[tuple[str, object]]:
    documents = [(str(path), read_toml(path)) for path in default_data_files()]
    override = {kind: [{"id": entry_id, "based_on": entry_id, field: value}]}
    return [*documents, ("mine.toml", override)]


@pytest.mark.parametrize(
    ("kind", "entry_id", "field", "value", "rule"),
    [
        ("accelerator", "h100-sxm", "memory_bandwidth_bytes_per_s", {"value": 0, "source": "mine"}, "positive"),
        ("accelerator", "h100-sxm", "memory_bytes", {"value": "-1GiB", "source": "mine"}, "greater than or equal"),
        ("instance", "p5.48xlarge", "num_accelerators", {"value": 0, "source": "mine"}, "positive"),
        ("instance", "p5.48xlarge", "num_accelerators", {"value": 2.5, "source": "mine"}, "whole number"),
        ("instance", "p5.48xlarge", "vcpus", {"value": 1.5, "source": "mine"}, "whole number"),
        ("cluster", "ec2-ultracluster", "oversubscription", {"value": 0.5, "source": "mine"}, "at least 1"),
        (
            "instance",
            "p5.48xlarge",
            "on_demand",
            {"usd_per_hour": float("inf"), "as_of": "2026-01-01", "region": "us-east-1", "source": "mine"},
            "finite",
        ),
    ],
)
def test_a_figure_that_would_make_estimates_meaningless_is_refused(kind, entry_id, field, value, rule):
    with pytest.raises(CatalogFileError, match=rule) as info:
        build_catalog(_with(kind, entry_id, field, value))
    assert field in str(info.value) and "mine.toml" in str(info.value)


def test_an_unknown_kind_names_the_kinds_there_are(tmp_path: Path):
    with pytest.raises(CatalogFileError) as info:
        build_catalog([("gpu.toml", {"gpu": [{"id": "x"}]})])
    message = str(info.value)
    assert "did you mean [[accelerator]]" in message and "[[instance]]" in message and "[]" not in message
