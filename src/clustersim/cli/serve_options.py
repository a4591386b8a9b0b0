"""The request-level simulator's options of ``clustersim serve`` (``clustersim.cli.serve_simulate`` runs them)."""

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import number
from clustersim.units import MAX_DEGREE

PrefixHitOpt = Annotated[
    float | None,
    typer.Option(
        "--prefix-hit",
        callback=number(ge=0, le=1),
        help="Share of each prompt found in the prefix cache, its prefill skipped (simulates; [0, 1)). "
        "Default: a --trace's own where it names its prompt blocks (hash_ids: each request's leading blocks "
        "still in a cache of the replica's KV capacity), else 0.",
    ),
]

RoutingOpt = Annotated[
    str,
    typer.Option(
        "--routing",
        help="Which replica an open loop's request goes to (simulates): random, or cache-aware (the one with "
        "the soonest first token: its queued prefill work and the prompt past its cached prefix, as "
        "Mooncake's Conductor schedules).",
    ),
]

AdmissionOpt = Annotated[
    str | None,
    typer.Option(
        "--admission",
        help="KV admission (simulates): paged (the blocks a request holds now; preempts when they run out) or "
        "reserve (its prompt and whole output cap; TensorRT-LLM's GUARANTEED_NO_EVICT). Default: the engine's.",
    ),
]

TraceOpt = Annotated[
    Path | None,
    typer.Option(
        "--trace",
        help="Simulate a trace: CSV with columns arrival_s,input_tokens,output_tokens (or Azure's TIMESTAMP,"
        "ContextTokens,GeneratedTokens), or JSON Lines with those keys or Mooncake's (timestamp in ms, input_length, "
        "output_length, hash_ids); .gz too.",
    ),
]

RatesOpt = Annotated[
    str | None,
    typer.Option(
        "--rates",
        help="Simulate a sweep over request rates: A:B doubles from A to B (1:64), A:B:STEP, or R1,R2,...; "
        "one row per rate.",
    ),
]

DisaggregateOpt = Annotated[
    str | None,
    typer.Option(
        "--disaggregate",
        help="Simulate prefill and decode on separate pools, each request's KV cache sent between them: P:D "
        "workers at --tp, or PxTP:DxTP (e.g. 1x4:2x2).",
    ),
]

AttentionDpOpt = Annotated[
    int,
    typer.Option(
        "--attention-dp",
        min=1,
        max=MAX_DEGREE,
        help="A MoE model's replica as that many groups of --tp devices, each serving its own requests through "
        "attention with the dense weights whole, the experts split over every group (TensorRT-LLM's DEP "
        "layouts: --tp 1 --attention-dp 4 is DEP4). Closed forms only.",
    ),
]

MoeExchangeOpt = Annotated[
    str,
    typer.Option(
        "--moe-exchange",
        help="How --attention-dp groups bring tokens to the experts: gather (all-gather and reduce-scatter, "
        "TensorRT-LLM's default) or alltoall (each token to the ranks holding its experts: WIDEEP, DeepEP).",
    ),
]
