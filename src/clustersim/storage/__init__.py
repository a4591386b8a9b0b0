"""Storage: FSx for Lustre file systems and local NVMe from the catalog, checkpoints and data loading."""
