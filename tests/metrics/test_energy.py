"""Power and energy from the simulated timeline; cost per token of a run."""

from __future__ import annotations

import pandas as pd
import pytest

from simulator.metrics.energy import PowerInputs, integrate, power_timeline, step_energy
from simulator.metrics.run_cost import J_PER_KWH, SECONDS_PER_YEAR, cost_columns
from simulator.network.prices import load_prices
from simulator.scenario.execute import execute
from simulator.scenario.prepare import prepare
from tests.conftest import ROOT

PRICES = load_prices()
TDP_W = 700.0
PEAK = 1e15


def _inputs(**kw: float) -> PowerInputs:
    base = dict(
        tdp_w=TDP_W,
        peak_flops_per_s=PEAK,
        job_gpus=2,
        idle_gpus=0,
        host_w=800.0,
        network_w=100.0,
        storage_w=0.0,
    )
    return PowerInputs(**{**base, **kw})  # type: ignore[arg-type]


def _ops(rows: list[tuple]) -> pd.DataFrame:
    df = pd.DataFrame(rows, columns=["step", "rank", "kind", "tag", "started_at_s", "finished_at_s", "flops"])
    df["duration_s"] = df["finished_at_s"] - df["started_at_s"]
    return df


def _steps(t1: float, compute: float, comm: float, exposed: float) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "step": 0,
                "rank": 0,
                "started_at_s": 0.0,
                "finished_at_s": t1,
                "step_time_s": t1,
                "compute_s": compute,
                "comm_s": comm,
                "exposed_comm_s": exposed,
                "idle_s": t1 - compute - exposed,
                "weight": 2,
            }
        ]
    )


def test_hand_computed_step_energy() -> None:
    """One rank standing for 2 GPUs: compute 0-1 s at half of peak, a collective 0.5-1.5 s,
    step 0-2 s. GPU: 1 s at TDP x curve(0.5), 0.5 s communicating, 0.5 s idle; network:
    static x 2 s + dynamic x 1 s of communication (both GPUs)."""
    ops = _ops([(0, 0, "compute", "fwd", 0.0, 1.0, 0.5 * PEAK), (0, 0, "collective", "dp", 0.5, 1.5, 0.0)])
    steps = _steps(2.0, compute=1.0, comm=1.0, exposed=0.5)
    pw = PRICES.power
    # curve points [0.3, 0.75] .. [0.6, 1.0]: linear interpolation at 0.5
    curve = 0.75 + (1.0 - 0.75) * (0.5 - 0.3) / (0.6 - 0.3)
    gpu_j = 2 * TDP_W * (1.0 * curve + 0.5 * pw.gpu_comm_fraction.value + 0.5 * pw.gpu_idle_fraction.value)
    s = pw.network_static_fraction.value
    net_j = 100.0 * s * 2.0 + 100.0 * (1 - s) * 1.0
    e = step_energy(ops, steps, _inputs(), PRICES).iloc[0]
    assert e["gpu_j"] == pytest.approx(gpu_j, rel=1e-12)
    assert e["network_j"] == pytest.approx(net_j, rel=1e-12)
    assert e["it_j"] == pytest.approx(gpu_j + net_j + 800.0 * 2.0, rel=1e-12)
    assert e["facility_j"] == pytest.approx(e["it_j"] * PRICES.facility.pue.value, rel=1e-12)
    tl = power_timeline(ops, steps, _inputs(), PRICES)
    assert list(tl["start_s"]) == [0.0, 0.5, 1.0, 1.5]
    assert tl["gpu_w"].iloc[0] == pytest.approx(2 * TDP_W * curve)
    assert tl["gpu_w"].iloc[2] == pytest.approx(2 * TDP_W * pw.gpu_comm_fraction.value)
    assert integrate(tl) == pytest.approx(e["facility_j"], rel=1e-12)


