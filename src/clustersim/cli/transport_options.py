"""The options of ``clustersim transport``'s commands (one definition each, shared by the commands)."""

from pathlib import Path
from typing import Annotated

import typer

from clustersim.cli.common import number, plot_path

MAX_MESSAGES = 100_000
MAX_MESSAGE_BYTES = 1 << 30

InstanceOption = Annotated[
    str, typer.Option("--instance", help="Instance id or alias; its NIC speed is the line rate.")
]
LossOption = Annotated[str, typer.Option("--loss", help="Packet loss rate: a fraction or a percentage, e.g. 0.1%.")]
PathsOption = Annotated[
    int, typer.Option("--paths", min=1, max=255, help="Equal-cost paths (spines) between the hosts.")
]
MessageOption = Annotated[str, typer.Option("--message", help="Message size, e.g. 4K, 1M (binary), 64KiB.")]
MessagesOption = Annotated[
    int, typer.Option("--messages", min=1, max=MAX_MESSAGES, help="Messages per flow, one after another.")
]
BackgroundOption = Annotated[
    float,
    typer.Option(
        "--background", callback=number(ge=0, le=0.99), help="Poisson load on every switch link, share of its speed."
    ),
]
SeedOption = Annotated[int, typer.Option("--seed", min=0, help="Random seed (loss, background, ECMP hash).")]
CollisionOption = Annotated[
    bool, typer.Option("--collision", help="An elephant at 90% load on the path RC and TCP hash to.")
]
RtoOption = Annotated[
    str,
    typer.Option(
        "--srd-rto",
        help="SRD's minimum retransmission timeout (not public), e.g. 50us; a full buffer's queueing delay plus the "
        "round trip raises it (the queue-aware floor).",
    ),
]
RcTimeoutOption = Annotated[
    int, typer.Option("--rc-timeout", min=0, max=31, help="IB local ACK timeout exponent: 4.096 us x 2^N.")
]
KernelOption = Annotated[
    bool, typer.Option("--tcp-kernel/--no-tcp-kernel", help="TCP pays the kernel's costs and ENA's flow ceiling.")
]
CongestionOption = Annotated[
    str, typer.Option("--tcp-congestion", help="TCP's congestion control: cubic (RFC 9438, Linux's) or newreno.")
]
RecoveryOption = Annotated[
    str,
    typer.Option(
        "--tcp-recovery",
        help="TCP's loss recovery: rack (SACK, PRR and RACK-TLP: Linux's), sack (SACK and PRR with three "
        "duplicates: ns-3's) or newreno (no SACK).",
    ),
]
PlotOption = Annotated[
    Path | None, typer.Option("--plot", callback=plot_path, help="Write a figure (PNG, SVG, PDF) to this path.")
]
