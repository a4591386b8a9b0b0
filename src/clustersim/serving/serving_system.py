"""A serving deployment's devices: replicas of ``tp x pp`` (times ``attention_dp``) devices of a ``System``, the
fabrics their collectives run over, and how a MoE replica's ranks reach the experts."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from clustersim.errors import ClusterSimError
from clustersim.network.cost import ANALYTIC, CollectiveCost
from clustersim.network.fabric import Fabric
from clustersim.serving.formats import ServingPrecision, gemm_dtype
from clustersim.system import System, power_clock_ratio

MoeExchange = Literal["gather", "alltoall"]
"""How attention-DP ranks bring tokens to the experts (``clustersim.serving.moe_exchange``)."""
MOE_EXCHANGES: tuple[MoeExchange, ...] = ("gather", "alltoall")


@dataclass(frozen=True, slots=True)
class ServingSystem:
    """``dp`` replicas of a ``tp x pp`` model on devices of ``system``, with the fabrics of the TP group
    and of the PP sends (``System.group_fabric``). Per-device figures are the system's: a NeuronCore's
    share of a chip where cores count as devices. ``attention_dp`` > 1: a replica of that many groups of ranks
    that share a MoE model's experts over ``ep_fabric`` (``clustersim.serving.attention_dp``)."""

    name: str
    system: System
    tp: int = 1
    pp: int = 1
    dp: int = 1
    tp_fabric: Fabric | None = None
    pp_fabric: Fabric | None = None
    cost: CollectiveCost = ANALYTIC  # prices the TP all-reduces, PP sends and the experts' gathers and scatters
    board_power_watts: float | None = None  # a power limit other than the catalogued TDP (None: the TDP)
    attention_dp: int = 1  # attention data-parallel groups of one replica, its experts split over them
    ep_fabric: Fabric | None = None  # the fabric of a stage's tp x attention_dp ranks (the experts' exchange)
    moe_exchange: MoeExchange = "gather"  # how the ranks' tokens reach the experts (clustersim.serving.moe_exchange)

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "dp", "attention_dp"):
            if getattr(self, name) < 1:
                raise ClusterSimError(f"{name}: must be at least 1, got {getattr(self, name)}")
        if self.tp > 1 and self.tp_fabric is None:
            raise ClusterSimError(f"tp {self.tp} needs a fabric for its all-reduces")
        if self.attention_dp > 1 and self.ep_fabric is None:
            raise ClusterSimError(f"attention_dp {self.attention_dp} needs a fabric for its experts' exchange")
        if self.moe_exchange not in MOE_EXCHANGES or (self.moe_exchange != "gather" and self.attention_dp == 1):
            raise ClusterSimError(
                f"moe_exchange: {self.moe_exchange!r} (valid: {', '.join(MOE_EXCHANGES)}; alltoall needs "
                f"attention_dp above 1, got {self.attention_dp})",
                field="moe_exchange",
                value=self.moe_exchange,
            )
        if self.board_power_watts is not None and not self.board_power_watts > 0:
            raise ClusterSimError(f"board power: must be positive watts, got {self.board_power_watts}")

    @classmethod
    def on(
        cls,
        system: System,
        name: str,
        *,
        tp: int,
        pp: int = 1,
        dp: int = 1,
        cost: CollectiveCost = ANALYTIC,
        board_power_watts: float | None = None,
        attention_dp: int = 1,
        moe_exchange: MoeExchange = "gather",
    ) -> ServingSystem:
        """Replicas of tp x pp devices of ``system`` (times ``attention_dp``): TP all-reduces among neighbours,
        the experts' exchange (``moe_exchange``) among a stage's ``tp x attention_dp`` neighbours, PP sends that
        far apart."""
        stage = tp * attention_dp
        return cls(
            name=name,
            system=system,
            tp=tp,
            pp=pp,
            dp=dp,
            tp_fabric=system.group_fabric(tp, 1),
            pp_fabric=system.group_fabric(2 if pp > 1 else 1, stage),
            cost=cost,
            board_power_watts=board_power_watts,
            attention_dp=attention_dp,
            ep_fabric=system.group_fabric(stage, 1) if attention_dp > 1 else None,
            moe_exchange=moe_exchange,
        )

    def clock_ratio(self, exponent: float) -> float:
        """Sustained clock on compute-bound work relative to the catalogued TDP's: ``(power / TDP) ** exponent``
        (dynamic power goes about as the cube of the clock when voltage follows it: exponent 1/3); 1
        without a power limit of its own or a catalogued TDP."""
        board = None if self.board_power_watts is None else self.board_power_watts * self.system.share
        return power_clock_ratio(board, self.system.power_watts, exponent)

    @property
    def layout(self) -> str:
        """One replica's layout in words: ``tp 4 x pp 1``, with ``x attention dp 4`` where it has one."""
        adp = f" x attention dp {self.attention_dp}" if self.attention_dp > 1 else ""
        return f"tp {self.tp} x pp {self.pp}{adp}"

    @property
    def replica_devices(self) -> int:
        """Devices of one replica: ``tp x pp x attention_dp``."""
        return self.tp * self.pp * self.attention_dp

    @property
    def num_devices(self) -> int:
        """Devices of all replicas."""
        return self.replica_devices * self.dp

    @property
    def family(self) -> str:
        """The accelerator family (catalog ``family``): which serving engines run here."""
        return self.system.accelerator.family

    @property
    def device_name(self) -> str:
        """The accelerator id, or the share of one that a device is (``0.5 of trainium1``)."""
        share = self.system.share
        return self.system.accelerator.id if share == 1 else f"{share:g} of {self.system.accelerator.id}"

    def peak_flop_per_s(self, precision: ServingPrecision) -> float:
        """Dense peak of one device for GEMMs in ``precision`` (nvfp4 and mxfp4: the fp4 peak);
        ``ClusterSimError`` naming the formats it has."""
        try:
            return self.system.peak_flop_per_s(gemm_dtype(precision))
        except ClusterSimError as exc:
            raise ClusterSimError(f"precision: {exc}") from None
