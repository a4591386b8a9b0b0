"""What Mamba-2's chunked scan achieves: the state-space-duality (SSD) kernels run at a small share of the 16-bit
tensor peak, far below an attention kernel's, and no faster than the SM's other units allow.

Mamba-2 layers run ``mamba_chunk_scan_combined``: five Triton kernels over chunks of the sequence (chunk_cumsum,
chunk_state, state_passing, bmm_chunk, chunk_scan; state-spaces/mamba ``mamba_ssm/ops/triton/ssd_combined.py``, the
same kernels in Megatron-Core's ``MambaMixer`` and in vLLM's and SGLang's prefill). vLLM PR #27299 measured their
forward on one H100 (cyang49, 2025-10-25: 128 heads of 64, one group, state 128): 12.06M, 12.62M, 12.92M and 11.80M
tokens a second at 4,096, 8,192, 16,384 and 32,768 tokens, 12.35M on average. At Megatron-LM's count of the scan,
``7 x d_inner x d_state`` FLOPs a token (``mamba_layer_flops``: 7 x 8,192 x 128), that is 90.6 TFLOP/s: 9.2% of the
H100's 989 TFLOP/s of dense BF16 (``SCAN_PEAK_FRACTION``) and 1.35 times its 67 TFLOP/s of FP32 on the CUDA cores
(``SCAN_FP32_RATIO``).

Which of the two binds the benchmark cannot say: on an H100 they give the same time. Only the small
chunk products (``tl.dot`` over tiles of 64 to 128) use the tensor cores; the cumulative sums, decays, masks and the
state passing's loop over chunks run on the SM's other units, its shared memory and its latency. Blackwell more than
doubled the tensor rate (a B200's dense BF16 2.25 PFLOP/s against 0.99) and left the rest of the SM much as it was
(FP32 75-80 TFLOP/s against 67; "both the SFU count and shared memory bandwidth remains unchanged", FlashAttention-4,
Zadouri et al. 2026), so the scan runs at the slower of the two rates: the tensor share of the chip's peak, or the FP32
bound, the chip's FP32 rate times the family's measured ratio (``scan_fp32_ratio``). No Blackwell measurement of the
SSD kernels is published, but one of their kind is: flash-linear-attention's Triton chunked kernels for the Gated
DeltaNet take 2.065, 1.048 and 0.531 ms on a B300 for 65,536, 32,768 and 16,384 tokens of Qwen3.5's TP8 shapes where
an H100 takes 1.954, 0.997 and 0.508 ms (FlashInfer pull requests #4078 and #3866, their FLA/Triton columns):
Blackwell runs Triton's chunked kernels at 0.951 of the H100's rate, not the 1.12 its FP32 rate would give. On
Blackwell the ratio is therefore the H100's scan rate times 0.951 over the B300's 75 TFLOP/s of FP32 (1.149, where
the H100's is 1.352): a B200's or B300's scan runs at 86 TFLOP/s, a GB200's or GB300's (80 TFLOP/s of FP32) at 92.
Other families keep the H100's ratio. Where the chip records no FP32 rate, the tensor share alone binds. A
Trainium's FP32 figure is its tensor engine's at a quarter of its 16-bit rate, so the tensor share binds there.
Against Megatron-Bridge's held-out Nemotron 3 rows (its 53 Mamba-2 hybrid runs, Blackwell and H100): mean |log error|
0.137 at Hopper's ratio on every family, 0.124 at Blackwell's own (the H100 rows unchanged); the tensor share alone
left the 16 Blackwell Nano rows +17.9% too fast on average. The layer's short convolution, a few percent of its
FLOPs, runs at the same rate. The Gated DeltaNet's delta rule is still priced as an attention kernel over its chunks
(``clustersim.workload.ops``), at the tensor peak's share: the same pull requests measure its kernels, whose rates
are not yet in the model.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from clustersim.workload.transformer import Transformer

FloatArray = npt.NDArray[np.float64]

H100_SCAN_TOKENS_PER_S = 12.35e6  # vLLM PR #27299's "Original" column, mean of 4,096 to 32,768 tokens
H100_SCAN_FLOP_PER_TOKEN = 7 * 8192 * 128  # Megatron-LM's mamba_layer_flops at the benchmark's 128 x 64 heads
H100_BF16_DENSE_FLOP_PER_S = 989e12
H100_FP32_FLOP_PER_S = 67e12  # NVIDIA H100 Tensor Core GPU datasheet, SXM: FP32 67 TFLOPS (CUDA cores)
H100_SCAN_FLOP_PER_S = H100_SCAN_TOKENS_PER_S * H100_SCAN_FLOP_PER_TOKEN
SCAN_PEAK_FRACTION = H100_SCAN_FLOP_PER_S / H100_BF16_DENSE_FLOP_PER_S
"""The share of the 16-bit dense peak Mamba-2's chunked scan reaches (0.092)."""
SCAN_FP32_RATIO = H100_SCAN_FLOP_PER_S / H100_FP32_FLOP_PER_S
"""The scan's counted FLOPs a second over the chip's FP32 rate on an H100 (1.35), and on every family but Blackwell."""
FLA_H100_MS = (1.954, 0.997, 0.508)  # FlashInfer PRs #4078 and #3866: FLA's Triton chunked kernels at 64K, 32K, 16K
FLA_B300_MS = (2.065, 1.048, 0.531)  # the same kernels and shapes on a B300
BLACKWELL_TRITON_RATE_RATIO = sum(h / b for h, b in zip(FLA_H100_MS, FLA_B300_MS, strict=True)) / len(FLA_H100_MS)
"""A B300's rate over an H100's on Triton's chunked kernels (0.951)."""
B300_FP32_FLOP_PER_S = 75e12  # the catalog's b300 FP32 (glennklockwood.com B300 page: 75 TFLOPS)
BLACKWELL_SCAN_FP32_RATIO = H100_SCAN_FLOP_PER_S * BLACKWELL_TRITON_RATE_RATIO / B300_FP32_FLOP_PER_S
"""The scan's counted FLOPs a second over the chip's FP32 rate on Blackwell (1.149): the H100's scan rate at the
B300's measured share of it, over the B300's FP32 rate."""


