"""Speed of the packet-level transport simulator against the same experiment written with SimPy, side by
side in one process: packet events per second, heap events per second and their ratios.

The experiment: one sender pushes N packets of 8,192 payload bytes through four 100 Gbit/s store-and-
forward hops with a window of 64 packets; every packet is acknowledged back over four hops and has a
retransmission timer (cancelled lazily). Ours runs it as an SRD-like flow on one path, twice: as the
simulator runs (a packet crosses every port fed by a single port in one event, and a receiver that alone
sends into its host's port answers in its data's event, so here a data packet and its ACK make one heap
event, the ACK's arrival at the sender) and with both turned off (one heap event per hop, as SimPy does
it). SimPy runs it in its cheapest idiom (timeouts with callbacks, no processes) and in its usual one
(a process per port pulling from a Store). All must finish at the same simulated picosecond.

Units, the same for every variant:
- a *packet event* is one packet (data or ACK) handled at one hop: queued and served at a port, or
  delivered to its endpoint. Each data packet makes 10 (4 ports and the receiver, then its ACK's 4 ports
  and the sender); each variant checks it did exactly that work (every packet sent once, none dropped,
  lost or resent), so packet events = 10 N for all, and their rate is the one to compare;
- a *heap event* is one pop of the simulator's event queue (ours: ``Environment.num_events``; SimPy:
  every event it scheduled, timeouts, store puts and gets and process resumptions alike);
- packets/s is data packets per CPU second (``time.process_time``).
Rounds are interleaved (each runs every variant once), so a loaded machine slows all alike; rates are
medians over rounds, ratios the median of each round's ratio (with the worst round's).

SimPy is optional (``pip install "simpy>=4"``, or the project's ``bench`` extra); without it only our
rates are printed. Run: ``python benchmarks/bench_transport.py [--packets N] [--repeats R] [--json]``.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import statistics
import time
from typing import Any, NamedTuple

from clustersim.network.transport.engine import Environment, ps
from clustersim.network.transport.flows import ACK_BYTES
from clustersim.network.transport.links import Network
from clustersim.network.transport.srd import SrdFlow, SrdParams
from clustersim.network.transport.topology import FabricSpec, leaf_spine

PAYLOAD = 8192
HEADER = 84
WINDOW = 64
RTO_S = 50e-6
SPEC = FabricSpec(host_bits_per_s=100e9, host_latency_s=1e-6, hop_latency_s=0.5e-6)
PROPS_PS = [ps(1.5e-6), ps(0.5e-6), ps(0.5e-6), ps(1.5e-6)]
PS_PER_BYTE = 80  # 100 Gbit/s


HOPS = 4
PACKET_EVENTS_PER_PACKET = 2 * (HOPS + 1)  # a data packet's 4 ports and delivery, then its ACK's


class Run(NamedTuple):
    """One variant's run of the experiment."""

    heap_events: int
    finish_ps: int
    cpu_s: float
    packet_events: int


def ours(num_packets: int, *, one_event_per_hop: bool = False) -> Run:
    """Our simulator (``one_event_per_hop``: no crossing of single-feeder ports in their feeder's event, no
    receiver in its data's event)."""
    env = Environment(1)
    net = Network(env)
    topo = leaf_spine(net, SPEC, hosts_per_leaf=1, num_paths=1)
    if one_event_per_hop:
        net.solo[:] = [False] * len(net.solo)
    params = SrdParams(initial_window=WINDOW, max_window=WINDOW, rto_s=RTO_S)
    flow = SrdFlow(topo, 0, 1, [num_packets * PAYLOAD], params)
    if one_event_per_hop:
        net.inline[:] = [False] * len(net.inline)
    start = time.process_time()
    env.run()
    cpu = time.process_time() - start
    assert flow.completions_ps and flow.done_ps is not None
    # every packet sent once and none dropped or lost: each data packet and its ACK crossed every port
    assert flow.packets_sent == num_packets and flow.retransmissions == 0
    assert sum(net.drops) == 0 and sum(net.losses) == 0
    assert len(flow.routes[0]) == len(flow.back_routes[0]) == HOPS
    return Run(env.num_events, flow.done_ps, cpu, PACKET_EVENTS_PER_PACKET * flow.packets_sent)


