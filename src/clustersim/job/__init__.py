"""Jobs: a training step and inference serving composed from compute and communication."""