@pytest.mark.parametrize("draw", ["at_once", "by_rank"])
def test_an_op_of_no_time_beside_a_running_one_leaves_the_timeline_equal_to_the_breakdown(
    draw: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A compute op of zero length (a fused memory op) that starts as a long op starts, and
    comes after it in the frame, used to be taken as the GPU's current op: the timeline then
    priced the long op's second at the idle draw (0.06 % of a Llama 3 8B step's energy)."""
    from simulator.metrics import energy

    if draw == "by_rank":  # the path taken for steps of many segments
        monkeypatch.setattr(energy, "_SEGMENTS_AT_ONCE", 0)
    ops = _ops([(0, 0, "compute", "fwd", 0.0, 1.0, 0.5 * PEAK), (0, 0, "compute", "mem", 0.0, 0.0, 0.0)])
    steps = _steps(2.0, compute=1.0, comm=0.0, exposed=0.0)
    e = step_energy(ops, steps, _inputs(), PRICES).iloc[0]
    tl = power_timeline(ops, steps, _inputs(), PRICES)
    assert tl["gpu_w"].iloc[0] > tl["gpu_w"].iloc[1]  # computing, then idle
    assert integrate(tl) == pytest.approx(e["facility_j"], rel=1e-12)


def test_power_cap_limits_draw() -> None:
    ops = _ops([(0, 0, "compute", "fwd", 0.0, 1.0, 1.0 * PEAK)])
    steps = _steps(1.0, compute=1.0, comm=0.0, exposed=0.0)
    full = step_energy(ops, steps, _inputs(), PRICES).iloc[0]["gpu_j"]
    capped = step_energy(ops, steps, _inputs(power_cap_fraction=0.7), PRICES).iloc[0]["gpu_j"]
    assert full == pytest.approx(2 * TDP_W) and capped == pytest.approx(2 * TDP_W * 0.7)
    assert PRICES.power.power_cap_curve(0.7) < 1.0  # the compute rate a cap of 70% of TDP keeps


@pytest.fixture(scope="module")
def quickstart():
    """The quickstart scenario (DP-16 GPT-1.3B trace, 2 H100 servers, 3 steps, no failures)."""
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    return prep, execute(prep)


def test_energy_per_step_is_the_integral_of_the_power_timeline(quickstart) -> None:
    prep, result = quickstart
    s = result.summary
    assert s["steps"] == 3
    # the summary's energy comes from the breakdown path; the timeline is integrated separately
    assert s["timeline_energy_j"] == pytest.approx(s["energy_run_j"], rel=1e-9)
    ops, steps = result.frames["ops"], result.frames["steps"]
    from simulator.metrics.run_cost import power_inputs
    from simulator.network.cost import estimate_cost

    p = power_inputs(
        estimate_cost(prep.topology.graph, PRICES, "cluster", prep.topology.gpu), prep.topology.gpu, s
    )
    tl = power_timeline(ops, steps, p, PRICES)
    per_step = step_energy(ops, steps, p, PRICES).set_index("step")["facility_j"]
    for step, seg in tl.groupby("step"):
        assert integrate(seg) == pytest.approx(per_step[step], rel=1e-9)
    # a run without failures: its energy is steps x energy per step
    assert s["energy_run_j"] == pytest.approx(s["steps"] * s["energy_per_step_j"], rel=1e-9)
    # and the integral over the whole run covers exactly the simulated time
    assert float((tl["end_s"] - tl["start_s"]).sum()) == pytest.approx(s["simulated_time_s"], rel=1e-9)
    assert integrate(tl) == pytest.approx(s["steps"] * s["energy_per_step_j"], rel=1e-9)


def test_cost_per_token_follows_its_formula(quickstart) -> None:
    _, result = quickstart
    s = result.summary
    fac = PRICES.facility
    capex_per_s = s["capex_usd"] * s["job_share"] / (fac.amortization_years.value * SECONDS_PER_YEAR)
    tokens_per_step = 131072  # the trace's meta: 16 GPUs x 8,192 tokens
    assert s["tokens_per_s"] * s["step_time_s"] == pytest.approx(tokens_per_step)
    energy_usd = s["energy_per_step_j"] / J_PER_KWH * fac.electricity_usd_per_kwh.value
    assert s["usd_per_step"] == pytest.approx(capex_per_s * s["step_time_s"] + energy_usd, rel=1e-9)
    assert s["usd_per_mtoken"] == pytest.approx(s["usd_per_step"] / tokens_per_step * 1e6, rel=1e-9)
    assert s["energy_per_token_j"] == pytest.approx(s["energy_per_step_j"] / tokens_per_step, rel=1e-9)
    parts = sum(s[f"capex_{p}_usd"] for p in ("gpus", "servers", "switches", "nics", "cables"))
    assert s["capex_usd"] == pytest.approx(parts)


def test_unpriced_gpu_leaves_a_note_not_an_error(quickstart) -> None:
    prep, result = quickstart
    gpu = prep.topology.gpu.model_copy(update={"name": "Unlisted GPU"})
    out = cost_columns(result.frames, result.summary, prep.topology.graph, gpu, PRICES)
    assert out == {"cost_note": "GPU 'Unlisted GPU' has no price in the price table; cost columns left out"}


def test_power_cap_what_if_slows_compute_along_the_curve() -> None:
    """Quickstart with every GPU capped at 50% of TDP: compute-bound ops take
    1 / power_cap_curve(0.5) as long, GPU draw never exceeds the cap, cost columns follow."""
    prep = prepare(ROOT / "scenarios" / "quickstart.yaml")
    base = execute(prep)
    sc = prep.scenario.spec
    prep.scenario.spec = sc.model_copy(
        update={"compute": sc.compute.model_copy(update={"power_cap_fraction": 0.5})}
    )
    capped = execute(prep)
    rate = PRICES.power.power_cap_curve(0.5)
    fwd = [r.frames["ops"].query("op_id.str.startswith('fwd')", engine="python") for r in (base, capped)]
    # the forward op of the trace is compute bound (2.13e13 FLOPs against 4e10 bytes)
    assert fwd[1]["duration_s"].iloc[0] == pytest.approx(fwd[0]["duration_s"].iloc[0] / rate, rel=1e-9)
    assert capped.summary["step_time_s"] > base.summary["step_time_s"]
    assert capped.summary["power_cap_compute_rate"] == pytest.approx(rate)
    mean_gpu_w = capped.summary["mean_facility_power_w"] / PRICES.facility.pue.value
    assert mean_gpu_w < base.summary["mean_facility_power_w"] / PRICES.facility.pue.value


def test_run_level_power_swings_by_hand() -> None:
    """Compute at 100 kW IT on all 16 GPUs, a checkpoint (idle 40 kW + 5 kW of storage
    writing), a restart (idle), compute on 8 of 16 GPUs (40 + 60 x 1/2 = 70 kW)."""
    from simulator.metrics.run_power import run_power_frame, run_power_summary

    seg = pd.DataFrame(
        {
            "start_s": [0.0, 100.0, 110.0, 130.0],
            "end_s": [100.0, 110.0, 130.0, 230.0],
            "phase": ["compute", "checkpoint", "restart", "compute"],
            "gpus_in_use": [16, 16, 16, 8],
        }
    )
    summary = {
        "gpus_in_job": 16,
        "it_power_computing_w": 100e3,
        "it_power_idle_w": 40e3,
        "storage_checkpoint_extra_w": 5e3,
    }
    pue = PRICES.facility.pue.value
    power = run_power_frame(seg, summary, PRICES)
    assert list(power["facility_w"]) == pytest.approx([100e3 * pue, 45e3 * pue, 40e3 * pue, 70e3 * pue])
    s = run_power_summary(power, PRICES)
    assert s["run_power_swing_w"] == pytest.approx(55e3 * pue)  # compute -> checkpoint
    assert s["run_power_swing_w_per_s"] == pytest.approx(55e3 * pue / PRICES.power.gpu_power_ramp_s.value)
    energy = (100 * 100e3 + 10 * 45e3 + 20 * 40e3 + 100 * 70e3) * pue
    assert s["run_energy_j"] == pytest.approx(energy) and s["run_facility_mean_w"] == pytest.approx(
        energy / 230
    )