def scan_fp32_ratio(family: str) -> float:
    """The scan's FLOPs a second over the FP32 rate on a chip of ``family``: Blackwell's own, else the H100's."""
    return BLACKWELL_SCAN_FP32_RATIO if family == "blackwell" else SCAN_FP32_RATIO


def scan_seconds(
    flop: npt.ArrayLike, peak_16bit_flop_per_s: npt.ArrayLike, fp32_flop_per_s: npt.ArrayLike, family: str
) -> FloatArray:
    """Seconds of a Mamba-2 layer's convolution and scan of ``flop`` FLOPs on a device of ``family`` with that 16-bit
    tensor peak and FP32 rate: the slower of ``SCAN_PEAK_FRACTION`` of the one and ``scan_fp32_ratio(family)`` times
    the other (an FP32 rate of NaN: not recorded, the tensor share alone)."""
    flop = np.asarray(flop, dtype=float)
    tensor = flop / (np.asarray(peak_16bit_flop_per_s, dtype=float) * SCAN_PEAK_FRACTION)
    cores = flop / (np.asarray(fp32_flop_per_s, dtype=float) * scan_fp32_ratio(family))  # NaN where not recorded
    return np.asarray(np.fmax(tensor, cores), dtype=np.float64)


def fp32_bound_note(
    model: Transformer, accelerator: str, family: str, peak_16bit_flop_per_s: float, fp32_flop_per_s: float
) -> str | None:
    """What an estimate of ``model`` says where the FP32 bound, not the tensor share, sets a device's scan rate (None
    for a model without Mamba-2 layers, where the tensor share binds, or where no FP32 rate is recorded). A serving
    step derates both bounds alike, so the device's own peaks decide which binds there too."""
    if model.linear_attention is None or not model.linear_attention.mamba2:
        return None
    tensor = peak_16bit_flop_per_s * SCAN_PEAK_FRACTION
    cores = fp32_flop_per_s * scan_fp32_ratio(family)
    if not cores < tensor * 0.99:  # NaN (not recorded) and a near tie (an H100's) say nothing
        return None
    return (
        f"scan: Mamba-2's SSD kernels on {accelerator} run at their FP32 bound, {cores / 1e12:.0f} TFLOP/s, not the "
        f"{tensor / 1e12:.0f} their share of the 16-bit tensor peak would give (clustersim.compute.scan_kernel)"
    )
