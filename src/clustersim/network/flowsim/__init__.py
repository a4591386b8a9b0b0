"""Flow-level fabric simulation: fat-trees as arrays, ECMP and spraying, max-min fair sharing.

``topology`` builds the fabric, ``routing`` maps flows onto it, ``solver`` shares it max-min
fairly, ``engine`` runs flows with dependencies, ``collectives`` expresses NCCL's algorithms as
flows, ``results`` summarises a run, and ``cost`` puts it behind the ``CollectiveCost`` interface
(registered as ``sim`` in ``clustersim.network.cost.COST_MODELS`` when imported).
"""
