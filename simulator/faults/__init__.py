"""Run level: failures, degradations and fault-tolerance policies over days of training.

Entry points: `simulate_run` (one run), `run_seeds` (Monte Carlo of one configuration),
`load_study` / `run_study` (swept studies), `sweep_figure`. The step level plugs in through
`StepOracle` (see `state.py`).
"""

from simulator.faults.degradation import (
    DegradationSpec,
    DegradedLinkSpec,
    FlappingLinkSpec,
    StragglerSpec,
)
from simulator.faults.engine import RunLevelEngine, RunLevelResult, simulate_run, summarize
from simulator.faults.failure import (
    ExponentialFailureSpec,
    FailureEvent,
    FailureSpec,
    ScheduledFailureSpec,
    WeibullFailureSpec,
    job_mtbf_s,
    sample_failures,
)
from simulator.faults.figure import sweep_figure
from simulator.faults.formulas import (
    daly_efficiency,
    daly_expected_time_s,
    daly_interval_s,
    young_interval_s,
)
from simulator.faults.metrics import aggregate, t_interval
from simulator.faults.policy import (
    AsyncCheckpointSpec,
    CheckpointRestartSpec,
    ElasticSpec,
    HotSparesSpec,
    InMemorySpec,
    PolicySpec,
    RestartSpec,
)
from simulator.faults.preset import llama3_405b
from simulator.faults.state import (
    CachedOracle,
    ClusterState,
    ConstantOracle,
    JobShape,
    ScalingOracle,
    StepOracle,
    TableOracle,
)
from simulator.faults.sweep import (
    StudySpec,
    load_study,
    map_tasks,
    run_seeds,
    run_study,
    set_scenario_oracle_factory,
    study_from_data,
    summarize_study,
)

__all__ = [
    "AsyncCheckpointSpec", "CachedOracle", "CheckpointRestartSpec", "ClusterState", "ConstantOracle",
    "DegradationSpec", "DegradedLinkSpec", "ElasticSpec", "ExponentialFailureSpec", "FailureEvent",
    "FailureSpec", "FlappingLinkSpec", "HotSparesSpec", "InMemorySpec", "JobShape", "PolicySpec",
    "RestartSpec", "RunLevelEngine", "RunLevelResult", "ScalingOracle", "ScheduledFailureSpec",
    "StepOracle", "StragglerSpec", "StudySpec", "TableOracle", "WeibullFailureSpec", "aggregate",
    "daly_efficiency", "daly_expected_time_s", "daly_interval_s", "job_mtbf_s", "llama3_405b",
    "load_study", "map_tasks", "run_seeds", "run_study", "sample_failures", "set_scenario_oracle_factory",
    "simulate_run", "study_from_data", "summarize", "summarize_study", "sweep_figure", "t_interval",
    "young_interval_s",
]
