"""TCP goodput beside ns-3 on the same path: one bulk transfer over four 100 Gbit/s store-and-forward
links (10 us of propagation one way), random loss on each host's first link (data one way, ACKs the
other), over several seeds; medians, ranges and the ratio of the medians.

ns-3 runs its own TCP (NewReno or CUBIC congestion control, SACK, PRR; it has no RACK-TLP) with the
settings ours takes: 8,949-byte segments, an initial window of 10, a 200 ms minimum RTO, an
acknowledgement for every segment, timestamps. clustersim runs the same congestion control with each
recovery it has (``newreno`` without SACK, ``sack`` as ns-3 does, ``rack`` as Linux does), so the
``sack`` rows are the like-for-like comparison and the others show what the recovery changes. One more
difference is in the congestion control: on a loss, ns-3's NewReno halves its BytesInFlight (RFC 6675's
pipe, which leaves out the segments SACKed above the hole and the hole itself, about three segments below
the window at the third duplicate ACK), where Linux halves the window, as clustersim does by default; the
``sack-pipe`` row (NewReno only; ns-3's CUBIC scales the window, as Linux does) runs clustersim's ``sack``
with ``reduction_basis="pipe"``, ns-3's choice, and is NewReno's like-for-like row.

At 1% loss a transfer either finishes in a few milliseconds or waits 200 ms for a retransmission timeout
(a lost retransmission, or a lost tail, which duplicate-threshold SACK cannot repair: about a third of the
runs in both simulators), so the goodput over seeds is bimodal and a median over 15 seeds can land in
either mode. Each side therefore reports how many runs had a timeout (ns-3: the receiver got no new data
for 100 ms; clustersim: its timer fired) and the median of the runs without one, which compares the
recovery and congestion control themselves. Each ns-3 run draws its losses from streams fixed by its seed
alone (``AssignStreams``), so a seed gives the same run whatever ran before it in the process.

ns-3 comes from the ``ns3`` wheel (its Python bindings through cppyy), installed in a virtual
environment of its own (not in CI: it is 70 MB and its first import compiles for half a minute):

    python3 -m venv /tmp/ns3venv && /tmp/ns3venv/bin/pip install ns3
    .venv/bin/python benchmarks/tcp_vs_ns3.py --ns3-python /tmp/ns3venv/bin/python [--seeds 5] [--mib 64] \\
        [--loss 0.01] [--recovery sack]

The ns-3 side runs this file under that interpreter with ``--ns3-side``; it prints JSON.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

LINE_BITS_PER_S = 100e9
HOP_DELAY_S = 2.5e-6  # four links: 10 us of propagation one way
SEGMENT_BYTES = 8949
LOSSES = (0.001, 0.01)
CONGESTION = ("newreno", "cubic")
RECOVERIES = ("newreno", "sack", "sack-pipe", "rack")  # sack-pipe: sack with ns-3 NewReno's reduction basis


def clustersim_goodput(loss: float, congestion: str, recovery: str, seed: int, message_bytes: int) -> dict:
    """Goodput (bits/s) of one bulk transfer in clustersim's packet simulator, with its counters."""
    from clustersim.network.transport.engine import Environment
    from clustersim.network.transport.links import Network
    from clustersim.network.transport.tcp import TcpParams
    from clustersim.network.transport.tcp_sack import tcp_flow
    from clustersim.network.transport.topology import FabricSpec, leaf_spine

    env = Environment(seed)
    spec = FabricSpec(host_bits_per_s=LINE_BITS_PER_S, hop_latency_s=HOP_DELAY_S, host_latency_s=0.0, loss=loss)
    topo = leaf_spine(Network(env), spec, hosts_per_leaf=1, num_paths=1)
    basis = "pipe" if recovery == "sack-pipe" else "cwnd"
    params = TcpParams(
        congestion=congestion, recovery=recovery.removesuffix("-pipe"), reduction_basis=basis, max_window=1 << 20
    )
    flow = tcp_flow(topo, 0, 1, [message_bytes], params, seed=seed)
    env.run()
    assert flow.done_ps is not None, "the transfer did not finish"
    return {
        "goodput_bits_per_s": message_bytes * 8 / (flow.completions_ps[0] / 1e12),
        "timeouts": flow.timeouts,
        "retransmissions": flow.retransmissions,
    }


