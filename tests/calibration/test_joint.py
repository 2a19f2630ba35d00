"""The joint fit of the collective model's physical parameters (simulator.calibration.joint)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from simulator.calibration.apply import ProfileTuning, fitted_collective_params
from simulator.calibration.joint import (
    IN_RUN_SPREAD_LOG,
    RUN_SPREAD_LOG,
    FitOptions,
    Sample,
    fit_all_to_all_latency,
    fit_joint,
    make_sample,
    predict_s,
    resized_cluster,
    run_factors,
    table_shares,
)
from simulator.calibration.parser import read_benchmark
from simulator.calibration.profile import CalibrationProfile, CollectiveParamsFit
from simulator.calibration.replay import replay
from simulator.errors import InputError
from simulator.network.collective_params import with_fitted
from tests.calibration.logs import SAMPLES
from tests.conftest import ROOT

P5 = ROOT / "topologies" / "h100-p5-efa-2n.yaml"
ONE_NODE = "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt"
TWO_NODES = "h100-16gpu-2node-allreduce-aws-p5-efa.txt"
TRUE = {
    "nic_efficiency": 0.8,
    "scale_up_efficiency": 0.7,
    "ll_efficiency": 0.9,
    "ll128_efficiency": 0.8,
    "net_latency_us": 23.0,  # the catalog's EFA figure, which the fit's prior expects
    "simple_net_overhead_us": 100.0,
    "latency_scale": 1.2,
    "step_latency_us": 1.0,
    "launch_latency_us": 5.0,
}


def _sample(name: str) -> Sample:
    table = read_benchmark(SAMPLES / name)[0]
    return make_sample(table, resized_cluster(P5, table.n_nodes))


def _synthetic(s: Sample, values: dict[str, float]) -> Sample:
    """The sample with its measured times replaced by the model's under `values`."""
    return replace(s, measured_s=predict_s(s, with_fitted(s.base, values)))


def test_fit_on_one_and_two_nodes_predicts_four_nodes() -> None:
    one, two = _synthetic(_sample(ONE_NODE), TRUE), _synthetic(_sample(TWO_NODES), TRUE)
    fit = fit_joint([one, two])
    # the fitted parameters reproduce the tables they were fitted on
    assert max(fit.table_errors.values()) < 0.02
    # and speak for a scale never measured: 32 GPUs on 4 nodes of the same system
    cluster = resized_cluster(P5, 4)
    four = replace(two, facts=cluster.topo.facts(list(cluster.gpus[:32])))
    truth = predict_s(four, with_fitted(four.base, TRUE))
    pred = predict_s(four, with_fitted(four.base, fit.values))
    # 2 %: the prior toward the library's constants pulls weakly on the fit (PRIOR_WEIGHT)
    assert np.median(np.abs(pred / truth - 1)) < 0.02


def test_a_profile_with_collective_params_reproduces_its_fit_when_run() -> None:
    s = _sample(TWO_NODES)
    values = dict(TRUE)
    block = CollectiveParamsFit(topology=P5.name, values=values)
    profile = CalibrationProfile(name="p", collective_params=block)
    tuning = ProfileTuning([("p", profile)])
    res = replay(s.table, profile, cluster=resized_cluster(P5, 2), half="out_of_place", tuning=tuning)
    model = predict_s(s, with_fitted(s.base, values))
    rel = np.abs(res["simulated_s"].to_numpy() / model - 1)
    # the engine runs the chosen algorithm's flows at the predicted efficiency: alone on the
    # fabric it takes the predicted time (median 1e-3); the exception is the tree with LL128
    # at 128 KiB - 8 MiB, whose flows on the fabric finish up to 6.4 % sooner than the
    # selection's tree bandwidth (half the scale-up rate) predicts
    assert np.median(rel) < 1e-3 and rel.max() < 0.07
    assert not tuning.warnings  # the physical parameters speak for it: no "uncalibrated" warning


def test_the_fit_reports_a_parameter_on_its_bound() -> None:
    # times twice as fast as full-rate links allow: an efficiency ends on its bound of 1
    fast = dict(TRUE, nic_efficiency=1.0, scale_up_efficiency=1.0)
    two = _sample(TWO_NODES)
    two = replace(two, sizes_bytes=two.sizes_bytes[::4])  # a few sizes keep the test quick
    two = replace(two, measured_s=predict_s(two, with_fitted(two.base, fast)) * 0.5)
    fit = fit_joint([two])
    assert fit.at_bounds.get("nic_efficiency") == 1.0 or fit.at_bounds.get("scale_up_efficiency") == 1.0