def ours_per_hop(num_packets: int) -> Run:
    """Ours with one event per hop."""
    return ours(num_packets, one_event_per_hop=True)


def _simpy_heap_events(env: Any, fallback: int) -> int:
    """Every event a SimPy environment scheduled (all of them ran: the run emptied its queue)."""
    eid = getattr(env, "_eid", None)  # SimPy's running event id (an itertools.count)
    return next(eid) if eid is not None else fallback


def with_simpy(num_packets: int) -> Run:
    """The same experiment in SimPy's cheapest idiom: timeouts with callbacks, no processes."""
    import simpy

    env = simpy.Environment()
    busy = [0] * 8  # ports 0-3 forward, 4-7 back
    counts = {"events": 0, "acked": 0, "next": 0, "inflight": 0, "done": -1}
    acked = bytearray(num_packets)
    data_service = (PAYLOAD + HEADER) * PS_PER_BYTE
    ack_service = ACK_BYTES * PS_PER_BYTE
    rto_ps = ps(RTO_S)

    def hop(seq: int, k: int, back: bool) -> None:
        counts["events"] += 1
        if k == 4:
            if back:
                on_ack(seq)
            else:
                hop_now(seq, 0, True)
            return
        hop_now(seq, k, back)

    def hop_now(seq: int, k: int, back: bool) -> None:
        port = k + 4 if back else k
        now = int(env.now)
        leave = max(busy[port], now) + (ack_service if back else data_service)
        busy[port] = leave
        event = env.timeout(leave + PROPS_PS[k] - now)
        event.callbacks.append(lambda _e: hop(seq, k + 1, back))

    def timer(seq: int) -> None:
        counts["events"] += 1
        if not acked[seq]:
            raise RuntimeError("no packet is lost in this experiment")

    def send_more() -> None:
        while counts["inflight"] < WINDOW and counts["next"] < num_packets:
            seq = counts["next"]
            counts["next"] += 1
            counts["inflight"] += 1
            hop_now(seq, 0, False)
            event = env.timeout(max(busy[0], int(env.now)) - int(env.now) + rto_ps)
            event.callbacks.append(lambda _e, seq=seq: timer(seq))

    def on_ack(seq: int) -> None:
        acked[seq] = 1
        counts["acked"] += 1
        counts["inflight"] -= 1
        if counts["acked"] == num_packets:
            counts["done"] = int(env.now)
        send_more()

    send_more()
    start = time.process_time()
    env.run()
    cpu = time.process_time() - start
    # 4 hop events each way (3 ports and the delivery; port 0 is entered inside another event) and a timer
    assert counts["acked"] == num_packets and counts["events"] == (2 * HOPS + 1) * num_packets
    heap = _simpy_heap_events(env, counts["events"])
    return Run(heap, counts["done"], cpu, PACKET_EVENTS_PER_PACKET * num_packets)


