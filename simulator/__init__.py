"""clustersim: a discrete-event simulator of GPU training clusters."""

__version__ = "0.1.0"
