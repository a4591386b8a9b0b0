"""The executors: partitions cut in spec order, and a local worker that dies is replaced and its partition
tried again, up to ``retries`` times, then refused in one line."""

import json
import os
from pathlib import Path

import pytest

from clustersim.errors import ClusterSimError
from clustersim.sweep.execute import partition, run_local
from clustersim.sweep.spec import Point
from clustersim.sweep.store import Outcome

POINTS = [Point(seq, f"p{seq}", {"n": seq}) for seq in range(6)]


def echo_dying_once(marker_dir: str, items: list) -> list[Outcome]:
    """A runner whose worker dies the first time it meets point p2 (a marker file remembers it)."""
    marker = Path(marker_dir) / "died"
    if any(pid == "p2" for pid, _ in items) and not marker.exists():
        marker.touch()
        os._exit(1)
    return [Outcome(pid, json.dumps(inputs), None, 0.0) for pid, inputs in items]


def dying_always(marker_dir: str, items: list) -> list[Outcome]:
    """A runner whose worker dies at point p2, every time."""
    if any(pid == "p2" for pid, _ in items):
        os._exit(1)
    return [Outcome(pid, json.dumps(inputs), None, 0.0) for pid, inputs in items]


def test_partitions_are_consecutive_slices_in_spec_order():
    assert [[p.seq for p in part] for part in partition(POINTS, workers=1, size=4)] == [[0, 1, 2, 3], [4, 5]]
    assert len(partition(POINTS, workers=2)) == 6  # about four a worker, at least one point each
    assert [len(part) for part in partition([POINTS[0]] * 1000, workers=2)] == [64] * 15 + [40]


def test_a_partition_whose_worker_died_is_tried_again(tmp_path):
    parts = partition(POINTS, workers=2, size=2)
    finished = list(run_local(echo_dying_once, str(tmp_path), parts, workers=2, retries=2))
    assert sorted(f.partition for f in finished) == [0, 1, 2]
    by_partition = {f.partition: f for f in finished}
    assert by_partition[1].attempts == 2 and [o.id for o in by_partition[1].outcomes] == ["p2", "p3"]
    assert sorted(o.id for f in finished for o in f.outcomes) == [p.id for p in POINTS]


def test_a_partition_that_always_kills_its_worker_is_given_up(tmp_path):
    parts = partition(POINTS, workers=2, size=2)
    with pytest.raises(ClusterSimError, match="a worker died running partition 1 2 times; giving up"):
        list(run_local(dying_always, str(tmp_path), parts, workers=2, retries=1))


@pytest.mark.parametrize("attempt", range(3))
def test_only_the_partition_that_kills_its_worker_is_blamed(tmp_path, attempt):
    """A death breaks the whole pool and fails every partition in it; the partitions it took down are tried
    in pools of their own, so the one given up is the one that dies there (p2's), however the break fell."""
    parts = partition(POINTS, workers=2, size=1)
    with pytest.raises(ClusterSimError, match="a worker died running partition 2 1 times; giving up"):
        list(run_local(dying_always, str(tmp_path), parts, workers=2, retries=0))


def test_a_death_in_a_shared_pool_is_not_charged_to_the_partitions_it_took_down(tmp_path):
    """With no retries, a partition caught in another's break still runs (alone), and so does the one whose
    worker died once: its death in the shared pool could not be laid to it."""
    parts = partition(POINTS, workers=2, size=1)
    finished = list(run_local(echo_dying_once, str(tmp_path), parts, workers=2, retries=0))
    assert sorted(o.id for f in finished for o in f.outcomes) == [p.id for p in POINTS]