def with_simpy_stores(num_packets: int) -> Run:
    """The same experiment written the way SimPy models are usually written: a process per port
    pulling packets from a ``Store``, a sender process waiting on a window event, timers as timeouts."""
    import simpy

    env = simpy.Environment()
    counts = {"events": 0, "acked": 0, "inflight": 0, "done": -1}
    acked = bytearray(num_packets)
    data_service = (PAYLOAD + HEADER) * PS_PER_BYTE
    ack_service = ACK_BYTES * PS_PER_BYTE
    stores = [simpy.Store(env) for _ in range(8)]  # ports 0-3 forward, 4-7 back
    window_open = {"event": env.event()}

    def port(index: int) -> Any:
        k = index % 4
        back = index >= 4
        service = ack_service if back else data_service
        while True:
            seq = yield stores[index].get()
            if index == 0:
                env.process(timer(seq, service))  # the timer runs from when the packet has left the host
            yield env.timeout(service)
            env.process(propagate(seq, k, back))

    def propagate(seq: int, k: int, back: bool) -> Any:
        yield env.timeout(PROPS_PS[k])
        counts["events"] += 1
        if k < 3:
            stores[k + 1 + (4 if back else 0)].put(seq)
        elif back:
            on_ack(seq)
        else:
            stores[4].put(seq)  # the receiver acknowledges at once

    def on_ack(seq: int) -> None:
        acked[seq] = 1
        counts["acked"] += 1
        counts["inflight"] -= 1
        if counts["acked"] == num_packets:
            counts["done"] = int(env.now)
        if not window_open["event"].triggered:
            window_open["event"].succeed()

    def timer(seq: int, after_ps: int) -> Any:
        yield env.timeout(after_ps + ps(RTO_S))
        counts["events"] += 1
        if not acked[seq]:
            raise RuntimeError("no packet is lost in this experiment")

    def sender() -> Any:
        for seq in range(num_packets):
            while counts["inflight"] >= WINDOW:
                window_open["event"] = env.event()
                yield window_open["event"]
            counts["inflight"] += 1
            stores[0].put(seq)

    for index in range(8):
        env.process(port(index))
    env.process(sender())
    start = time.process_time()
    env.run()
    cpu = time.process_time() - start
    assert counts["acked"] == num_packets and counts["events"] == (2 * HOPS + 1) * num_packets
    heap = _simpy_heap_events(env, counts["events"])
    return Run(heap, counts["done"], cpu, PACKET_EVENTS_PER_PACKET * num_packets)


def bare_heapq(num_events: int) -> float:
    """Events per second of a bare heapq loop (push one, pop one), for scale."""
    heap: list[tuple[int, int, Any]] = [(i, i, None) for i in range(64)]
    heapq.heapify(heap)
    start = time.process_time()
    for n in range(num_events):
        t, _, _ = heapq.heappop(heap)
        heapq.heappush(heap, (t + 5, n + 64, None))
    return num_events / (time.process_time() - start)


VARIANTS = {
    "clustersim": ours,
    "clustersim, one event per hop": ours_per_hop,
    "SimPy, callbacks": with_simpy,
    "SimPy, processes+Stores": with_simpy_stores,
}
TARGET_PACKET_EVENTS_PER_S = 500_000
TARGET_RATIO = 3.0  # against SimPy's cheapest idiom, the callbacks