NS3_PROBE = """
namespace clustersim_probe {
double done_s = -1;
double last_change_s = 0;
uint64_t last_rx = 0;
int stalls = 0;
void Check(ns3::Ptr<ns3::PacketSink> sink, uint64_t total, double step_s, double stall_s) {
    double now_s = ns3::Simulator::Now().GetSeconds();
    uint64_t rx = sink->GetTotalRx();
    if (rx > last_rx) {
        if (now_s - last_change_s >= stall_s) { stalls++; }
        last_rx = rx;
        last_change_s = now_s;
    }
    if (rx >= total) { done_s = now_s; ns3::Simulator::Stop(); return; }
    ns3::Simulator::Schedule(ns3::Seconds(step_s), &Check, sink, total, step_s, stall_s);
}
void Reset() { done_s = -1; last_change_s = 0; last_rx = 0; stalls = 0; }
}
"""
STALL_S = 0.1  # no new data at the receiver for half the 200 ms minimum RTO: a retransmission timeout


def ns3_goodput(loss: float, congestion: str, seed: int, message_bytes: int) -> dict:
    """Goodput (bits/s) of one BulkSend transfer in ns-3 over the same chain of links."""
    import cppyy
    from ns import ns

    if not hasattr(cppyy.gbl, "clustersim_probe"):
        cppyy.cppdef(NS3_PROBE)
    cppyy.gbl.clustersim_probe.Reset()
    ns.RngSeedManager.SetSeed(1)
    ns.RngSeedManager.SetRun(seed)
    kind = {"newreno": "ns3::TcpNewReno", "cubic": "ns3::TcpCubic"}[congestion]
    ns.Config.SetDefault("ns3::TcpL4Protocol::SocketType", ns.TypeIdValue(ns.TypeId.LookupByName(kind)))
    ns.Config.SetDefault(
        "ns3::TcpL4Protocol::RecoveryType", ns.TypeIdValue(ns.TypeId.LookupByName("ns3::TcpPrrRecovery"))
    )
    for name, value in (
        ("SegmentSize", ns.UintegerValue(SEGMENT_BYTES)),
        ("InitialCwnd", ns.UintegerValue(10)),
        ("DelAckCount", ns.UintegerValue(1)),
        ("SndBufSize", ns.UintegerValue(1 << 30)),
        ("RcvBufSize", ns.UintegerValue(1 << 30)),
    ):
        ns.Config.SetDefault(f"ns3::TcpSocket::{name}", value)
    ns.Config.SetDefault("ns3::TcpSocketBase::MinRto", ns.TimeValue(ns.MilliSeconds(200)))
    ns.Config.SetDefault("ns3::TcpSocketBase::Sack", ns.BooleanValue(True))
    ns.Config.SetDefault("ns3::TcpSocketBase::Timestamp", ns.BooleanValue(True))
    nodes = ns.NodeContainer()
    nodes.Create(5)
    p2p = ns.PointToPointHelper()
    p2p.SetDeviceAttribute("DataRate", ns.StringValue(f"{LINE_BITS_PER_S:.0f}bps"))
    p2p.SetDeviceAttribute("Mtu", ns.UintegerValue(SEGMENT_BYTES + 52))
    p2p.SetChannelAttribute("Delay", ns.TimeValue(ns.NanoSeconds(int(HOP_DELAY_S * 1e9))))
    p2p.SetQueue("ns3::DropTailQueue", "MaxSize", ns.QueueSizeValue(ns.QueueSize("1000p")))
    ns.InternetStackHelper().Install(nodes)
    address = ns.Ipv4AddressHelper()
    interfaces = []
    devices = []
    for i in range(4):
        pair = p2p.Install(nodes.Get(i), nodes.Get(i + 1))
        devices.append(pair)
        address.SetBase(ns.Ipv4Address(f"10.0.{i}.0"), ns.Ipv4Mask("255.255.255.0"))
        interfaces.append(address.Assign(pair))
    ns.Ipv4GlobalRoutingHelper.PopulateRoutingTables()
    for stream, device in enumerate((devices[0].Get(1), devices[3].Get(0))):  # each host's first link: data, ACKs
        errors = ns.CreateObject[ns.RateErrorModel]()
        errors.SetAttribute("ErrorRate", ns.DoubleValue(loss))
        errors.SetAttribute("ErrorUnit", ns.StringValue("ERROR_UNIT_PACKET"))
        errors.AssignStreams(stream)  # a run's draws depend on its seed only, not on the runs before it
        device.SetAttribute("ReceiveErrorModel", ns.PointerValue(errors))
    port = 5000
    sink_helper = ns.PacketSinkHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(ns.Ipv4Address.GetAny(), port).ConvertTo()
    )
    sinks = sink_helper.Install(nodes.Get(4))
    sinks.Start(ns.Seconds(0.0))
    sender = ns.BulkSendHelper(
        "ns3::TcpSocketFactory", ns.InetSocketAddress(interfaces[3].GetAddress(1), port).ConvertTo()
    )
    sender.SetAttribute("MaxBytes", ns.UintegerValue(message_bytes))
    sender.SetAttribute("SendSize", ns.UintegerValue(SEGMENT_BYTES))
    apps = sender.Install(nodes.Get(0))
    apps.Start(ns.Seconds(0.0))
    sink = sinks.Get(0).GetObject[ns.PacketSink]()
    cppyy.gbl.clustersim_probe.Check(sink, message_bytes, 10e-6, STALL_S)
    ns.Simulator.Stop(ns.Seconds(60.0))
    ns.Simulator.Run()
    done_s = float(cppyy.gbl.clustersim_probe.done_s)
    ns.Simulator.Destroy()
    if done_s <= 0:
        raise RuntimeError("ns-3's transfer did not finish in 60 s")
    return {"goodput_bits_per_s": message_bytes * 8 / done_s, "timeouts": int(cppyy.gbl.clustersim_probe.stalls)}


