"""Accuracy as a user meets it: each source predicted by constants fitted without it.

The packaged residuals (``clustersim.intervals``) are the left-out predictions of leave-one-source-out
cross-validation, made again whenever the calibration or the cases change (a test checks their
fingerprint). Here each source's mean |log error| there must stay under the issue's bar (15%), or
under its own recorded figure where the model is known to miss it, each with the issue that owns it.
A change that lowers a figure should lower its bar; a bar may rise only with a reason here.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import pytest

from clustersim.intervals.residuals import LATENCY_FIELDS, PERCENTILE_FIELDS, load_residuals, measure_of

BAR = math.log(1.15)  # issue 10's per-source target, as a mean |log error|

SGLANG_RANDOM = (
    "once its 12 random runs draw SGLang's bench_serving lengths (sglang_random, uniform in [1, L]; held at the mean "
    "before, a closed loop's requests ended on one step and arrived in waves)"
)
KNOWN_MISSES: dict[tuple[str, str], tuple[float, str]] = {
    ("training", "yanring/Megatron-MoE-ModelZoo"): (
        0.165,
        "its rows count model FLOPs causally, as Megatron-LM logs them since 2025-03 (the case field attention_flops, "
        "2026-12-05: its five 4K H100 rows' step x TFLOP/s is 0.993-0.999 of that count), and its four long-context "
        "H100 runs of 2025-11 (Qwen3-235B at 16K-128K, CP 1-8) then show an attention core about 1.5x faster than "
        "the Hopper fit's, which NeMo 24.03's long-sequence table (full count) pins: -10% at 16K to -30% at 128K, "
        "the kernels' generation, not a term the model lacks (its GB200 128K run, Blackwell's faster fit: -12%); "
        "0.158, issue 22",
    ),
    ("inference", "NVIDIA/TensorRT-LLM"): (
        0.15,
        "its perf overview's 50 attention-DP runs (the DEP columns @03e27c7d: DeepSeek-R1-0528, Qwen3-235B-A22B, "
        "Llama 4 Maverick), held out since the model prices attention data parallel (2026-12-03): 26.5% MAPE since "
        "latent attention's decode runs at the 16-bit attention rate (28.4% since trtllm-bench's own batch caps, 31% "
        "before), too fast with long outputs on Hopper and too slow with long "
        "prompts on Blackwell, the groups' and the experts' imbalance not modelled; its 147 tensor-parallel runs "
        "stay at 0.089; 0.15 (0.148) until MLPerf v6.0's eight more tensor-parallel partner runs "
        "(2026-12-03: Llama 2 70B on 8 B300 +17% and +26%, Llama 3.1 405B on 8 B200 +18% and +19%) joined the "
        "Blackwell folds that leave it out: 0.151; 0.16 until the reader took Llama 4's chunked attention "
        "(model.sliding_window, 2026-12-04: 0.149 -> 0.143; issue 24)",
    ),
    ("inference", "mlcommons/inference_results_v5.1"): (
        0.19,
        "its six DeepSeek-R1 runs (attention data parallel over 8 ranks with the all-to-all, B200, GB200 and GB300; "
        "2026-12-03) are 1-34% too fast offline and 88-125% served, the server runs' rate held low by what the model "
        "lacks (their TTFT is four times the model's); 0.23 before latent attention's decode ran at the 16-bit "
        "attention rate (23-61% and 128-171%); its 18 other runs stay at 0.088 (issue 24)",
    ),
    ("inference", "gbeezybez/inference_results_v6.0"): (
        0.18,
        "its 17 DeepSeek-R1 server runs, 3% short to 16% over until their CuTe DSL MoE kernels were priced "
        "(software.fused_expert_mlp, 2026-12-05: the offline runs from 27-46% slow to within 16%, 0.241 -> 0.172), "
        "are 2-87% over: their submitters chose rates well inside the latency limits (NVIDIA's 8 B300: 99th "
        "percentile TPOT 61.7 ms and TTFT 0.81 s against 80 ms and 2 s), the model the highest rate inside them; "
        "until then: MLPerf v6.0's DeepSeek-R1 offline runs (8 B300, GB200 and GB300 NVL72 racks, 2026-12-04) are "
        "27-41% too slow while their server runs are met within 10%: the release's MoE and attention kernels (CuTe "
        "DSL) halve the cost a sequence adds to a step against v5.1's on the same GB200 rack, which the one "
        "TensorRT-LLM step model, fitted on earlier releases, does not separate; its 8 other runs stay at 0.09 (0.12 "
        "before the racks' "
        "DeepSeek-R1 and Llama 3.1 405B runs joined; 0.18 before the partners' 30 runs, whose 9 DeepSeek-R1 offline "
        "runs are 29-39% slow and whose server runs are the rates each submitter chose, 35,436-60,413 tokens/s on "
        "one 8-B300 stack against the model's 41,300; 0.21 (0.207) before 18 more partner and NVIDIA runs "
        "(2026-12-03), whose 5 DeepSeek-R1 offline runs on GB300 and GB200 (trays, racks, 288 GPUs) are 33-46% "
        "slow: 0.223; 0.23 before its seven disaggregated rack runs (parallel.disaggregate, 2026-12-03) joined: "
        "Llama 2 70B 11-22% slow (the decode pool's step at a worker's cap 71 ms where the GB200 run measures 44 ms), "
        "Llama 3.1 405B 37-47% (the prefill pools bind): 0.236; 0.24 until the MoE cost per token was scanned "
        "again once the reader took Llama 4 Scout's chunked attention, 2026-12-04: 184 -> 190 ns a token and layer "
        "makes its slow DeepSeek-R1 offline runs slower still, 0.241; 0.25 until NVIDIA's Llama 2 70B configs "
        "stated their C++ sampler (engine_settings.cpp_sampler, 2026-12-04: the GB200 and GB300 racks' six runs "
        "from 12-22% slow to +4% to +27%): 0.235; issue 24)",
    ),
    ("inference", "mlcommons/inference_results_v4.0"): (
        0.16,
        "its six Llama 2 70B runs (TensorRT-LLM's v4.0 build, slower than v4.1's on the same systems) left out, the "
        "GPU pair fitted on the 37 others: 0.1396, at the bar, until a prompt's attention core was priced as the "
        "training core (2026-12-04: FP8 products at 0.73 of the FP8 peak plus the exponentials at the MUFU rate, "
        "32% more time than the former whole-kernel 0.5 at head dim 128), which TensorRT-LLM's 20,000-token FP8 rows "
        "answer with a higher GEMM fraction and small-batch cost that its 222-token prompts do not want: 0.155 "
        "(issue 24)",
    ),
    ("inference", "aws-neuron/aws-neuron-sdk"): (
        0.145,
        "left out, the Neuron grid fitted on optimum-neuron's six runs alone picks its kernel efficiency as a share of "
        "the GPU calibration's GEMM fraction, so the GPU pair's refit of 2026-12-04 (0.569 -> 0.575, prefill attention "
        "priced as the training core) moves the left-out Trainium1 rate by 1%: 0.1378 -> 0.1432 (the packaged "
        "constants were restated to the same absolute fraction; issue 24)",
    ),
    ("inference", "huggingface/optimum-neuron"): (
        0.141,
        "as the Neuron SDK's (above): its left-out fold's kernel efficiency is a share of the GPU calibration's GEMM "
        "fraction, refit on 2026-12-04 (0.569 -> 0.575), and its Trainium2 runs' share is at the top of its range "
        "(1.0), so they run 1% faster: 0.1392 -> 0.1402 (issue 24); 0.159 since Nemotron 3 Nano's 20 rows joined "
        "(2026-12-05): its Blackwell rows are 15-28% too fast, its H100 rows 3-7% too slow (Mamba-2's scan kernels; "
        "issue 22)",
    ),
    ("inference", "gminneci/mantile"): (
        0.16,
        "InferenceMAX's 12 gpt-oss-120b runs on TensorRT-LLM 1.2.0rc2 (trtllm-serve, B200 TP2 and TP4, added "
        "2026-12-05) are 52% too slow a token: at 4-64 clients their decode step is 2.6-10 ms where the model's "
        "layer_overhead_s (49 us a layer, a prior identified on NIM's Llama 3.3 70B on two H100s) and TP all-reduces "
        "make 4.1 ms at 4 (the script sets TRTLLM_ENABLE_PDL, launches overlapping; not modelled). Its DeepSeek-R1 "
        "SGLang runs are 8.6% off, its gpt-oss vLLM runs 11.5% (0.083 and 0.109 alone; 0.086 before the gpt-oss "
        "rows)",
    ),
    ("inference", "sgl-project/sgl-cookbook"): (
        0.24,
        "0.239 since 2026-12-06 "
        + SGLANG_RANDOM
        + "; before, Qwen3-Next and Qwen3-Coder-Next (Gated DeltaNet hybrids) on SGLang 0.5.6-0.5.8 and B200, added "
        "2026-12-05: all predicted too fast, +21% and +7% at 1 and 100 ShareGPT clients on 8 GPUs, +29% to +127% on "
        "2; at one client a token takes 6.2-6.6 ms where the model says 4.9-5.2 (a Gated DeltaNet layer's decode runs"
        " more kernels than the per-layer floor the model prices); 0.375, 0.404 before an eager step launched a Gated"
        " DeltaNet layer's 15 kernels (issue 24); 0.42 (0.419) since Nemotron 3 Nano (Mamba-2) joined, 2026-12-05: "
        "+60% FP8 and +134% BF16 on one B200 at 256 clients, its decode step twice the model's and the BF16 run's "
        "twice the FP8 run's; 0.46 (0.451) since Nemotron 3 Super (latent MoE) joined, 2026-12-06: BF16 on 4 H200 at "
        "256 clients +136%, TPOT -61%; the random runs now read +10% to +37% (Nano FP8 -37%), their TPOT -8% to -25% "
        "(Nano FP8 +59%)",
    ),
    ("inference", "vllm-project/recipes"): (
        0.16,
        "its one run, Nemotron 3 Nano (Mamba-2 hybrid) FP8 on one H200 at 1,024 clients on vLLM 0.12 (2026-12-06: "
        "0.152, +16%, since the Mamba-2 scan runs at its SSD kernels' measured share of the peak; 2026-12-05: "
        "0.208; 0.454 before the states were read at the checkpoint's float32): +23%, its mean TPOT 59 ms where the "
        "model says 48 ms (issue 24)",
    ),
    ("inference", "gpustack/gpustack"): (
        0.35,
        "vLLM and SGLang on one H100 behind an API server: its 1-8 client runs fit within 2-12% since each layer "
        "pays a fixed cost per step (stop 39), but its saturated bursts (1,000 requests at once) are 33-250% too "
        "fast, the 128-token / 4-token run's TPOT 525 ms measured (no mechanism here explains it), and its Qwen3 "
        "FP8 checkpoints scale 128 x 128 blocks, which Hopper dequantizes outside the tensor cores (0.550 before "
        "stop 39; 0.436 before the same pages' two TensorRT-LLM runs joined, 2026-12-03: +14% and +30%, the burst's "
        "HTTP server the reference engine's too; 0.45 until 2026-12-04; 0.40 until its 70 other performance-lab runs "
        "joined, 2026-12-03: Qwen3-32B, Qwen3-235B-A22B, DeepSeek-R1 and GLM-4.5-Air on H100, H200 and A100, 0.357 "
        "over them, its H100 bursts 45-165% too fast where its A100 ones are 5-25% too slow; 0.37 until its 53 "
        "gpt-oss vLLM runs joined, 2026-12-05: 0.339, one H100 +20% to +115% where two and four are +1% to +19% on "
        "the same page; issue 24)",
    ),
    ("inference", "Michaelvll/llm-ie-benchmarks"): (
        0.46,
        "DeepSeek-R1 on 8 H200 under vLLM 0.8.4 and SGLang 0.4.5, 50 Poisson requests: 14-120% too fast "
        "(block-scaled FP8 and MLA; 0.554, 0.528 before the MoE cost per token was scanned again beside "
        "Blackwell's decode-attention fraction, 0.37 before a MoE layer's cost became one per token; 0.53 until "
        "attention computed in its cache's format, 2026-12-03; issue 24)",
    ),
    ("collective", "crazyguitar/aws-gpu-communication-benchmark"): (
        0.17,
        "left out, the all-reduce's node growth falls to its ring prior (1.0 for a fitted 0.78) and the other op "
        "families' ramps to the all-reduce's (issue 23)",
    ),
    ("collective", "aws-neuron/aws-neuron-sdk"): (
        0.78,
        "nccom-test's examples from older Neuron runtimes pay a 58 us-2.3 ms floor per collective at mid sizes "
        "that the torus model, priced from the newest example, does not (issue 21)",
    ),
}
"""(kind, source) -> (mean |log error| bar, why and which issue owns it)."""


LATENCY_BAR = math.log(1.2)  # issue 24's per-source TTFT / TPOT target, as a mean |log error|

MLPERF_TPOT = (
    "at the batch each server ran (Little's law) the model's step is within a median 6.2% of its mean TPOT "
    "(benchmarks/sim_vs_published.py), but the servers run at 85-97% of their capacity, where the batch a rate "
    "holds is about 1 / (1 - utilization): the closed forms' highest rate meeting the p99 targets holds a batch "
    "20-35% smaller than the published one (issue 24)"
)
MLPERF_TTFT = (
    "near the highest rate the mean TTFT is steep in the rate, and the model's highest rate and the submitter's "
    "margin differ: v5.0's 1- and 8-GPU B200 runs, at 44.3 and 45.1 requests/s per replica of one engine, "
    "measure 0.365 and 0.526 s (issue 24); v4.1's bar rose 0.34 -> 0.35 and v5.1's 0.25 -> 0.26 when a server's "
    "prompt counts were chained (2026-12-03), which brought the closed form's TTFT within 2.4% of the simulator's "
    "(12.9% before) and moved these rows' predicted TTFT up 2-5%"
)
KNOWN_LATENCY_MISSES: dict[tuple[str, str], tuple[float, str]] = {
    ("tpot_s", "mlcommons/inference_results_v4.0"): (0.35, MLPERF_TPOT),
    ("tpot_s", "mlcommons/inference_results_v4.1"): (0.22, MLPERF_TPOT + "; 0.25 until 2026-12-04"),
    ("tpot_s", "mlcommons/inference_results_v5.0"): (0.28, MLPERF_TPOT),
    ("tpot_s", "mlcommons/inference_results_v5.1"): (
        0.23,
        MLPERF_TPOT + "; Red Hat's vLLM server run (2026-12-03) has its TPOT predicted 108% too long at the model's "
        "highest rate, 25% above the published one, where a queue in front of the engine (the log's TTFT p99 1.9 s) "
        "binds the real rate (0.22 before it joined, 0.28 with it until latent attention's decode ran at the 16-bit "
        "attention rate: the DeepSeek-R1 server runs' TPOT -4% to -11% -> +1% to +11%; 0.22 before "
        "their configs' CUDA graph sizes padded a rank's decode batch, 2026-12-04: their TPOT +1-2 points at the "
        "model's rate)",
    ),
    ("ttft_s", "mlcommons/inference_results_v4.1"): (
        0.36,
        MLPERF_TTFT + "; 0.35 before whole prompts of a spread of lengths lengthened the span an arrival waits out "
        "(2026-12-03: Azure's code trace TTFT -9.4% -> -3.4% of the simulator's), which put these rows' TTFT up "
        "1-3%, where all but one are already long (Mixtral +71% and +107%)",
    ),
    ("ttft_s", "mlcommons/inference_results_v5.0"): (
        0.44,
        MLPERF_TTFT + "; 0.42 before the closed forms took a request set's spread of lengths (2026-12-03: each "
        "prompt's attention over its own length and the queue over them put the Llama 3.1 405B rows' TTFT up 7-8%, "
        "the H200 row's to +66%), 0.37 before prompts longer than a step's token budget queued for it (an M/D/1 queue, "
        "2026-12-03, which brought the closed form within 1.1% of the simulator's TTFT on chunked prompts, 22.6% "
        "before): its Llama 3.1 405B H200 row went +4% -> +54%, its step already 32% long at the model's highest "
        "rate (its TPOT), as v5.1's H200 row (+5% -> +54%), while v5.1's B200 and GB200 rows went -26% and -21% to "
        "+9% and +15%",
    ),
    ("ttft_s", "mlcommons/inference_results_v5.1"): (
        0.32,
        MLPERF_TTFT + "; its three DeepSeek-R1 server runs (2026-12-03) are 26-55% short since they state their "
        "attention-DP balancing (engine_settings.adp_balance_steps: prompts admitted every 9 or 6 steps; 0.56 and "
        "76-80% short before): at the rate the model finds for them (2.3-2.7x the published) their steps are "
        "58-64 ms, where the runs wait 0.66-0.78 s; 0.27 before those runs joined, 0.26 before the closed forms took a "
        "request set's spread of lengths (2026-12-03: its Llama 3.1 405B rows' TTFT +8-10%, the B200 and GB200 rows "
        "+18% and +25%, whose TPOT is 8-12% short); 0.31 before the DeepSeek-R1 configs' CUDA graph sizes (2026-12-04)",
    ),
    ("tpot_s", "intel-ai-tce/inference_results_v6.1"): (
        0.24,
        MLPERF_TPOT
        + "; its four server runs (2026-12-06: 0.238) are priced at the model's highest rate meeting the 80 ms / 200 "
        "ms p99 targets: DeepSeek-R1 DEP8 on 8 B300 and on GB300 and GB200 racks reaches it at a rate within -7% to "
        "+21% of the published one with a 71, 74 and 65 ms token where the runs measure 60, 63 and 48 ms (the model's "
        "step is longer at those batches), Llama 2 70B on 8 B300 at 110 ms where the run measures 152 ms (as v6.0's)",
    ),
    ("tpot_s", "gbeezybez/inference_results_v6.0"): (
        0.24,
        MLPERF_TPOT
        + "; 0.28 until the DeepSeek-R1 runs' CuTe DSL MoE kernels were priced (2026-12-05: 0.232); its B300 "
        "Llama 2 70B run is within 12%, its B300 Llama 3.1 405B run 35% short (119 ms a "
        "token at 2.29 requests/s, the model's step 77 ms), its three DeepSeek-R1 runs (8 B300, GB200 and GB300 "
        "racks) 35% long (the model meets the 80 ms target at the published rate, the runs measure 56-59 ms); 0.60 "
        "until the GB300 rack's Llama 2 70B server run, served disaggregated and recorded as aggregated, was removed "
        "(2026-12-04: a 27 ms TPOT where the model's rate holds 117 ms); 0.28 before the partners' 30 runs joined; "
        "0.25 (0.247) before 18 more (2026-12-03): 0.239; 0.24 before the seven disaggregated rack runs: the Llama 2 "
        "70B GB300 server run measures 27 ms where the model's highest rate, at the decode workers' cap of 2,048, "
        "holds 117 ms, and the 405B runs' decode pools, loose at their prefill-bound rates, 41-55 ms against 58 ms: "
        "0.291; 0.30 until the Llama 2 70B configs stated their C++ sampler (2026-12-04: the GB300 server run's 117 ms "
        "falls to 82 ms at the model's highest rate): 0.268",
    ),
    ("ttft_s", "gbeezybez/inference_results_v6.0"): (
        0.34,
        "raised 0.32 -> 0.34 when the DeepSeek-R1 runs' CuTe DSL MoE kernels were priced (2026-12-05: 0.311 -> 0.328): "
        "the model's highest rate for their server runs rises, and its TTFT there with it; its seven disaggregated "
        "rack runs (2026-12-03): the Llama 2 70B runs measure a mean TTFT of 179-238 ms where "
        "the model's prefill pools, nearly idle at the decode-bound rate, give 22-34 ms (the nine coordinators' hops, "
        "the context servers' queue behind them and UCX's handshake per transfer are not priced); its 29 other server "
        "runs stay at 0.156; 0.36 (0.357) until the Llama 2 70B configs stated their C++ sampler (2026-12-04): 0.311 "
        "(issue 24)",
    ),
    ("ttft_s", "gminneci/mantile"): (
        0.52,
        "InferenceMAX's SGLang runs of DeepSeek-R1 (8 H200 and 8 B200, 2026-12-04) wait 17-83% longer for a first "
        "token than the model says, every one: SGLang sends a first token as soon as it is made, so the 100-250 ms "
        "beyond the model's prefill and intake at 1k prompts is outside the engine's steps; 1.03 before the B200 "
        "scripts' --scheduler-recv-interval (engine_settings.receive_steps) and the client's spread of lengths "
        "(bench_serving_random) were priced; 0.85 until SGLang's prompt batches paid their kernels' launches, "
        "2026-12-03 (serving.eager_launches; the 8,192-token prompts on B200 stay 60-70% short) (issue 24)",
    ),
    ("ttft_s", "https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance"): (
        0.23,
        "its 100-client run waits 8.0 s for a first token where the closed loop's queue of prompts gives 2.7 s; "
        "the 1-50 client runs are within 15% (issue 24)",
    ),
    ("ttft_s", "aws-neuron/aws-neuron-sdk"): (
        0.2,
        "transformers-neuronx's batch-4 and batch-8 runs and the 8,192-token Mistral run wait 24-61% longer for "
        "their first token than the model's context encoding takes; its batch-1 runs of Llama 2 and 3 70B are "
        "within 2-24% (issue 24)",
    ),
    ("ttft_s", "huggingface/optimum-neuron"): (
        0.29,
        "its 29-client Trainium2 run waits 1.25 s where the model's static batches give 0.45 s (issue 24)",
    ),
    ("ttft_s", "gpustack/gpustack"): (
        0.57,
        "its saturated bursts send 1,000 requests at once and the first tokens come as fast as the API server "
        "admits them (the 128-token run: 44 requests/s); its 1-8 client runs wait 27-75 ms for a first token where "
        "one step takes 10-15 ms, vLLM's lone clients still (SGLang's now within 2%, the launches' prior identified "
        "there); 1.08 until the launches and its 70 other runs joined, 2026-12-03 (its 19 first rows 0.91); 0.67 "
        "until its 53 gpt-oss vLLM runs joined, 2026-12-05: 0.558 (issue 24)",
    ),
    ("tpot_s", "gpustack/gpustack"): (
        0.34,
        "as its throughput (KNOWN_MISSES), and its bursts' steps carry prompts (0.43 until 2026-12-04; 0.41 until its "
        "53 gpt-oss vLLM runs joined, 2026-12-05: 0.332)",
    ),
    ("ttft_s", "Michaelvll/llm-ie-benchmarks"): (
        0.821,
        "as its throughput (KNOWN_MISSES), and queueing behind it (1.045 before the chained prompt counts; 1.07 "
        "until 2026-12-04; 0.95 until SGLang's prompt batches paid their launches, 2026-12-03; 0.8191 until its "
        "SGLang 0.4.5.post3 rows kept SGLang's reserve by the device's memory, 0.897 of an H200 at TP8 for 0.88, "
        "2026-12-05: its 30,000-token row's TTFT 0.325 -> 0.335)",
    ),
    ("tpot_s", "Michaelvll/llm-ie-benchmarks"): (0.44, "as its throughput (KNOWN_MISSES)"),
    ("ttft_s", "sgl-project/sgl-cookbook"): (
        0.42,
        "its hybrids' first tokens (2026-12-06: 0.415 "
        + SGLANG_RANDOM
        + "; 0.635 since the Mamba-2 scan's measured share slows prompts; 0.620 "
        "with Nemotron 3 Super's run, +278% at the mean; 2026-12-05: "
        "0.565 with Nemotron 3 Nano's runs, +196% and +555% at the median, "
        "0.463 before; 0.603 before the eager launches): at one client 21-41% slower "
        "than the model's prompt, at 16-100 clients 28% slower to 275% faster (the simulated queue behind "
        "8,000-token prompts; issue 24)",
    ),
    ("tpot_s", "sgl-project/sgl-cookbook"): (
        0.23,
        "as its throughput (KNOWN_MISSES; 2026-12-06: 0.224 "
        + SGLANG_RANDOM
        + "; 0.440 with Nemotron 3 Super's run; 2026-12-05: 0.401; 0.345 "
        "before Nemotron 3 Nano's two runs, TPOT -41% and -59%)",
    ),
}
"""(latency field, source) -> (mean |log error| bar, why and which issue owns it)."""


def _by_source(
    fields: tuple[str, ...] = (), ids: Callable[[str], bool] = lambda _: True
) -> dict[tuple[str, str], list[float]]:
    """Per (kind, source), or with ``fields`` per (field, source) of those fields, the |log errors| (of the cases
    whose id ``ids`` keeps)."""
    out: dict[tuple[str, str], list[float]] = {}
    for row in load_residuals().residuals:
        if ((row.field in fields) if fields else measure_of(row.field) == "primary") and ids(row.id):
            out.setdefault((row.field if fields else row.kind, row.source), []).append(abs(row.r))
    return out


def _over_the_bar(
    fields: tuple[str, ...], misses: dict[tuple[str, str], tuple[float, str]], bar: float
) -> tuple[dict[tuple[str, str], float], dict[str, float]]:
    """Per (kind or field, source) the mean left-out |log error|, and those over their bar (a known miss's own)."""
    figures = {key: sum(rs) / len(rs) for key, rs in _by_source(fields).items()}
    over = {f"{what} {source}": round(value, 3) for (what, source), value in figures.items()
            if value > misses.get((what, source), (bar, ""))[0]}  # fmt: skip
    return figures, over


def test_every_source_predicted_without_its_own_cases_meets_its_bar() -> None:
    figures, over = _over_the_bar((), KNOWN_MISSES, BAR)
    assert {kind for kind, _ in figures} == {"training", "inference", "collective", "memory"}
    assert not over, f"left-out mean |log error| over the bar: {over}"


def test_every_sources_latency_predicted_without_its_own_cases_meets_its_bar() -> None:
    figures, over = _over_the_bar(tuple(LATENCY_FIELDS), KNOWN_LATENCY_MISSES, LATENCY_BAR)
    assert {field for field, _ in figures} == set(LATENCY_FIELDS) and len(figures) >= 16
    assert not over, f"left-out mean |log error| of TTFT / TPOT over the bar: {over}"


GPUSTACK_PERCENTILES = "as its means (KNOWN_LATENCY_MISSES): its host serves far below its H100s' rates"
KNOWN_PERCENTILE_MISSES: dict[tuple[str, str], tuple[float, str]] = {
    # 0.70, 0.62, 0.44 and 0.47 before its 53 gpt-oss vLLM runs joined (2026-12-05: 0.582, 0.480, 0.348, 0.351)
    ("ttft_p50_s", "gpustack/gpustack"): (0.59, GPUSTACK_PERCENTILES),
    ("ttft_p99_s", "gpustack/gpustack"): (0.49, GPUSTACK_PERCENTILES),
    ("tpot_p50_s", "gpustack/gpustack"): (0.36, GPUSTACK_PERCENTILES),
    ("tpot_p99_s", "gpustack/gpustack"): (0.36, GPUSTACK_PERCENTILES),
    ("ttft_p50_s", "sgl-project/sgl-cookbook"): (
        0.40,
        "as its mean TTFT (KNOWN_LATENCY_MISSES; 2026-12-06: 0.397 "
        + SGLANG_RANDOM
        + "; 0.978 with the scan's share, 0.963 with Nemotron 3 "
        "Super's run; 2026-12-05: 0.836 "
        "with Nemotron 3 Nano's runs, 0.693 before)",
    ),
    ("ttft_p99_s", "sgl-project/sgl-cookbook"): (
        0.56,
        "as its mean TTFT (KNOWN_LATENCY_MISSES; 2026-12-06: 0.552 "
        + SGLANG_RANDOM
        + " (its first wave, 256 prompts at once, "
        "clears 2.2x faster than measured); 0.536 with Nemotron 3 Super's run; 2026-12-05: 0.515)",
    ),
    ("tpot_p50_s", "sgl-project/sgl-cookbook"): (
        0.235,
        "as its throughput (KNOWN_MISSES; 2026-12-06: 0.230 "
        + SGLANG_RANDOM
        + "; 0.446 with Nemotron 3 Super's run; 2026-12-05: 0.408 with "
        "Nemotron 3 Nano's runs, 0.357 before)",
    ),
    ("tpot_p99_s", "sgl-project/sgl-cookbook"): (
        0.31,
        "as its throughput (KNOWN_MISSES; 2026-12-06: 0.309 "
        + SGLANG_RANDOM
        + "; 0.677 with Nemotron 3 Super's run; 2026-12-05: 0.648 with "
        "Nemotron 3 Nano's runs, 0.557 before)",
    ),
    ("ttft_p50_s", "vllm-project/recipes"): (
        0.33,
        "its Nemotron 3 Nano run's median first token (2026-12-06: 0.221 since the Mamba-2 scan's measured share, its "
        "mean TTFT and TPOT within the bar since; 2026-12-05: 0.326)",
    ),
    ("ttft_p50_s", "gminneci/mantile"): (
        0.42,
        "its gpt-oss-120b runs (2026-12-05): at 4 clients vLLM 0.13's median first token comes 17-29 ms after the "
        "model's (a ~35 ms prompt), as GPUStack's vLLM lone clients' 51-56 ms: the API server's path (tokenizing, "
        "inter-process hops, detokenizing), not modelled; TensorRT-LLM's too (and its decode, above); the DeepSeek-R1 "
        "SGLang runs' medians are 16.9% off (0.156)",
    ),
    ("ttft_p99_s", "gminneci/mantile"): (
        1.12,
        "the run's first wave: at 4-16 clients the slowest requests (p99 0.7-4 s) are the first ones, sent together at "
        "the start, 4-16 times the median, where the simulator's first wave waits only for its own prompts; the "
        "medians are within 14% (an engine's warm-up on its first batches, not modelled)",
    ),
}
"""(latency percentile, source) -> (mean |log error| bar, why)."""


def test_every_sources_latency_percentiles_predicted_without_its_own_cases_meet_their_bar() -> None:
    """Median and p99 TTFT and TPOT, where a simulated run predicts them (a stated request count)."""
    figures, over = _over_the_bar(tuple(PERCENTILE_FIELDS), KNOWN_PERCENTILE_MISSES, LATENCY_BAR)
    assert {field for field, _ in figures} == set(PERCENTILE_FIELDS) and len(figures) >= 8
    assert not over, f"left-out mean |log error| of a latency percentile over the bar: {over}"
    # InferenceMAX's 27 simulated DeepSeek-R1 SGLang runs: median TTFT within 17%, TPOT within 6% (2026-12-05: 16.9%,
    # 5.5%); its gpt-oss-120b vLLM runs' median TPOT within 13% (12.0%)
    deepseek = _by_source(tuple(PERCENTILE_FIELDS), ids=lambda i: "deepseek" in i)
    vllm = _by_source(("tpot_p50_s",), ids=lambda i: "gpt-oss-120b" in i and "_vllm_" in i)
    for rows, field, bar in (
        (deepseek, "ttft_p50_s", 1.17), (deepseek, "tpot_p50_s", 1.06), (vllm, "tpot_p50_s", 1.13)
    ):  # fmt: skip
        errors = rows[(field, "gminneci/mantile")]
        assert len(errors) in (18, 27) and sum(errors) / len(errors) < math.log(bar), (field, bar)


@pytest.mark.parametrize(
    ("misses", "fields", "bar"),
    [
        (KNOWN_MISSES, (), BAR),
        (KNOWN_LATENCY_MISSES, tuple(LATENCY_FIELDS), LATENCY_BAR),
        (KNOWN_PERCENTILE_MISSES, tuple(PERCENTILE_FIELDS), LATENCY_BAR),
    ],
    ids=["primary", "latency", "percentiles"],
)
def test_a_known_miss_is_still_a_miss(misses: dict[tuple[str, str], tuple[float, str]], fields: tuple[str, ...],
                                      bar: float) -> None:  # fmt: skip
    """A bar above the issue's target is kept only while the source still needs it."""
    figures = {key: sum(rs) / len(rs) for key, rs in _by_source(fields).items()}
    for key, (own, why) in misses.items():
        assert key in figures, f"{key}: no residuals (remove it from the known misses)"
        assert figures[key] > bar, f"{key} now meets the issue's bar: remove it from the known misses ({why})"
        assert own > bar and why


@pytest.mark.parametrize("kind", ["training", "inference", "collective"])
def test_the_median_left_out_error_of_each_kind(kind: str) -> None:
    errors = sorted(abs(r.r) for r in load_residuals().of_kind(kind))
    assert errors and errors[len(errors) // 2] < MEDIAN_BAR[kind]


MEDIAN_BAR = {
    "training": math.log(1.10),
    "inference": math.log(1.20),
    "collective": math.log(1.15),  # 8.5% today (40% before GB200 NVL72 had its own model, issue 21)
}
"""Per kind, the median left-out |log error| stays under this (today: training 7.2%, serving 9.6%, collectives 8.5%)."""
