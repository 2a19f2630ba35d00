"""The network: topology graphs, routing, the flow-level fabric and collective algorithms."""
