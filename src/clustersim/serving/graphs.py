"""CUDA graphs with padding: a step of decoders alone runs at the batch size of the graph it replays.

An engine that captures its decode step as CUDA graphs for a list of batch sizes and pads to them
(``EngineProfile.graph_batch_sizes``: TensorRT-LLM's ``cuda_graph_config`` ``batch_sizes`` with
``enable_padding``, vLLM's ``cudagraph_capture_sizes``) replays the graph of the smallest size that holds the
step's batch, the rest of it dummy sequences. TensorRT-LLM pads only a step of decoders alone (a step with a
context request runs eagerly) and, under attention data parallelism, pads every rank to one size: the ranks
all-gather their batch sizes and round the largest up (``tensorrt_llm/_torch/pyexecutor/cuda_graph_runner.py``,
``_get_padded_batch`` and ``_round_up_batch_size``); a batch over the largest size runs as it is. A dummy
sequence holds one token of cache, so its attention is nothing beside a real one's; its row goes through every
GEMM, the experts' exchange, the norms and the logits.

The closed forms pad a rank's mean batch (the ranks' spread about it, which the largest rank's padding would
follow, is not modelled); a mean share under one sequence is that share of the smallest size (the mean over the
steps it decodes in). NVIDIA's MLPerf Inference v5.1 DeepSeek-R1 server run on 8 B200 (``[128, 256, 384, 512]``)
decodes about 164 sequences a rank: its GEMMs and all-to-alls run 256 rows.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def graph_rows(sizes: tuple[int, ...] | None, sequences: npt.ArrayLike, groups: int = 1) -> FloatArray:
    """The rows a step of ``sequences`` decoders alone (over ``groups`` attention-DP ranks) runs through its GEMMs:
    each rank's share rounded up to the smallest of the captured ``sizes`` that holds it; as it is without sizes
    or beyond the largest."""
    decoders = np.asarray(sequences, dtype=np.float64)
    if not sizes:
        return decoders
    table = np.asarray(sizes, dtype=np.float64)
    share = decoders / groups
    at = np.minimum(np.searchsorted(table, share, side="left"), table.size - 1)
    padded = np.where(share > table[-1], share, np.where(share < 1.0, share * table[0], table[at]))
    return np.asarray(np.maximum(padded * groups, decoders), dtype=np.float64)