def test_point_to_point_tables_alone_cannot_be_fitted() -> None:
    table = read_benchmark(SAMPLES / "a100-40gb-8gpu-1node-alltoall-superbench-fixture.txt")[0]
    s = make_sample(table, resized_cluster(ROOT / "topologies" / "a100-p4de-efa-2n.yaml", 1))
    with pytest.raises(ValueError, match="all-to-all and send/recv are not fitted"):
        fit_joint([s])


def test_a_profile_rejects_unphysical_parameters() -> None:
    text = "name: p\ncollective_params:\n  topology: t.yaml\n  values: {nic_efficiency: 1.5}\n"
    with pytest.raises(InputError, match="outside its physical range"):
        CalibrationProfile.from_yaml(text)
    with pytest.raises(InputError, match="unknown parameter"):
        CalibrationProfile.from_yaml(text.replace("nic_efficiency: 1.5", "magic: 1"))


def test_a_run_takes_the_first_profile_with_collective_params() -> None:
    cluster = resized_cluster(P5, 2)
    block = CollectiveParamsFit(topology=P5.name, values={"nic_efficiency": 0.5}, at_bounds={"x": 0.0})
    tuning = ProfileTuning([("curves", CalibrationProfile(name="c")),
                            ("joint", CalibrationProfile(name="j", collective_params=block))])  # fmt: skip
    params = fitted_collective_params(tuning, cluster)
    assert params is not None and params.nic_efficiency == 0.5
    assert params.net_latency_us == 23.0  # the topology's NIC preset (efa-p5) still applies
    assert fitted_collective_params(ProfileTuning([("c", CalibrationProfile(name="c"))]), cluster) is None
    # a clamp of the fit is said in the run's warnings once the parameters price a collective
    assert not any("physical bound" in w for w in tuning.warnings)
    assert tuning.tune("all_reduce", 16, 2, 1 << 20, 1e11) is None  # no curve: the parameters price it
    assert any("joint: collective_params x ended on its physical bound" in w for w in tuning.warnings)


SINGLE_PROCESS = "a100-40gb-8gpu-1node-allreduce-superbench-fixture.txt"
A100 = ROOT / "topologies" / "a100-p4de-efa-2n.yaml"


def test_a_thread_driving_eight_gpus_holds_calls_to_eight_host_enqueues() -> None:
    # the header says `nGpus 8`: one thread enqueues every call on 8 GPUs one after another
    table = read_benchmark(SAMPLES / SINGLE_PROCESS)[0]
    assert table.gpus_per_thread == 8
    params = with_fitted(make_sample(table, resized_cluster(A100, 1)).base, {})
    assert params.launch_floor_s(8) == pytest.approx(8 * 3e-6, rel=1e-12)  # catalog: 3 us per launch
    assert params.launch_floor_s(1) == params.launch_floor_s(None) == 0.0
    cluster = resized_cluster(A100, 1)
    res = replay(table, CalibrationProfile(name="none"), cluster=cluster, half="out_of_place")
    # the same table as if run by one rank per GPU: the model's own times
    free = replay(replace(table, gpus_per_thread=1), CalibrationProfile(name="none"), cluster=cluster,
                  half="out_of_place")  # fmt: skip
    sim, model = res["simulated_s"].to_numpy(), free["simulated_s"].to_numpy()
    # A100 one node: the model's latency (~11-15 us) is below the 24 us floor at small sizes only
    assert (model < 24e-6).any() and (model > 24e-6).any()
    assert np.allclose(sim, np.maximum(model, 24e-6), rtol=1e-12, atol=0)


@pytest.mark.slow  # ~2 s of fits (the default suite stays under 3 CPU minutes)
def test_a_soft_l1_loss_keeps_one_odd_run_of_three_from_moving_the_fit() -> None:
    # three runs of one system, a few sizes each: two agree with the model under TRUE, the
    # third is 2x slower from 64 MiB (as the second AWS p5 run is against the first)
    two = _synthetic(_sample(TWO_NODES), TRUE)
    two = replace(two, sizes_bytes=two.sizes_bytes[1::3], measured_s=two.measured_s[1::3])
    again = replace(two, measured_s=two.measured_s.copy())
    odd = replace(two, measured_s=two.measured_s * np.where(two.sizes_bytes >= 64 * 2**20, 2.0, 1.0))
    big = two.sizes_bytes >= 2**20

    def error_on_the_agreeing_runs(opts: FitOptions | None) -> float:
        fit = fit_joint([two, again, odd], opts)
        return float(
            np.max(np.abs(predict_s(two, with_fitted(two.base, fit.values)) / two.measured_s - 1)[big])
        )

    # least squares meets the odd run a third of the way: 25 % off the two that agree
    assert error_on_the_agreeing_runs(None) > 0.15
    # soft L1 at the run-to-run spread follows the two (measured: 6 %, against 25 %)
    assert error_on_the_agreeing_runs(FitOptions(robust_scale_log=RUN_SPREAD_LOG)) < 0.10


