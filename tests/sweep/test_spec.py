"""A spec expands into points in a fixed order, each with a stable id; a malformed spec is one clear error."""

import pytest

from clustersim.errors import ClusterSimError
from clustersim.sweep.spec import differences, parse_spec, point_id

GRID = """
command = "collective"
[options]
instance = "p5.48xlarge"
[grid]
op = ["all_reduce", "all_gather", "alltoall"]
nodes = [2, 4]
"""


def test_the_grid_is_the_product_in_the_spec_order_the_last_key_fastest():
    spec = parse_spec(GRID)
    points = spec.expand()
    assert spec.count() == len(points) == 6
    assert [(p.inputs["op"], p.inputs["nodes"]) for p in points] == [
        ("all_reduce", 2),
        ("all_reduce", 4),
        ("all_gather", 2),
        ("all_gather", 4),
        ("alltoall", 2),
        ("alltoall", 4),
    ]
    assert [p.seq for p in points] == list(range(6))
    assert all(p.inputs["instance"] == "p5.48xlarge" for p in points)


def test_points_are_listed_and_crossed_with_the_grid():
    spec = parse_spec(
        'command = "train"\n[options]\nmodel = "llama3-8b"\n[grid]\nnodes = [1, 2]\n'
        "[[points]]\ntp = 8\npp = 1\n[[points]]\ntp = 4\npp = 2\n"
    )
    points = spec.expand()
    assert [(p.inputs["nodes"], p.inputs["tp"], p.inputs["pp"]) for p in points] == [
        (1, 8, 1),
        (1, 4, 2),
        (2, 8, 1),
        (2, 4, 2),
    ]
    only_points = parse_spec('command = "reliability"\n[[points]]\nwork = "1d"\n[[points]]\nwork = "2d"\n')
    assert [p.inputs for p in only_points.expand()] == [{"work": "1d"}, {"work": "2d"}]


def test_a_point_id_depends_on_its_inputs_not_on_their_order_or_spelling():
    assert point_id("collective", {"op": "all_reduce", "nodes": 2}) == point_id(
        "collective", {"nodes": 2, "op": "all_reduce"}
    )
    assert point_id("collective", {"nodes": 2}) != point_id("collective", {"nodes": 4})
    assert point_id("collective", {"nodes": 2}) != point_id("train", {"nodes": 2})
    dashed = parse_spec('command = "train"\n[grid]\nglobal-batch = [8]\n').expand()[0]
    underscored = parse_spec('command = "train"\n[grid]\nglobal_batch = [8]\n').expand()[0]
    assert dashed.id == underscored.id and dashed.inputs == {"global-batch": 8}


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('command = "collective"\n[grid]\nnodes = 2\n', "grid.nodes must be a non-empty list"),
        ('command = "collective"\n[grid]\nnodes = []\n', "grid.nodes must be a non-empty list"),
        ('command = "collective"\n', "nothing to sweep"),
        ("[grid]\nnodes = [2]\n", "'command' must name the command"),
        ('command = "collective"\ngird = 1\n[grid]\nnodes = [2]\n', "unknown top-level key 'gird'"),
        (
            'command = "collective"\n[options]\nnodes = 2\n[grid]\nnodes = [2]\n',
            "'nodes' is both in [options] and [grid]",
        ),
        ('command = "collective"\n[grid]\nnodes = [2, 2]\n', "points 1 and 2 have the same inputs"),
        ('command = "collective"\n[grid]\nnodes = [{ a = 1 }]\n', "grid.nodes = {'a': 1}: a value must be"),
        ('command = "collective"\n[grid\n', "not valid TOML"),
    ],
)
def test_a_malformed_spec_is_refused_naming_what_is_wrong(text, named):
    with pytest.raises(ClusterSimError) as caught:
        parse_spec(text).expand()
    assert named in str(caught.value)
    assert "\n" not in str(caught.value)


def test_differences_name_each_changed_key():
    stored = parse_spec(GRID)
    assert differences(stored, parse_spec(GRID + "\n# a comment does not change the sweep\n")) == []
    changed = parse_spec(GRID.replace("nodes = [2, 4]", "nodes = [2, 8]").replace("p5.48xlarge", "p5e.48xlarge"))
    assert differences(stored, changed) == [
        "options.instance: store has 'p5.48xlarge', spec has 'p5e.48xlarge'",
        "grid.nodes: store has [2, 4], spec has [2, 8]",
    ]
