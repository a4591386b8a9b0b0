"""Static-shape buckets: the length a Neuron engine pads a prompt to, and the mean length a decoding sequence
attends over.

neuronx-cc compiles one graph per shape, so an engine with buckets (``EngineProfile.bucket_min_tokens``) runs a
prompt padded to the smallest context-encoding bucket that holds it and a decode step over the smallest
token-generation bucket that holds its position. The buckets are powers of two from ``bucket_min_tokens``, the last
one the compiled sequence length, under the profile's ``bucket_rule`` (every power of two below it, those below
``2**round(log2 L)``, or none); a compile that lists its own context-encoding buckets (NxD Inference's
``--context-encoding-buckets``: ``EngineProfile.context_buckets``) pads a prompt to the smallest of those instead.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import numpy.typing as npt

from clustersim.errors import ClusterSimError

FloatArray = npt.NDArray[np.float64]


class EngineProfile(Protocol):
    """What the buckets read of a profile (``clustersim.serving.engines.EngineProfile``'s fields)."""

    @property
    def bucket_min_tokens(self) -> int | None: ...
    @property
    def bucket_rule(self) -> str: ...
    @property
    def compiled_sequence_tokens(self) -> int | None: ...
    @property
    def context_buckets(self) -> tuple[int, ...] | None: ...


def bucket_tokens(tokens: npt.ArrayLike, profile: EngineProfile, longest: npt.ArrayLike | None = None) -> FloatArray:
    """``tokens`` padded to the engine's next bucket (a power of two times ``bucket_min_tokens``, at least
    that many), at most ``longest`` (the last bucket is the compiled sequence length, whatever it is; under
    the ``rounded`` rule the powers of two from ``2**round(log2 longest)`` up are no buckets, so a length
    past the last one below pads to ``longest``); unchanged where the engine has no buckets."""
    length = np.asarray(tokens, dtype=np.float64)
    if profile.bucket_min_tokens is None or (profile.bucket_rule == "single" and longest is None):
        return length  # no buckets, or the one bucket's length unknown
    low = float(profile.bucket_min_tokens)
    steps = np.ceil(np.log2(np.maximum(length, low) / low) - 1e-9)
    padded = low * np.exp2(np.maximum(steps, 0.0))
    if longest is not None:
        last = np.asarray(longest, dtype=np.float64)
        padded = np.where(padded < _top_power(last, profile), padded, last)
        padded = np.maximum(np.minimum(padded, last), length)
    return np.asarray(padded, dtype=np.float64)


def _top_power(longest: FloatArray, profile: EngineProfile) -> FloatArray:
    """The first power of two that is no bucket below ``longest``: none (inf) under the ``doubling`` rule;
    ``2**round(log2 longest)`` under NxD Inference's (``rounded``); every one (0) under ``single``."""
    if profile.bucket_rule == "doubling":
        return np.full_like(longest, np.inf)
    if profile.bucket_rule == "single":
        return np.zeros_like(longest)
    low = float(profile.bucket_min_tokens or 1)
    return np.asarray(np.exp2(np.round(np.log2(np.maximum(longest, low)))), dtype=np.float64)


def prompt_bucket_tokens(prompt_tokens: float, profile: EngineProfile, sequence_tokens: float) -> float:
    """The prompt's context-encoding bucket when the engine compiles ``sequence_tokens`` positions: under the
    ``rounded`` rule (NxD Inference) the bucket at most ``sequence_tokens`` (its last context bucket is the
    max context length, the sequence length by default), under ``single`` that length itself; under
    ``doubling`` (transformers-neuronx, whose context buckets are its token buckets halved, which a long
    prompt outgrows) the next power of two; with ``context_buckets`` the smallest of them that holds it (a prompt
    longer than the last is refused)."""
    compiled = profile.compiled_sequence_tokens
    if compiled is not None and prompt_tokens > compiled:
        raise ClusterSimError(
            f"a prompt of {prompt_tokens:g} tokens is longer than the engine's compiled_sequence_tokens {compiled}",
            field="compiled_sequence_tokens",
            value=compiled,
        )
    if profile.context_buckets:  # the compile's own list: the smallest that holds the prompt
        fits = [bucket for bucket in profile.context_buckets if bucket >= prompt_tokens]
        if not fits:
            raise ClusterSimError(
                f"a prompt of {prompt_tokens:g} tokens is longer than the engine's largest context bucket "
                f"{profile.context_buckets[-1]} (context_buckets {list(profile.context_buckets)})",
                field="context_buckets",
                value=profile.context_buckets[-1],
            )
        return float(fits[0])
    sequence_tokens = sequence_tokens if compiled is None else float(compiled)
    capped = profile.bucket_rule != "doubling" and sequence_tokens >= prompt_tokens
    longest = sequence_tokens if capped else None
    return float(bucket_tokens(prompt_tokens, profile, longest))


def mean_bucket_tokens(first: npt.ArrayLike, last: npt.ArrayLike, profile: EngineProfile) -> FloatArray:
    """The mean padded length over the positions ``first..last`` (uniformly, as a sequence decodes from its
    prompt to its last token), each padded to its bucket and at most ``last`` (the compiled sequence
    length); the mean position where the engine has no buckets."""
    lo, hi = np.broadcast_arrays(np.asarray(first, dtype=np.float64), np.asarray(last, dtype=np.float64))
    if profile.bucket_min_tokens is None:
        return np.asarray((lo + hi) / 2.0, dtype=np.float64)
    compiled = profile.compiled_sequence_tokens
    if compiled is not None and np.any(hi > compiled + 1e-9):
        raise ClusterSimError(
            f"a request of {float(np.max(hi)):g} tokens is longer than the engine's compiled_sequence_tokens "
            f"{compiled}",
            field="compiled_sequence_tokens",
            value=compiled,
        )
    cap = hi if compiled is None else np.full_like(hi, float(compiled))  # the last bucket
    span = np.maximum(hi - lo, 1e-9)
    total = np.zeros_like(lo)
    top = _top_power(cap, profile)
    low, edge = 0.0, float(profile.bucket_min_tokens)
    while np.any(hi > low):  # the positions in (low, edge] attend over min(edge, cap) tokens, or cap past top
        covered = np.clip(np.minimum(hi, edge) - np.maximum(lo, low), 0.0, None)
        total = total + covered * np.where(edge < top, np.minimum(edge, cap), cap)
        low, edge = edge, 2.0 * edge
    padded = np.where(hi > lo, total / span, bucket_tokens(hi, profile, cap))
    return np.asarray(padded, dtype=np.float64)
