"""The transformer a training, memory or serving case describes, the router fields its format cannot state taken
from the zoo.

The shared case format's ``model.moe`` holds experts, experts per token and shared experts, not group-limited
routing (DeepSeek-V3's 8 expert groups of which a token's experts keep to 4, which bounds the nodes its
dispatch reaches); a case may state it (``groups``, ``group_top_k``, extra context). A case whose model is named after
an entry of the packaged zoo, states no router groups and agrees
with that entry on every routing field it does state (layers, hidden, experts, experts per token) is
routed as the entry is; the case's assumptions say so (``moe_groups``). A case that disagrees on any of
those fields is another model of the same name and keeps plain top-k routing.

Fields of the architecture the shared format has no place for (``linear_bias``, ``clamped_glu``, ``rope_concentration``:
gpt-oss's expert biases, clamped SwiGLU and YaRN tables, which change only the element-wise work around the GEMMs;
``linear_attention``, ``attention_gate`` and ``mlp_free_layers``: a hybrid's Gated DeltaNet or Mamba-2 layers, gated
attention and mixer-only layers; ``norm``, ``position`` and ``tied_embeddings`` where they differ from the MLP type's
defaults) are the zoo
entry's where the case is named after one, states none of them and agrees with it on layers and hidden; the
assumptions say so (``architecture``).

Multi-token prediction is a choice of the run, not of the model: a case trains the MTP modules it states
(``mtp_layers``) and none where it states none; where the zoo entry it is named after has them, the
assumptions say none were priced (``mtp_layers``).
"""

from __future__ import annotations

from typing import Any

from clustersim.validation.cases import CaseModel
from clustersim.workload.transformer import Transformer, transformer_from_mapping
from clustersim.workload.zoo import zoo

_ROUTING_KEYS = ("experts", "top_k")
_SHAPE_KEYS = ("layers", "hidden")


def case_transformer(model: CaseModel | None, where: str) -> tuple[Transformer, dict[str, str]]:
    """The case's transformer and what was assumed for it (``moe_groups``: the zoo entry the router's
    groups come from, as "G groups, top T, from the zoo's NAME"; empty when nothing was)."""
    shape = (model or CaseModel()).shape()
    assumed: dict[str, str] = {}
    routing = _zoo_routing(shape)
    if routing is not None:
        groups, group_top_k, name = routing
        shape["moe"] = {**shape["moe"], "groups": groups, "group_top_k": group_top_k}
        assumed["moe_groups"] = f"{groups} groups, top {group_top_k}, from the zoo's {name}"
    known = _zoo_model(shape)
    inherited = _zoo_architecture(shape, known)
    if inherited and known is not None:
        shape.update(inherited)
        stated = ", ".join(f"{key} {value}" for key, value in inherited.items())
        assumed["architecture"] = f"{stated}, from the zoo's {known.name}"
    if "mtp_layers" not in shape and known is not None and known.mtp_layers:
        assumed["mtp_layers"] = f"none priced: the case states none (the zoo's {known.name} trains {known.mtp_layers})"
    return transformer_from_mapping(shape, where=f"{where}: model"), assumed


def _zoo_model(shape: dict[str, Any]) -> Transformer | None:
    """The packaged zoo's entry the case is named after, if any (a case reads the same everywhere)."""
    name = shape.get("name")
    entry = zoo(use_env=False).get(name.strip().lower()) if isinstance(name, str) else None
    return entry.model if entry is not None else None


ARCHITECTURE_KEYS = (
    "linear_bias",
    "clamped_glu",
    "rope_concentration",
    "linear_attention",
    "attention_gate",
    "mlp_free_layers",
    "norm",
    "position",
    "tied_embeddings",
)


def _zoo_architecture(shape: dict[str, Any], known: Transformer | None) -> dict[str, Any]:
    """The zoo entry's ``ARCHITECTURE_KEYS`` that differ from a plain model's, where the case states none of them
    and agrees with the entry on layers and hidden (empty otherwise)."""
    if known is None or any(key in shape for key in ARCHITECTURE_KEYS):
        return {}
    if any(shape.get(k) is not None and shape[k] != getattr(known, k) for k in _SHAPE_KEYS):
        return {}
    try:
        return architecture_fields(known, shape)
    except ValueError:  # the case's own shape is refused where it is read
        return {}


def architecture_fields(model: Transformer, shape: dict[str, Any] | None = None) -> dict[str, Any]:
    """``model``'s ``ARCHITECTURE_KEYS`` that differ from those of a plain model of its other fields (``shape``
    over them), as plain data, as a case states them; ``ValueError`` where that plain model is refused."""
    data = model.model_dump(mode="json")
    plain = Transformer.model_validate({k: v for k, v in data.items() if k not in ARCHITECTURE_KEYS} | (shape or {}))
    return {key: data[key] for key in ARCHITECTURE_KEYS if getattr(model, key) != getattr(plain, key)}


def _zoo_routing(shape: dict[str, Any]) -> tuple[int, int, str] | None:
    """The zoo entry's (groups, group_top_k, id) where the case names it and agrees with its routing."""
    moe = shape.get("moe")
    if not isinstance(moe, dict) or "groups" in moe:
        return None
    known = _zoo_model(shape)
    if known is None or known.moe is None or known.moe.group_top_k is None:
        return None
    if any(shape.get(k) is not None and shape[k] != getattr(known, k) for k in _SHAPE_KEYS):
        return None
    if any(moe.get(k) is not None and moe[k] != getattr(known.moe, k) for k in _ROUTING_KEYS):
        return None
    return known.moe.groups, known.moe.group_top_k, known.name
