"""Studies: loading, axes, executors (serial, process pool, Dask) and the figure."""

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

from simulator.errors import InputError
from simulator.study.sweep import (
    build_oracle,
    load_study,
    run_one,
    run_study,
    study_from_data,
    summarize_study,
)
from simulator.viz.faults import sweep_figure

DATA = Path(__file__).parent / "data" / "interval_study.yaml"


def test_load_expands_axes_in_order():
    study = load_study(DATA)
    assert len(study.variants) == 6
    first, last = study.variants[0], study.variants[-1]
    assert first.labels == {"interval_min": 10, "policy": "checkpoint_restart"}
    assert last.labels == {"interval_min": 90, "policy": "hot_spares"}
    # the policy axis replaced the policy; the interval axis then set its interval
    assert last.spec.policy.kind == "hot_spares" and last.spec.policy.interval_s == 5400
    assert first.spec.duration_s == 20 * 86400 and first.spec.step.checkpoint_write_s == 300


def test_bad_axis_value_names_file_and_field(tmp_path):
    data = yaml.safe_load(DATA.read_text())
    data["axes"] = [{"param": "policy.interval_min", "values": [10, -5]}]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(InputError) as err:
        load_study(bad)
    assert "bad.yaml" in str(err.value) and "policy.interval_min=-5" in str(err.value)


def test_unknown_key_is_reported_with_line(tmp_path):
    text = DATA.read_text().replace("seeds: 4", "seeds: 4\nsede: 3")
    bad = tmp_path / "typo.yaml"
    bad.write_text(text)
    with pytest.raises(InputError) as err:
        load_study(bad)
    assert "typo.yaml:" in str(err.value) and "sede" in str(err.value)


def test_from_scenario_names_a_missing_scenario():
    """`from_scenario` runs the step simulation of that scenario; a missing file is an InputError."""
    data = yaml.safe_load(DATA.read_text())
    data["step"] = {"from_scenario": "../scenarios/x.yaml"}
    from simulator.errors import InputError

    # found when the study is loaded (so `validate` reports it), not when the sweep starts
    with pytest.raises(InputError, match="x.yaml"):
        study_from_data(data)
    spec = study_from_data(yaml.safe_load(DATA.read_text())).spec
    step = spec.step.model_copy(update={"from_scenario": "../scenarios/x.yaml"})
    with pytest.raises(InputError, match="x.yaml"):
        build_oracle(spec.model_copy(update={"step": step}), Path("."))


def _small():
    data = yaml.safe_load(DATA.read_text())
    data["duration_days"] = 5
    data["seeds"] = 2
    return study_from_data(data, DATA)


def test_pool_and_serial_identical():
    study = _small()
    a = run_study(study, executor="serial")
    b = run_study(study, executor="pool", max_workers=2)
    pd.testing.assert_frame_equal(a, b)
    assert list(a.columns[:4]) == ["variant", "interval_min", "policy", "seed"]
    assert list(a.variant) == [v for v in range(6) for _ in range(2)]
    assert a.attrs["axes"] == ["interval_min", "policy"]


def test_dask_local_cluster_identical():
    """Same table on a Dask LocalCluster (threads, TCP on loopback) as in-process (~2 s)."""
    distributed = pytest.importorskip("dask.distributed")
    study = _small()
    a = run_study(study, executor="serial")
    with (
        distributed.LocalCluster(
            n_workers=1, processes=False, protocol="tcp://", host="127.0.0.1", dashboard_address=None
        ) as cluster,
        distributed.Client(cluster) as client,
    ):
        b = run_study(study, executor=client)
    pd.testing.assert_frame_equal(a, b)


def test_summary_and_figure():
    study = _small()
    runs = run_study(study, executor="serial")
    summary = summarize_study(runs)
    assert len(summary) == 6 and (summary.n == 2).all()
    assert (summary.goodput_lo <= summary.goodput_mean).all()
    fig = sweep_figure(runs)
    names = [t.name for t in fig.data if t.showlegend is not False]
    assert names == ["policy=checkpoint_restart", "policy=hot_spares"]
    bar = sweep_figure(runs, x="policy", color=None)
    assert bar.data[0].type == "bar"


def test_run_one_is_deterministic():
    spec = load_study(DATA).variants[0].spec
    assert run_one(spec, 5) == run_one(copy.deepcopy(spec), 5)


def test_cli_sweep(tmp_path):
    import typer
    from typer.testing import CliRunner

    from simulator.commands.sweep import register

    app = typer.Typer()

    @app.callback()
    def main() -> None:
        """clustersim"""

    register(app)
    data = yaml.safe_load(DATA.read_text())
    data["duration_days"] = 3
    data["axes"] = data["axes"][:1]
    f = tmp_path / "study.yaml"
    f.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["sweep", str(f), "-o", str(out), "--seeds", "2", "--workers", "1"])
    assert res.exit_code == 0, res.output
    assert (out / "summary.csv").exists() and (out / "sweep.html").exists()
    assert (out / "study.resolved.yaml").exists()
    assert any(p.name.startswith("runs.") for p in out.iterdir())
    summary = pd.read_csv(out / "summary.csv")
    assert list(summary.interval_min) == [10, 30, 90]

    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\njob: {n_gpus: 63, gpus_per_node: 8, gpus_per_replica: 8}\n")
    res = CliRunner().invoke(app, ["sweep", str(bad), "-o", str(out)])
    assert res.exit_code == 2
    assert "bad.yaml" in res.output and "Traceback" not in res.output