def test_table_weights_share_the_same_total() -> None:
    one, two = _sample(ONE_NODE), _sample(TWO_NODES)
    short = replace(two, sizes_bytes=two.sizes_bytes[:6], measured_s=two.measured_s[:6])
    samples = [one, two, short]
    sizes = np.array([len(s.sizes_bytes) for s in samples], float)
    for how, expected in (("sizes", sizes), ("table", np.full(3, sizes.sum() / 3))):
        total = np.array(table_shares(samples, how)) ** 2 * sizes  # each table's squared weight
        assert np.allclose(total, expected) and np.isclose(total.sum(), sizes.sum())
    # `file`: the two tables of one file share one file's weight
    total = np.array(table_shares(samples, "file")) ** 2 * sizes
    assert np.isclose(total[0], sizes.sum() / 2) and np.isclose(total[1] + total[2], sizes.sum() / 2)
    with pytest.raises(ValueError, match="unknown table weight"):
        table_shares(samples, "loudest")


def test_shrinkage_counts_each_file_as_one_run() -> None:
    one, two = _sample(ONE_NODE), _sample(TWO_NODES)
    short = replace(two, sizes_bytes=two.sizes_bytes[:6], measured_s=two.measured_s[:6])
    assert run_factors([one, two, short], None) == [1.0, 1.0, 1.0]
    factors = run_factors([one, two, short], RUN_SPREAD_LOG)

    # the mean of a run's n log residuals: variance IN_RUN^2 / n + RUN^2, so the run's
    # residuals (n of them) are scaled by 1 / sqrt(IN_RUN^2 + n RUN^2); one file, one factor
    def factor(n: int) -> float:
        return float(1 / np.sqrt(IN_RUN_SPREAD_LOG**2 + n * RUN_SPREAD_LOG**2))

    assert factors[1] == factors[2] == pytest.approx(factor(len(two.sizes_bytes) + 6), rel=1e-12)
    assert factors[0] == pytest.approx(factor(len(one.sizes_bytes)), rel=1e-12)


MI355X = ROOT / "topologies" / "mi355x-pollara-2n.yaml"
ALL_TO_ALL = "mi355x-16gpu-2node-alltoall-rccl-pollara400-vultr.txt"


def test_a_point_to_point_latency_is_fitted_on_the_sizes_below_one_mib() -> None:
    table = read_benchmark(SAMPLES / ALL_TO_ALL)[0]
    cluster = resized_cluster(MI355X, 2)
    s = make_sample(table, cluster)
    assert s.fabric_s is not None and (s.fabric_s > 0).all()
    # runs 40 us slower than the fabric below 1 MiB and 2x slower from 1 MiB (a bandwidth
    # miss, which a latency must not absorb)
    big = s.sizes_bytes >= 2**20
    synthetic = replace(s, measured_s=np.where(big, 2 * s.fabric_s, s.fabric_s + 40e-6))
    # 40 us less the prior's pull toward 0 (PRIOR_WEIGHT 0.1 at 20 us: a few tenths of a us)
    assert fit_all_to_all_latency([synthetic], 0.0) == pytest.approx(40.0, abs=0.5)
    assert fit_all_to_all_latency([replace(synthetic, fabric_s=None)], 0.0) is None  # not point-to-point
    # the engine runs the fitted latency in place of the path latency: replayed, the table's
    # small sizes take latency + fabric time
    block = CollectiveParamsFit(topology=MI355X.name, values={"all_to_all_latency_us": 40.0})
    profile = CalibrationProfile(name="p", collective_params=block)
    res = replay(table, profile, cluster=cluster, half="out_of_place", tuning=ProfileTuning([("p", profile)]))
    assert np.allclose(res["simulated_s"].to_numpy(), s.fabric_s + 40e-6, rtol=1e-9, atol=1e-12)


