"""Speed of the packet-level transport simulator: simulated events and packets per second, ours against
the same experiment written with SimPy, side by side in one process, and their ratios.

The experiment: one sender pushes N packets of 8,192 payload bytes through four 100 Gbit/s store-and-
forward hops with a window of 64 packets; every packet is acknowledged back over four hops and has a
retransmission timer (cancelled lazily). Ours runs it as an SRD-like flow on one path, twice: as the
simulator runs (a packet crosses every port fed by a single port in one event, so here a data packet
and its ACK are one event each) and with that turned off (one event per hop, as SimPy does it). SimPy
runs it in its cheapest idiom (timeouts with callbacks, no processes) and in its usual one (a process
per port pulling from a Store). All must finish at the same simulated picosecond.

"Events" are what each simulator's event loop pops (heap entries for ours, SimPy events that carry
the model's work for SimPy's); packets/s is the data packets of the experiment over CPU seconds, the
rate to compare, since fewer events per packet is a gain only if packets/s rises.

SimPy is optional (``pip install "simpy>=4"``, or the project's ``bench`` extra); without it only our
rates are printed. Run: ``python benchmarks/bench_transport.py [--packets N] [--repeats R]``.
"""

from __future__ import annotations

import argparse
import heapq
import time
from typing import Any

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


def ours(num_packets: int, *, one_event_per_hop: bool = False) -> tuple[int, int, float]:
    """(events, finish time in ps, CPU seconds) of our simulator."""
    env = Environment(1)
    net = Network(env)
    topo = leaf_spine(net, SPEC, hosts_per_leaf=1, num_paths=1)
    if one_event_per_hop:
        net.solo[:] = [False] * len(net.solo)
    params = SrdParams(initial_window=WINDOW, max_window=WINDOW, rto_s=RTO_S)
    flow = SrdFlow(topo, 0, 1, [num_packets * PAYLOAD], params)
    start = time.process_time()
    env.run()
    wall = time.process_time() - start
    assert flow.completions_ps and flow.done_ps is not None
    return env.num_events, flow.done_ps, wall


def with_simpy(num_packets: int) -> tuple[int, int, float]:
    """(events, finish time in ps, wall seconds) of the same experiment in SimPy."""
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
    wall = time.process_time() - start
    return counts["events"], counts["done"], wall


def with_simpy_stores(num_packets: int) -> tuple[int, int, float]:
    """The same experiment written the way SimPy models are usually written: a process per port
    pulling packets from a ``Store``, a sender process waiting on a window event, timers as timeouts.
    (events, finish time in ps, wall seconds); events counts packet hops, deliveries and timers as ours."""
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
    wall = time.process_time() - start
    return counts["events"], counts["done"], wall


def bare_heapq(num_events: int) -> float:
    """Events per second of a bare heapq loop (push one, pop one), for scale."""
    heap: list[tuple[int, int, Any]] = [(i, i, None) for i in range(64)]
    heapq.heapify(heap)
    start = time.process_time()
    for n in range(num_events):
        t, _, _ = heapq.heappop(heap)
        heapq.heappush(heap, (t + 5, n + 64, None))
    return num_events / (time.process_time() - start)


def ours_per_hop(num_packets: int) -> tuple[int, int, float]:
    """Ours with one event per hop (no chaining through single-feeder ports)."""
    return ours(num_packets, one_event_per_hop=True)


def _rate(name: str, events: int, seconds: float, packets: int) -> str:
    rates = f"{events / seconds:>10,.0f} events/s, {packets / seconds:>9,.0f} packets/s"
    return f"{name:<32} {events:>9,} events in {seconds:6.3f} s CPU = {rates}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--packets", type=int, default=20_000, help="Data packets in the experiment.")
    parser.add_argument(
        "--repeats", type=int, default=5, help="Rounds (each runs every variant once); the best of each is kept."
    )
    args = parser.parse_args()
    rate = bare_heapq(1_000_000)
    print(f"bare heapq loop: {rate:,.0f} events/s (CPU time, the best of {args.repeats} rounds for the rest)")
    variants = {"clustersim": ours, "clustersim, one event per hop": ours_per_hop}
    try:
        import simpy  # noqa: F401

        variants |= {"SimPy, callbacks": with_simpy, "SimPy, processes+Stores": with_simpy_stores}
    except ImportError:
        print('SimPy is not installed: pip install "simpy>=4" to run the side-by-side comparison')
    best: dict[str, tuple[int, int, float]] = {}
    for _ in range(args.repeats):  # interleaved, so that a loaded machine slows every variant alike
        for name, run in variants.items():
            result = run(args.packets)
            if name not in best or result[2] < best[name][2]:
                best[name] = result
    finish = best["clustersim"][1]
    for name, (n, end, s) in best.items():
        print(_rate(name, n, s, args.packets))
        if end != finish:
            raise SystemExit(f"{name} disagrees: finish at {end} ps vs clustersim {finish} ps")
    print(f"all finish at {finish / 1e6:,.3f} us simulated")
    for ours_name in ("clustersim", "clustersim, one event per hop"):
        n_ours, _, s_ours = best[ours_name]
        for name, (n, _, s) in best.items():
            if name.startswith("SimPy"):
                print(
                    f"{ours_name} vs {name}: {s / s_ours:.2f}x packets/s (time), "
                    f"{(n_ours / s_ours) / (n / s):.2f}x events/s"
                )


if __name__ == "__main__":
    main()
