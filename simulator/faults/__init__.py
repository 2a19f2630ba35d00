"""Run level: failures, degradations and fault-tolerance policies over days of training.

Entry point: `engine.simulate_run` (one run; `records.RunLevelResult` holds its frames and
figures). Monte Carlo over seeds and swept studies live in `simulator.study.sweep`, their
figures in `simulator.viz.faults`. The step level plugs in through `StepOracle` (see
`state.py`).
"""