def test_one_server_topologies_are_used_as_they_are(tmp_path, app) -> None:
    """nvswitch_node and xgmi_mesh count no servers: a one-node table runs on them as they
    are; a two-node table is refused at the topology's generator line, and nothing is written."""
    from typer.testing import CliRunner

    from simulator.calibration.joint import check_fits

    one = read_benchmark(SAMPLES / "mi300x-8gpu-1node-allreduce-rccl.txt")[0]
    two = read_benchmark(SAMPLES / "mi355x-16gpu-2node-allreduce-rccl-pollara400-aac14.txt")[0]
    for name in ("mi300x-xgmi-node.yaml", "h100-dgx-node.yaml"):
        topology = ROOT / "topologies" / name
        cluster = resized_cluster(topology, 1)
        assert len(cluster.gpus) == 8 and cluster.topo.facts(list(cluster.gpus)).n_nodes == 1
        check_fits(one, cluster, topology)
        with pytest.raises(InputError) as exc:
            check_fits(two, resized_cluster(topology, 2), topology)
        assert str(exc.value) == (
            f"{topology}:4: generator: mi355x-16gpu-2node-allreduce-rccl-pollara400-aac14.txt ran on 16 "
            "GPUs / 2 node(s), which this topology does not hold (8 GPUs); give the topology of the "
            "system the logs ran on"
        )
    # the key is named wherever it stands, its first line included
    first = tmp_path / "generator-first.yaml"
    text = (ROOT / "topologies" / "h100-dgx-node.yaml").read_text()
    gen = next(ln for ln in text.splitlines() if ln.startswith("generator:"))
    body = [ln for ln in text.splitlines() if ln != gen and not ln.startswith("#")]
    first.write_text("\n".join([gen, *body]).replace("gpus/", str(ROOT / "topologies" / "gpus") + "/") + "\n")
    with pytest.raises(InputError) as exc:
        check_fits(two, resized_cluster(first, 2), first)
    assert str(exc.value).startswith(f"{first}:1: generator: ")
    # a generator that counts servers is still resized
    cluster = resized_cluster(P5, 4)
    assert cluster.topo.facts(list(cluster.gpus)).n_nodes == 4
    out = tmp_path / "mi300x.yaml"
    topology = ROOT / "topologies" / "mi300x-xgmi-node.yaml"
    log = SAMPLES / "mi300x-8gpu-1node-allreduce-rccl.txt"
    r = CliRunner().invoke(app, ["calibrate", str(log), "--topology", str(topology), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert "collective_params (joint fit on mi300x-xgmi-node.yaml)" in " ".join(r.output.split())
    assert "scale_up_efficiency" in out.read_text()
    bad = tmp_path / "bad.yaml"
    r = CliRunner().invoke(
        app, ["calibrate", str(log), str(SAMPLES / two.source), "--topology", str(topology), "-o", str(bad)]
    )
    assert r.exit_code == 2 and not bad.exists()
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {topology}:4: generator: "), r.output


@pytest.mark.slow  # ~2 s of fits (the default suite stays under 3 CPU minutes)
def test_a_log_of_another_gpu_fitted_on_a_topology_is_warned(tmp_path, app) -> None:
    """An MI300X log fitted on an H100 topology: the profile records the topology's GPU as
    the one fitted on, so a later H100 run would not warn; the fit says so, naming the table
    and both GPUs (it said nothing). A log of the topology's own model is not warned."""
    from typer.testing import CliRunner

    out = tmp_path / "p.yaml"
    log = SAMPLES / "mi300x-8gpu-1node-allreduce-rccl.txt"
    r = CliRunner().invoke(app, ["calibrate", str(log), "--topology", str(P5), "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert (
        "warning: mi300x-8gpu-1node-allreduce-rccl.txt: measured on AMD Instinct MI300X (its '# Rank' "
        "lines), but the GPU of h100-p5-efa-2n.yaml is H100 SXM5 80GB: collective_params are fitted as "
        "if it ran there (and record that GPU); give the topology of the system the logs ran on"
    ) in " ".join(r.output.split())
    same = SAMPLES / "h100-8gpu-1node-allreduce-dgx-nvidia-dgxc.txt"
    r = CliRunner().invoke(
        app, ["calibrate", str(same), "--topology", str(P5), "-o", str(tmp_path / "q.yaml")]
    )
    assert r.exit_code == 0 and "measured on" not in r.output, r.output