def _spread(values: list[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values) / 1e9:6.2f} ({min(values) / 1e9:.2f}-{max(values) / 1e9:.2f})"


def _summary(runs: list[dict]) -> tuple[str, str, str, float, float | None]:
    """(median and range, runs with a timeout, median and range of the runs without one, the two medians)."""
    rates = [r["goodput_bits_per_s"] for r in runs]
    clean = [r["goodput_bits_per_s"] for r in runs if r["timeouts"] == 0]
    stalled = f"{sum(r['timeouts'] > 0 for r in runs)}/{len(runs)}"
    clean_median = statistics.median(clean) if clean else None
    return _spread(rates), stalled, _spread(clean), statistics.median(rates), clean_median


def _ratio(ours: float | None, theirs: float | None) -> str:
    return f"{ours / theirs:.2f}" if ours and theirs else "-"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ns3-python", default=None, help="a Python with the ns3 wheel installed")
    parser.add_argument("--ns3-side", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=64, help="MiB per transfer")
    parser.add_argument("--loss", type=float, action="append", choices=LOSSES, help="only this loss (repeatable)")
    parser.add_argument("--recovery", action="append", choices=RECOVERIES, help="only this recovery of ours")
    args = parser.parse_args(argv)
    losses = tuple(args.loss or LOSSES)
    recoveries = tuple(args.recovery or RECOVERIES)
    message = args.mib << 20
    seeds = range(1, args.seeds + 1)
    if args.ns3_side:
        out = {}
        for loss in losses:
            for congestion in CONGESTION:
                out[f"{loss} {congestion}"] = [ns3_goodput(loss, congestion, s, message) for s in seeds]
        print(json.dumps(out))
        return
    ns3 = None
    ns3_wall = None
    if args.ns3_python:
        start = time.perf_counter()
        command = [args.ns3_python, __file__, "--ns3-side", "--seeds", str(args.seeds), "--mib", str(args.mib)]
        command += [f"--loss={loss}" for loss in losses]
        ns3 = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout.splitlines()[-1])
        ns3_wall = time.perf_counter() - start
    print(
        f"one {args.mib} MiB transfer, 100 Gbit/s x 4 links, 10 us one way; goodput Gbit/s, median (min-max) "
        f"over {args.seeds} seeds; RTO: runs with a retransmission timeout; then the runs without one"
    )
    print(
        f"{'loss':>6} {'cc':>7} {'ns-3 (SACK, PRR)':>20} {'RTO':>5} {'recovery':>9} {'clustersim':>20} {'RTO':>5} "
        f"{'ratio':>5} | {'ns-3 without RTO':>20} {'clustersim':>20} {'ratio':>5}"
    )
    start = time.perf_counter()
    for loss in losses:
        for congestion in CONGESTION:
            theirs = _summary(ns3[f"{loss} {congestion}"]) if ns3 else ("-", "-", "-", None, None)
            for recovery in recoveries:
                if recovery == "sack-pipe" and congestion != "newreno":
                    continue  # ns-3's CUBIC scales the window, as the sack row does
                ours = _summary([clustersim_goodput(loss, congestion, recovery, s, message) for s in seeds])
                print(
                    f"{loss:>6} {congestion:>7} {theirs[0]:>20} {theirs[1]:>5} {recovery:>9} {ours[0]:>20} "
                    f"{ours[1]:>5} {_ratio(ours[3], theirs[3]):>5} | {theirs[2]:>20} {ours[2]:>20} "
                    f"{_ratio(ours[4], theirs[4]):>5}",
                    flush=True,
                )
    ours_wall = time.perf_counter() - start
    print(
        f"wall: clustersim {ours_wall:.1f} s"
        + (f", ns-3 {ns3_wall:.1f} s (incl. its ~30 s import)" if ns3_wall else "")
    )


if __name__ == "__main__":
    sys.exit(main())
