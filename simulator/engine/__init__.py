"""The SimPy engine: run context, cost models and the step simulation."""
