"""clustersim: simulate and plan large-scale ML training and inference clusters."""

__version__ = "0.1.0"
