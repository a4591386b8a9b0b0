"""Serving stacks that send a request's first token later than the iteration that computes it.

A stack's first streamed response can leave with the responses of a later iteration than the one that ran
the prompt (the token is computed, the report waits). ``first_token_lag_steps`` is how many iterations later;
the request simulator (``simulate``'s ``first_token_lag_steps``) and the server closed form
(``clustersim.serving.latency``) add that many steps to a request's time to first token and nothing else. (The
wait before the step that admits a request, and that step's other prompts, are
``clustersim.serving.whole_prompts``'.)

**tensorrt-llm-mlperf-v4: one iteration** (``engines.toml``'s ``first_token_lag_steps``; a prior: informed by
one source's logs; no code states it, the
TensorRT-LLM batch manager of that build was not open source). What the logs show (simulated figures: three
pooled 16,000-request runs at the simulated highest rate, 2026-12-02):

* The v4.0 Llama 2 70B Server logs (mlcommons/inference_results_v4.0 @3c4a1cf1 closed/NVIDIA/results/
  {H200-SXM-141GBx8, DGX-H100_H100-SXM-80GBx8}_TRT/llama2-70b-99.9/Server/performance/run_1/
  mlperf_log_summary.txt) measure a mean TTFT of 2.5 (H200) and 2.8 (H100) mean TPOTs. Their first-token
  mean, p50 and p90 are the simulated ones without a lag moved by a near constant: +119/+120/+137 ms on
  H200 (TPOT 165 ms), +142/+155/+137 ms on H100 (TPOT 137 ms); p99 +129 and +55 ms. Scaled instead by the
  means' ratio, H100's p99 would be 816 ms against 568 measured.
* The v4.1 logs of the same harness (harness_llm: the same LLMServer/LLMCore on GptManager, the same
  systems; mlcommons/inference_results_v4.1 @a2f5d66d closed/NVIDIA/results/H200-SXM-141GBx8_TRT/
  llama2-70b-99/Server and DGX-H100_H100-SXM-80GBx8_TRT/llama2-70b-99.9/Server) measure 198/123 ms = 1.61
  (H200) and 276/155 ms = 1.78 (H100) TPOTs, as the simulator without a lag gives on the v4.0 cases
  (1.66-1.78).
* The harness reports the first streamed response at once (LLMCore::sendResponse queues it for
  FirstTokenComplete when GptManager's SendResponseCallback delivers it, harness_llm llm_core.cpp), and
  a later GptManager's loop (forwardSync, then returnCompletedRequests, then fetchNewRequests, then
  forwardAsync: GptManager::decoupled_execution_loop, cpp/tensorrt_llm/batch_manager/GptManager.cpp of the
  fork arthurrasmusson/TensorRT-LLM @4489b3da, which carries the batch manager's source and marks GptManager
  deprecated) returns a first token at the end of the iteration that computed it.
  So the extra iteration belongs to the TensorRT-LLM build of the v4.0 submission (February 2024), not to
  the harness, LoadGen or the arrival process.
* With the lag the v4.0 cases' simulated mean/p50/p90/p99 are +14/+13/+16/+22% (H200) and +1/-3/+9/+27%
  (H100) off the logs.
* The v5.0 B200 runs (PySUT on the executor API; their TTFT is mostly the wait for one of the 2,048
  sequence slots) are not given one. The 1-GPU log's median, 292 ms (p99 1.29 s), is the simulated one
  without a lag near that p99 (258 ms at 45.5 requests/s, p99 1.16 s; with a lag 402 ms, p99 1.32 s). The
  8-GPU log's, 457 ms (p99 1.57 s), lies between the two (283 and 431 ms at 45.6, p99 1.54 and 1.70 s):
  not explained here.
"""

from __future__ import annotations

from clustersim.errors import ClusterSimError
from clustersim.serving.engines import EngineProfile


def first_token_lag_steps(profile: EngineProfile) -> int:
    """The iterations after the one computing it at whose end ``profile``'s stack reports a first token (the
    profile's ``first_token_lag_steps``, set in ``engines.toml``: 1 for ``tensorrt-llm-mlperf-v4``, see above)."""
    return profile.first_token_lag_steps


def check_lag(lag: object) -> int:
    """``lag`` as a whole number of steps >= 0; else a one-line ``ClusterSimError`` naming the field."""
    if isinstance(lag, bool) or not isinstance(lag, int) or lag < 0:
        raise ClusterSimError(
            f"first_token_lag_steps: must be a whole number of steps >= 0, got {lag!r}",
            field="first_token_lag_steps",
            value=lag,
        )
    return lag
