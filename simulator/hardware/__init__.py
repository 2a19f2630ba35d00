"""Hardware built from a topology graph: the cluster's GPUs, links, storage and state."""
