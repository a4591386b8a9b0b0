"""Host-bound steps: a step an engine runs eagerly takes at least the host's time to launch its kernels.

The Python engines (SGLang, vLLM, TensorRT-LLM's PyTorch backend) capture CUDA graphs of their decode steps
only; a step that carries prompt tokens runs eagerly, each kernel launched by the host through PyTorch (SGLang's
``--enable-piecewise-cuda-graph`` is off by default; vLLM V1 replays piecewise graphs of the layers between the
attention calls for steps of at most its largest capture size, 512 tokens, and runs larger steps eagerly:
``CompilationConfig.max_cudagraph_capture_size``; TensorRT-LLM's ``cuda_graph_runner.py`` pads a step of decoders
alone and runs a context step eagerly). The GPU waits when its kernels are shorter than their launches: a prompt of
a thousand tokens through a 61-layer MoE model is host-bound, a prompt of eight thousand is not. So an eager step
takes the larger of its device time and its launches' host time (the device runs each kernel as the host queues
it): ``eager_floor_s``, with the launches counted per layer by ``kernels_per_layer`` and one host time per launch
(``EngineProfile.eager_launch_s``). Only SGLang's profile sets one (``engines.toml`` gives its evidence and why
vLLM's and TensorRT-LLM's do not); a user's profile may set its own.

The launches per layer are counted by ``clustersim.workload.launches``.
"""

from __future__ import annotations

from clustersim.serving.formats import ServingPrecision, bytes_per_element
from clustersim.workload.launches import layer_launches
from clustersim.workload.transformer import Transformer


def kernels_per_layer(model: Transformer, precision: ServingPrecision, tp: int) -> float:
    """Kernels an eager step launches per layer of ``model`` (the mean over its layers) in ``precision`` at ``tp``."""
    return layer_launches(model, quantized=bytes_per_element(precision) < 2.0, tensor_parallel=tp > 1)


def eager_floor_s(model: Transformer, layers: float, precision: ServingPrecision, tp: int, launch_s: float) -> float:
    """The host's time to launch an eager step's kernels over ``layers`` layers at ``launch_s`` a launch."""
    return layers * kernels_per_layer(model, precision, tp) * launch_s
