"""The options of ``clustersim transport``'s commands (one definition each, shared by the commands)."""

import math
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clustersim.cli.common import number, plot_path
from clustersim.errors import ClusterSimError

if TYPE_CHECKING:
    from clustersim.catalog.schema import Instance
    from clustersim.network.transport.experiments import Scenario

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
    int,
    typer.Option(
        "--rc-timeout",
        min=0,
        max=31,
        help="RC's local ACK timeout exponent, 4.096 us x 2^N (default NCCL_IB_TIMEOUT's 20: 4.3 s).",
    ),
]
RcRetryOption = Annotated[
    int,
    typer.Option(
        "--rc-retry",
        min=0,
        max=7,
        help="RC's retry count: timeouts in a row before the queue pair fails (default NCCL_IB_RETRY_CNT's 7).",
    ),
]
FlowControlOption = Annotated[
    str | None,
    typer.Option(
        "--flow-control",
        help="RC's link-level flow control: pfc (RoCE), credit (InfiniBand) or none (drop-tail, lossy); default "
        "the instance's fabric: credit on InfiniBand NICs, pfc on Ethernet ones. SRD and TCP run on lossy Ethernet.",
    ),
]
RcOutstandingOption = Annotated[
    int,
    typer.Option(
        "--rc-outstanding",
        min=1,
        max=64,
        help="RC's messages in flight per queue pair (1: each after the previous completes; NCCL keeps up to 8).",
    ),
]
LossyOption = Annotated[bool, typer.Option("--lossy", help="RC on drop-tail links: --flow-control none.")]
RcRecoveryOption = Annotated[
    str,
    typer.Option(
        "--rc-recovery",
        help="RC's loss recovery: selective (selective repeat, ConnectX-6 Dx/7) or go-back-n (older NICs).",
    ),
]
DcqcnOption = Annotated[
    bool | None,
    typer.Option(
        "--dcqcn/--no-dcqcn",
        help="DCQCN congestion control for RC over PFC (default: on with PFC, as RoCE deploys it).",
        show_default=False,
    ),
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


def link_layer(adapter: str) -> str:
    """The link layer of an instance's scale-out NICs, from the catalog's adapter id: InfiniBand for
    ``infiniband-*`` (ConnectX in IB mode: RC over credit-based links), Ethernet otherwise (EFA runs SRD,
    ENA TCP; RC there is RoCE, over PFC)."""
    return "infiniband" if adapter.startswith("infiniband") else "ethernet"


def rc_settings(
    adapter: str,
    *,
    flow_control: str | None,
    lossy: bool,
    recovery: str,
    dcqcn: bool | None,
    timeout: int,
    retry: int,
    outstanding: int = 1,
) -> dict[str, Any]:
    """The ``Scenario`` fields of RC's options, checked against each other and the instance's fabric."""
    from clustersim.network.transport.lossless import FLOW_CONTROLS
    from clustersim.network.transport.rc import RECOVERIES

    layer = link_layer(adapter)
    native = "credit" if layer == "infiniband" else "pfc"
    if flow_control is not None and flow_control not in FLOW_CONTROLS:
        raise ClusterSimError(
            f"--flow-control: {flow_control!r} is not one of {', '.join(FLOW_CONTROLS)}",
            field="--flow-control",
            value=flow_control,
        )
    if lossy and flow_control not in (None, "none"):
        raise ClusterSimError(
            f"--lossy: it means --flow-control none, and --flow-control {flow_control} was given (valid: one of them)",
            field="--lossy",
            value=flow_control,
        )
    chosen = "none" if lossy else (flow_control or native)
    if chosen not in (native, "none"):
        raise ClusterSimError(
            f"--flow-control: {chosen} is not the link-level flow control of {layer} ({adapter} NICs; "
            f"valid: {native}, none)",
            field="--flow-control",
            value=chosen,
        )
    if recovery not in RECOVERIES:
        raise ClusterSimError(
            f"--rc-recovery: {recovery!r} is not one of {', '.join(RECOVERIES)}", field="--rc-recovery", value=recovery
        )
    if dcqcn and chosen != "pfc":
        raise ClusterSimError(
            f"--dcqcn: DCQCN is RoCE's congestion control, modelled over PFC links; RC here runs with --flow-control "
            f"{chosen} (valid: --dcqcn with --flow-control pfc)",
            field="--dcqcn",
            value=chosen,
        )
    return {
        "rc_flow_control": chosen,
        "rc_recovery": recovery,
        "rc_dcqcn": dcqcn,
        "rc_timeout_exponent": timeout,
        "rc_retry_count": retry,
        "rc_outstanding": outstanding,
    }


def rc_label(scenario: Any) -> str:
    """How RC ran, for a table's title: its links, congestion control and recovery."""
    links = {"pfc": "PFC", "credit": "credit", "none": "lossy"}[scenario.rc_flow_control]
    cc = " + DCQCN" if scenario.dcqcn else ""
    depth = f", {scenario.rc_outstanding} outstanding" if scenario.rc_outstanding > 1 else ""
    return f"RC: {links}{cc}, {scenario.rc_recovery}, timeout 2^{scenario.rc_timeout_exponent}{depth}"


def parse_fraction(text: str, flag: str) -> float:
    raw = text.strip()
    try:
        value = float(raw[:-1]) / 100 if raw.endswith("%") else float(raw)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and 0 <= value < 1):
        raise ClusterSimError(
            f"{flag}: {text!r} is not a loss rate (valid: a fraction in [0, 1) or a percentage below 100%, e.g. 0.1%)",
            field=flag,
            value=text,
        )
    return value


