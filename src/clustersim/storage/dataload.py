"""Data loading: the bytes per second a training job reads against what the file system and its clients
deliver.

A pre-tokenized dataset stores each token as an integer id: 2 bytes (uint16) for a vocabulary of fewer than
65,500 ids, else 4 (int32), as Megatron-Core's indexed datasets pick it (``DType.optimal_dtype``: ``cardinality <
65500`` gives ``numpy.uint16``, megatron/core/datasets/indexed_dataset.py; a margin below 2**16, so a vocabulary of
65,500 to 65,536 ids takes 4 bytes). The job reads
``tokens/s x bytes/token`` (each token once per epoch; shuffling reads whole documents, so the
sequential rate applies); the file system serves uncached reads at its read baseline, and each instance
at most its client ceiling.
"""

from __future__ import annotations

from dataclasses import dataclass

from clustersim.catalog.schema import Instance
from clustersim.errors import ClusterSimError
from clustersim.storage.checkpoint import Transfer, transfer
from clustersim.storage.fsx import ClientPath, FileSystem

UINT16_VOCAB_LIMIT = 65_500  # Megatron-Core's DType.optimal_dtype: uint16 below this many ids


def bytes_per_token(vocab: int) -> float:
    """On-disk bytes of one token id of a pre-tokenized dataset of a ``vocab``-id vocabulary."""
    return 2.0 if vocab < UINT16_VOCAB_LIMIT else 4.0


@dataclass(frozen=True)
class DataLoading:
    """What the job needs against what storage supplies, per second."""

    need_bytes_per_s: float
    supply: Transfer  # one second of reading, its bound named

    @property
    def supply_bytes_per_s(self) -> float:
        """What the binding bound delivers."""
        return self.supply.bytes_per_s

    @property
    def headroom(self) -> float:
        """Supply over need (< 1: the job waits on data)."""
        return self.supply_bytes_per_s / self.need_bytes_per_s


def data_loading(
    fs: FileSystem,
    *,
    tokens_per_s: float,
    token_bytes: float,
    num_nodes: int,
    path: ClientPath,
    instance: Instance | None,
) -> DataLoading:
    """The job's read rate against the file system's read baseline and its clients' ceilings."""
    for name, value in (("tokens_per_s", tokens_per_s), ("token_bytes", token_bytes)):
        if not value > 0:  # NaN too
            raise ClusterSimError(f"{name}: must be a positive number, got {value!r}", field=name, value=value)
    fs.check_path(path)
    need = tokens_per_s * token_bytes
    bounds = {"clients": num_nodes * fs.client_bytes_per_s(path, instance), "file system": fs.read_bytes_per_s}
    return DataLoading(need_bytes_per_s=need, supply=transfer(need, bounds))
