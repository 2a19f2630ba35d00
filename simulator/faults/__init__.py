"""Run level: failures, degradations and fault-tolerance policies over days of training.

Entry points: `simulate_run` (one run), `run_seeds` (Monte Carlo of one configuration),
`load_study` / `run_study` (swept studies), `sweep_figure`. The step level plugs in through
`StepOracle` (see `state.py`).
"""
