"""Whether a model splits over ``tp x pp`` devices, whatever the job: the layout rules that serving checks."""

from __future__ import annotations

from clustersim.errors import ClusterSimError
from clustersim.execution import LAYOUT_RULES, Layout, RuleInputs, raise_first_broken
from clustersim.workload.transformer import Transformer

# The rules that split a model over tp x pp devices, whatever the job (what serving checks).
MODEL_SPLIT_RULES = tuple(rule for rule in LAYOUT_RULES if rule.name in ("heads", "kv_heads", "layers"))


def check_model_split(model: Transformer, *, tp: int, pp: int, uneven_stages: bool = False) -> None:
    """Raise ``ClusterSimError`` naming the first of ``MODEL_SPLIT_RULES`` that ``tp x pp`` breaks; with
    ``uneven_stages`` (a serving engine's split, some stages a layer more) the layers need not divide by ``pp``,
    but every stage holds at least one."""
    if tp < 1 or pp < 1:
        raise ClusterSimError(f"tp and pp must be at least 1, got tp {tp} and pp {pp}")
    if uneven_stages and pp > model.layers:
        raise ClusterSimError(
            f"impossible layout (tp {tp}, pp {pp}) of {model.name}: pp {pp} exceeds its {model.layers} layers "
            "(each pipeline stage holds at least one)",
            field="pp",
            value=pp,
        )
    layout = Layout(tp=tp, pp=pp, uneven_stages=uneven_stages and model.layers % pp != 0)
    inputs = RuleInputs(model, layout.num_devices, 1, 1, uneven_stages_allowed=uneven_stages)
    where = f"impossible layout (tp {tp}, pp {pp}) of {model.name}"
    raise_first_broken(layout, inputs, MODEL_SPLIT_RULES, lambda: where)