def parse_bytes(text: str, flag: str) -> int:
    from clustersim.units import parse_bytes

    stripped = text.strip()
    if stripped and stripped[-1] in "KkMmGg":
        stripped = stripped[:-1] + stripped[-1].upper() + "iB"  # 1M is 1 MiB, as in nccl-tests
    try:
        value = parse_bytes(stripped)
    except ClusterSimError as exc:
        raise ClusterSimError(f"{flag}: {exc}", field=flag, value=text) from None
    if not 1 <= value <= MAX_MESSAGE_BYTES:
        raise ClusterSimError(f"{flag}: {text!r} is out of range (valid: 1 byte to 1 GiB)", field=flag, value=text)
    return int(value)


def parse_seconds(text: str, flag: str) -> float:
    from clustersim.units import parse_seconds

    try:
        value = parse_seconds(text)
    except ClusterSimError as exc:
        raise ClusterSimError(f"{flag}: {exc}", field=flag, value=text) from None
    if not 0 < value <= 1:
        raise ClusterSimError(f"{flag}: {text!r} is out of range (valid: > 0 s and <= 1 s)", field=flag, value=text)
    return value


def rc_options(
    flow_control: str | None,
    lossy: bool,
    recovery: str,
    dcqcn: bool | None,
    timeout: int,
    retry: int,
    outstanding: int = 1,
) -> dict[str, Any]:
    """RC's options as given, checked against the instance in ``_scenario`` (``rc_settings``)."""
    return {
        "flow_control": flow_control,
        "lossy": lossy,
        "recovery": recovery,
        "dcqcn": dcqcn,
        "timeout": timeout,
        "retry": retry,
        "outstanding": outstanding,
    }


def scenario_on(instance: "Instance", *, rc: dict[str, Any] | None = None, **options: Any) -> "Scenario":
    """The scenario on ``instance``'s NICs; ``rc`` (``_rc_options``) sets RC's links, recovery and timeout,
    checked against the instance's fabric (the defaults where not given)."""
    from clustersim.network.transport.experiments import Scenario

    given = rc or rc_options(None, False, "selective", None, 20, 7)
    settings = rc_settings(instance.network.adapter, **given)
    return Scenario(line_bits_per_s=float(instance.network.card_bandwidth_bits_per_s.value), **settings, **options)
