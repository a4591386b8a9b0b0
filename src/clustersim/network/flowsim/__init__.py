"""Flow-level fabric simulation: fat-trees as arrays, ECMP and spraying, max-min fair sharing.

``topology`` builds the fabric, ``routing`` maps flows onto it, ``solver`` shares it max-min
fairly, ``engine`` runs flows with dependencies, ``collectives`` expresses NCCL's algorithms as
flows on a job's hosts and ``groups`` on the many rank groups of a parallel layout at once (with the
per-node expert dispatch), ``cluster`` sizes the fabric from the catalog, places jobs and fails
links and spines, ``failover`` fails leaves and sends the lost NICs' traffic through a peer GPU
(NCCL's PXN), ``results`` summarises a run, and ``cost`` puts it behind the ``CollectiveCost``
interface (registered as ``sim`` in ``clustersim.network.cost.COST_MODELS`` when imported).
"""
