"""The Python API runs what the command line runs and hands back frames and summaries."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml

from simulator import api
from simulator.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


@pytest.fixture(scope="module")
def one_step(tmp_path_factory: pytest.TempPathFactory) -> api.Result:
    return api.run(QUICKSTART, steps=1, output=tmp_path_factory.mktemp("api") / "qs")


def test_run_returns_frames_and_summary_and_writes_what_load_reads(one_step: api.Result) -> None:
    r = one_step
    assert r.name == "quickstart" and r.summary["steps"] == 1
    assert {"ops", "flows", "links", "steps"} <= set(r.frames)
    steps = r["steps"]
    # the summary's figures are the weighted means of the frame they come from
    assert r.summary["step_time_s"] == pytest.approx(float(steps["step_time_s"].mean()), rel=1e-12)
    assert r.folder is not None and (r.folder / "dashboard.html").is_file()
    again = api.load(r.folder)
    assert again.summary == r.summary
    for name, df in r.frames.items():
        pd.testing.assert_frame_equal(again.frames[name], df, check_dtype=False)


def test_a_mapping_runs_like_the_file(one_step: api.Result) -> None:
    data = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    r = api.run(data, steps=1, base_dir=QUICKSTART.parent)
    assert r.summary["step_time_s"] == one_step.summary["step_time_s"]
    pd.testing.assert_frame_equal(r.frames["ops"], one_step.frames["ops"])


def test_a_bad_mapping_is_one_line_naming_the_field() -> None:
    data = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    data["run"] = {"steps": 0}
    with pytest.raises(InputError) as err:
        api.run(data, base_dir=QUICKSTART.parent)
    assert "run.steps" in str(err.value) and "\n" not in str(err.value)
    # placed in the mapping, not in the file written for the run (gone, its lines not the caller's)
    assert str(err.value) == "<scenario mapping>: run.steps: input should be greater than or equal to 1"


def test_compare_gives_the_table_and_each_variant(small_compare: Path) -> None:
    cmp = api.compare(small_compare, steps=1)
    assert list(cmp.table["variant"]) == ["ring", "tree", "hier-1step"] == list(cmp.results)
    for _, row in cmp.table.iterrows():
        assert row["step_time_s"] == cmp.results[row["variant"]].summary["step_time_s"]


def test_sweep_of_a_mapping_gives_runs_and_summary() -> None:
    study = yaml.safe_load((ROOT / "tests" / "study" / "data" / "interval_study.yaml").read_text())
    study["duration_days"] = 2
    out = api.sweep(study, seeds=2)
    assert out.name == "interval-vs-policy"
    assert len(out.runs) == 6 * 2 and len(out.summary) == 6
    assert out.runs["goodput"].between(0, 1).all()
    mean = out.runs.groupby(["interval_min", "policy"], sort=False)["goodput"].mean().to_numpy()
    assert out.summary["goodput_mean"].to_numpy() == pytest.approx(mean, rel=1e-12)


def test_a_mapping_importing_a_trace_resolves_its_path_against_base_dir() -> None:
    """`workload: {format: kineto, path: relative}` is found from `base_dir`, as in a file."""
    data = yaml.safe_load((ROOT / "scenarios" / "kineto-hta-a100-ddp2.yaml").read_text(encoding="utf-8"))
    assert data["workload"]["format"] == "kineto" and not Path(data["workload"]["path"]).is_absolute()
    r = api.run(data, base_dir=ROOT / "scenarios")
    assert r.summary["step_time_s"] > 0 and r.summary["gpus_in_job"] == 2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"steps": 0}, "steps: input should be greater than or equal to 1, got 0"),
        ({"steps": "2"}, "steps: expected a whole number, found '2'"),
        ({"steps": 1.5}, "steps: expected a whole number, found 1.5"),
        ({"steps": True}, "steps: expected a whole number, found True"),
        ({"seed": -1}, "seed: input should be greater than or equal to 0, got -1"),
        ({"seed": "x"}, "seed: expected a whole number, found 'x'"),
        ({"seed": 2**70}, "seed: input should be less than or equal to 4,611,686,018,427,387,904, got "),
        ({"on_step": 5}, "on_step: expected a function or None, found 5"),
    ],
)
def test_a_bad_override_is_one_line_naming_the_argument(kwargs: dict[str, object], message: str) -> None:
    """Overrides are checked as the file's fields are, before anything runs: no TypeError from
    the engine, no NumPy seed error, no silent `True` for 1 or seed beyond the schema's."""
    with pytest.raises(InputError) as err:
        api.run(QUICKSTART, **kwargs)  # type: ignore[arg-type]
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_scenario_that_is_no_path_nor_mapping_is_refused() -> None:
    with pytest.raises(
        InputError, match=r"^scenario: expected a file \(str or Path\) or a mapping, found int 42$"
    ):
        api.run(42)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: api.run(QUICKSTART, output=5), "output: expected a file (str or Path), found int 5"),
        (lambda: api.run({"name": "x"}, base_dir=5), "base_dir: expected a file (str or Path), found int 5"),
        (lambda: api.load(123), "folder: expected a file (str or Path), found int 123"),
    ],
)
def test_a_path_argument_of_another_type_is_one_line(call, message: str) -> None:
    """`output`, `base_dir` and `load`'s folder of another type were a TypeError with a
    traceback (for `output`, after the whole simulation)."""
    with pytest.raises(InputError) as caught:
        call()
    assert str(caught.value) == message


