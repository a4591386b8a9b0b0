"""Speed of the collective model: one prediction at 20,000 GPUs, and a full nccl-tests size sweep.

Prints medians over repeated runs (one process, one run of this script). Run:
``python benchmarks/bench_collectives.py``.
"""

from __future__ import annotations

import numpy as np

from clustersim.catalog.registry import load_catalog
from clustersim.network import Op, fabric_for_instance, predict_collective
from timing import median_s


def main() -> None:
    catalog = load_catalog(use_env=False)
    fabric = fabric_for_instance(catalog, "p5.48xlarge", 2500)  # 20,000 H100
    sweep = 8.0 * 2.0 ** np.arange(31)  # nccl-tests -b 8 -e 8G -f 2: 31 sizes
    for op in (Op.ALL_REDUCE, Op.ALL_GATHER, Op.ALLTOALL):
        one = median_s(lambda op=op: predict_collective(op, 2.0**30, fabric), 2000)
        full = median_s(lambda op=op: predict_collective(op, sweep, fabric), 500)
        print(
            f"{op.value:>11} on {fabric.num_ranks} GPUs: one size {one * 1e6:7.1f} us median; "
            f"sweep of {sweep.size} sizes {full * 1e6:7.1f} us median = {sweep.size / full:,.0f} predictions/s"
        )


if __name__ == "__main__":
    main()
