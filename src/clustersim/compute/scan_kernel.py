"""What Mamba-2's chunked scan achieves: the state-space-duality (SSD) kernels run at a small share of the 16-bit
tensor peak, far below an attention kernel's.

Mamba-2 layers run ``mamba_chunk_scan_combined``: five Triton kernels over chunks of the sequence (chunk_cumsum,
chunk_state, state_passing, bmm_chunk, chunk_scan; state-spaces/mamba ``mamba_ssm/ops/triton/ssd_combined.py``, the
same kernels in Megatron-Core's ``MambaMixer`` and in vLLM's and SGLang's prefill). vLLM PR #27299 measured their
forward on one H100 (cyang49, 2025-10-25: 128 heads of 64, one group, state 128): 12.06M, 12.62M, 12.92M and 11.80M
tokens a second at 4,096, 8,192, 16,384 and 32,768 tokens, 12.35M on average. At Megatron-LM's count of the scan,
``7 x d_inner x d_state`` FLOPs a token (``mamba_layer_flops``: 7 x 8,192 x 128), that is 90.6 TFLOP/s, 9.2% of the
H100's 989 TFLOP/s of dense BF16: ``SCAN_PEAK_FRACTION``. It is a prior from one kernel benchmark on one chip, taken
as a share of each chip's own 16-bit peak (how the Triton kernels speed up on Blackwell is not published); the
layer's short convolution, a few percent of its FLOPs, runs at the same share. The Gated DeltaNet's delta rule
(flash-linear-attention's kernels) has no such measurement and is priced as before.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

H100_SCAN_TOKENS_PER_S = 12.35e6  # vLLM PR #27299's "Original" column, mean of 4,096 to 32,768 tokens
H100_SCAN_FLOP_PER_TOKEN = 7 * 8192 * 128  # Megatron-LM's mamba_layer_flops at the benchmark's 128 x 64 heads
H100_BF16_DENSE_FLOP_PER_S = 989e12
SCAN_PEAK_FRACTION = H100_SCAN_TOKENS_PER_S * H100_SCAN_FLOP_PER_TOKEN / H100_BF16_DENSE_FLOP_PER_S
"""The share of the 16-bit dense peak Mamba-2's chunked scan reaches (0.092)."""


def scan_seconds(flop: npt.ArrayLike, peak_16bit_flop_per_s: npt.ArrayLike) -> FloatArray:
    """Seconds of a Mamba-2 layer's convolution and scan of ``flop`` FLOPs on a device of that 16-bit peak."""
    return np.asarray(flop, dtype=float) / (np.asarray(peak_16bit_flop_per_s, dtype=float) * SCAN_PEAK_FRACTION)