def measure(num_packets: int, repeats: int, names: list[str]) -> dict[str, Any]:
    """Every variant in ``names`` run ``repeats`` times, interleaved; medians, and each round's ratios of
    ours to every SimPy variant (time ratios: the same work, so packet events/s and packets/s alike)."""
    runs: dict[str, list[Run]] = {name: [] for name in names}
    for _ in range(repeats):
        for name in names:
            runs[name].append(VARIANTS[name](num_packets))
    finish = runs[names[0]][0].finish_ps
    for name, results in runs.items():
        for run in results:
            if run.finish_ps != finish or run.packet_events != runs[names[0]][0].packet_events:
                raise SystemExit(f"{name} disagrees: finish at {run.finish_ps} ps vs {finish} ps")
    variants = {}
    for name, results in runs.items():
        cpu = statistics.median(r.cpu_s for r in results)
        variants[name] = {
            "cpu_s_median": cpu,
            "cpu_s_min": min(r.cpu_s for r in results),
            "heap_events": results[0].heap_events,
            "packet_events": results[0].packet_events,
            "packet_events_per_s": results[0].packet_events / cpu,
            "heap_events_per_s": results[0].heap_events / cpu,
            "packets_per_s": num_packets / cpu,
        }
    ratios = {}
    for ours_name in (n for n in names if n.startswith("clustersim")):
        for simpy_name in (n for n in names if n.startswith("SimPy")):
            per_round = [s.cpu_s / o.cpu_s for o, s in zip(runs[ours_name], runs[simpy_name], strict=True)]
            ratios[f"{ours_name} / {simpy_name}"] = {"median": statistics.median(per_round), "min": min(per_round)}
    return {"packets": num_packets, "repeats": repeats, "finish_ps": finish, "variants": variants, "ratios": ratios}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=20_000, help="Data packets in the experiment.")
    parser.add_argument("--repeats", type=int, default=7, help="Rounds, each running every variant once.")
    parser.add_argument("--json", action="store_true", help="Print the figures as JSON.")
    args = parser.parse_args()
    if args.packets < 1 or args.repeats < 1:
        raise SystemExit(f"--packets ({args.packets}) and --repeats ({args.repeats}) must be at least 1")
    load_before = os.getloadavg()
    heapq_rate = bare_heapq(1_000_000)
    names = list(VARIANTS)
    try:
        import simpy  # noqa: F401
    except ImportError:
        names = [n for n in names if not n.startswith("SimPy")]
        print('SimPy is not installed: pip install "simpy>=4" to run the side-by-side comparison')
    result = measure(args.packets, args.repeats, names)
    result["bare_heapq_events_per_s"] = heapq_rate
    result["load_average"] = {"before": load_before, "after": os.getloadavg()}
    result["cpus"] = os.cpu_count()
    ours_rate = result["variants"]["clustersim"]["packet_events_per_s"]
    callbacks = result["ratios"].get("clustersim / SimPy, callbacks")
    result["targets"] = {
        "packet_events_per_s": {"target": TARGET_PACKET_EVENTS_PER_S, "met": ours_rate >= TARGET_PACKET_EVENTS_PER_S},
        "ratio_to_simpy_callbacks": {
            "target": TARGET_RATIO,
            "met": None if callbacks is None else callbacks["median"] >= TARGET_RATIO,
        },
    }
    if args.json:
        print(json.dumps(result, indent=1))
        return
    _report(result)


def _report(result: dict[str, Any]) -> None:
    before, after = result["load_average"]["before"], result["load_average"]["after"]
    print(
        f"{result['packets']:,} data packets, {result['repeats']} interleaved rounds, medians; "
        f"load average {before[0]:.2f} before, {after[0]:.2f} after, on {result['cpus']} CPUs"
    )
    print(f"bare heapq loop (push one, pop one): {result['bare_heapq_events_per_s']:,.0f} events/s")
    print(f"{'':<31} {'CPU s':>7} {'packet events/s':>16} {'heap events':>12} {'heap events/s':>14} {'packets/s':>10}")
    for name, v in result["variants"].items():
        print(
            f"{name:<31} {v['cpu_s_median']:7.3f} {v['packet_events_per_s']:>16,.0f} {v['heap_events']:>12,} "
            f"{v['heap_events_per_s']:>14,.0f} {v['packets_per_s']:>10,.0f}"
        )
    packet_events = result["variants"]["clustersim"]["packet_events"]
    print(f"every variant: {packet_events:,} packet events, finishing at {result['finish_ps'] / 1e6:,.3f} us simulated")
    for pair, r in result["ratios"].items():
        print(f"{pair}: {r['median']:.2f}x the packet events/s (median of rounds; worst round {r['min']:.2f}x)")
    targets = result["targets"]
    rate = result["variants"]["clustersim"]["packet_events_per_s"]
    verdict = {True: "met", False: "NOT met", None: "not measured (no SimPy)"}
    print(
        f"target >= {TARGET_PACKET_EVENTS_PER_S:,} packet events/s: {verdict[targets['packet_events_per_s']['met']]} "
        f"({rate:,.0f}); target >= {TARGET_RATIO:.0f}x SimPy (callbacks): "
        f"{verdict[targets['ratio_to_simpy_callbacks']['met']]}"
    )


if __name__ == "__main__":
    main()
