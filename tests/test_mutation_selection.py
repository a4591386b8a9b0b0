"""The mutation runs' test selections (``benchmarks/mutation.py``): every test file that imports a group's module
judges its mutants, and every file a hand-kept list names exists."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def mutation() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutation_selection", ROOT / "benchmarks" / "mutation.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_importers_are_found_by_their_import_statements(mutation: ModuleType) -> None:
    # test_speculative.py imports the simulator (``from clustersim.serving.simulate import ...``), which the
    # hand-kept list of the first serving_simulate run missed
    assert "tests/serving/test_speculative.py" in mutation.importers("serving_simulate")
    assert "tests/serving/test_simulate.py" in mutation.importers("serving_simulate")
    # a test that imports none of the group's modules is not one
    assert "tests/network/transport/test_tcp_survivors.py" not in mutation.importers("serving_simulate")


def test_every_group_selects_every_importer_and_its_survivor_tests(mutation: ModuleType) -> None:
    unselected = {}
    for group in mutation.GROUPS:
        selection = mutation._selection(group)
        wanted = [*mutation.importers(group), *mutation.SURVIVOR_TESTS.get(group, [])]
        missing = [
            t for t in wanted if not mutation._within(t, selection) and t not in mutation.LEFT_OUT.get(group, {})
        ]
        if missing:
            unselected[group] = missing
    assert unselected == {}


def test_every_named_test_path_exists(mutation: ModuleType) -> None:
    named = {
        path.split("::")[0]
        for paths in (
            *mutation.GROUP_TESTS.values(),
            *mutation.SURVIVOR_TESTS.values(),
            mutation.TEST_SELECTION,
            mutation.SLOW_TESTS,
            *(list(reasons) for reasons in mutation.LEFT_OUT.values()),
        )
        for path in paths
    }
    assert sorted(p for p in named if not (ROOT / p).exists()) == []


def test_a_left_out_importer_stays_out_of_the_selection(mutation: ModuleType) -> None:
    assert "tests/serving/test_simulate.py" in mutation.importers("request_report")
    assert "tests/serving/test_simulate.py" not in mutation._selection("request_report")


def test_a_recheck_goes_on_only_under_the_same_tests(mutation: ModuleType) -> None:
    """A recheck's verdicts are keyed by its tests' names and contents: the same files give the same fingerprint,
    another file or another order another."""
    one = ["tests/serving/test_simulate_survivors.py"]
    two = [*one, "tests/serving/test_replica_engine.py"]
    assert mutation._tests_fingerprint(one) == mutation._tests_fingerprint(list(one))
    assert len({mutation._tests_fingerprint(t) for t in (one, two, two[::-1])}) == 3