def test_bad_compare_and_sweep_arguments_are_refused_before_running(small_compare: Path) -> None:
    study = ROOT / "tests" / "study" / "data" / "interval_study.yaml"
    with pytest.raises(InputError, match="^steps: input should be greater than or equal to 1, got 0$"):
        api.compare(small_compare, steps=0)
    for bad in (5, "bogus"):  # a word that is no name nor host:port address was tried as an address
        with pytest.raises(InputError, match="^executor: expected 'serial', 'pool'"):
            api.compare(small_compare, steps=1, executor=bad)
    # seeds=0 ran the study's own seed count, silently; -1 ended in a KeyError of pandas
    for seeds in (0, -1):
        with pytest.raises(
            InputError, match=f"^seeds: input should be greater than or equal to 1, got {seeds}$"
        ):
            api.sweep(study, seeds=seeds)
    with pytest.raises(InputError, match="^seeds: expected a whole number, found '2'$"):
        api.sweep(study, seeds="2")  # type: ignore[arg-type]


def test_a_loaded_result_gives_the_dashboard_the_folder_holds(one_step: api.Result) -> None:
    """The page of `api.load(folder)` is the one written beside the frames (and the one
    `clustersim dashboard` rebuilds): with the topology view read from topology.json, which
    it left out."""
    assert one_step.folder is not None
    written = (one_step.folder / "dashboard.html").read_text(encoding="utf-8")
    assert one_step.dashboard_html() == written
    assert api.load(one_step.folder).dashboard_html() == written


def test_compare_and_sweep_report_progress(small_compare: Path) -> None:
    """The module's `on_done` (named in its docstring) exists: (finished, total) per task."""
    calls: list[tuple[int, int]] = []
    api.compare(small_compare, steps=1, on_done=lambda *a: calls.append(a))
    assert calls == [(1, 3), (2, 3), (3, 3)]
    study = yaml.safe_load((ROOT / "tests" / "study" / "data" / "interval_study.yaml").read_text())
    study["duration_days"] = 2
    calls.clear()
    api.sweep(study, seeds=1, on_done=lambda *a: calls.append(a))
    assert calls == [(k, 6) for k in range(1, 7)]


def test_a_missing_reference_of_a_mapping_names_base_dir(tmp_path: Path) -> None:
    """A mapping has no folder: its references are read from `base_dir`, and the error says so
    (it said "resolved relative to the scenario")."""
    data = yaml.safe_load(QUICKSTART.read_text(encoding="utf-8"))
    with pytest.raises(InputError) as err:
        api.run(data, base_dir=tmp_path)
    missing = (tmp_path / data["topology"]["file"]).resolve()
    assert str(err.value) == (
        f"<scenario mapping>: topology.file: file {str(missing)!r} not found "
        f"(resolved relative to base_dir {str(tmp_path.resolve())!r})"
    )
