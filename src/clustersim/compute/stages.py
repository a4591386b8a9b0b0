"""Pipeline stages: how many layers each rank holds, and which rank is the slowest.

Split evenly, every rank holds ``layers / pp`` (rounded up to whole layers per model chunk when the stages are
uneven) and the last one also runs the output head, so it is the slowest. A multi-token-prediction module's
block counts as one more layer (Megatron-Core places it on the last stage). A layout may state the last rank's
layers (``Layout.last_stage_layers``: Megatron-Core's ``--decoder-last-pipeline-num-layers``, or a
``pipeline_model_parallel_layout`` such as Megatron-Bridge's DeepSeek-V3 'Et*4|(t*4|)*14tmL', which gives the
last rank three layers fewer for its MTP block and head); the other ranks then share the rest evenly over their
chunks, and whichever rank takes longer sets the pace.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.execution import LayoutArrays
from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]


def stage_split(model: Transformer, lay: LayoutArrays) -> tuple[FloatArray, FloatArray]:
    """Layers on the fullest rank before the last, and on the last (its MTP blocks counted as layers)."""
    chunks, vp = (lay.pp * lay.vp).astype(float), lay.vp.astype(float)
    even = np.ceil((model.layers + model.mtp_layers) / chunks) * vp
    assert lay.last_stage_layers is not None  # LayoutArrays fills it
    last = lay.last_stage_layers.astype(float)
    rest = model.layers - last  # whole layers per chunk, but no more than there are (a chunk may hold none)
    others = np.minimum(np.ceil(rest / np.maximum(chunks - vp, 1.0)) * vp, rest)
    stated = last > 0
    return np.where(stated, others, even), np.where(stated, last + model.mtp_layers, even)


def stage_layers(model: Transformer, lay: LayoutArrays) -> FloatArray:
    """Layers on the fullest pipeline rank (``stage_split``'s larger)."""
    return np.asarray(np.maximum(*stage_split(model, lay)), dtype=float)


def slowest_stage(
    model: Transformer, lay: LayoutArrays, layer_s: FloatArray, head_s: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The slowest rank's layers, 1 where it is the last (running the head) else 0, and the layers of the
    fullest rank before the last (whose pace the pipeline's fill and drain keep); ``layer_s`` and ``head_s``:
    one layer's and the head's time for a micro-batch. Under an even split the last rank is the slowest."""
    others, last = stage_split(model, lay)
    on_last = last * layer_s + head_s >= others * layer_s
    return np.where(on_last, last, others), on_last.astype(float), others
