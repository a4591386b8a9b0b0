"""Packet-level transport simulation: a discrete-event core, links and switches with finite buffers,
SRD-like, RC-like and TCP-like transports, and the host data paths (kernel TCP over ENA, libfabric
over EFA with host-staged GPU buffers, EFA with GPUDirect RDMA)."""
