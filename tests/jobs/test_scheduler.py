"""The cluster scheduler on hand-worked cases: FIFO blocks, EASY backfilling fills the hole
without delaying the head, a failure costs the work since the last checkpoint, spares keep a
failed server's place, and topology-aware placement keeps a job under one leaf group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from simulator.faults.failure import FailureEvent
from simulator.jobs.placement import ClusterLayout, place_counts
from simulator.jobs.scheduler import ClusterJob, ClusterRun, ClusterSettings

H = 3600.0


def _layout(servers: int = 2, per_group: int = 2) -> ClusterLayout:
    names = [f"n{i}" for i in range(servers)]
    return ClusterLayout(
        names,
        [[f"{n}.gpu{k}" for k in range(8)] for n in names],
        np.array([i // per_group for i in range(servers)]),
        math.ceil(servers / per_group),
    )


def _jobs() -> list[ClusterJob]:
    # A holds one server for 10 h; B needs both servers; C fits beside A and ends long before A
    return [
        ClusterJob("A", 0.0, 8, 10 * H, init_s=0.0),
        ClusterJob("B", 0.1 * H, 16, 1 * H, init_s=0.0),
        ClusterJob("C", 0.2 * H, 8, 2 * H, init_s=0.0),
    ]


def _run(scheduler: str, jobs: list[ClusterJob], failures=(), **kw: float) -> ClusterRun:  # noqa: ANN001
    settings = ClusterSettings(
        scheduler=scheduler, duration_s=30 * H, detection_s=0.0, checkpoint_s=0.0, **kw
    )
    run = ClusterRun(_layout(), jobs, list(failures), settings)
    run.run()
    return run


def test_fifo_blocks_behind_the_head() -> None:
    t = _run("fifo", _jobs()).jobs_frame().set_index("job")
    assert list(t["first_start_s"] / H) == pytest.approx([0.0, 10.0, 11.0], abs=1e-12)
    assert list(t["end_s"] / H) == pytest.approx([10.0, 11.0, 13.0], abs=1e-12)
    assert t.loc["C", "queueing_delay_s"] / H == pytest.approx(10.8, abs=1e-12)


def test_backfill_starts_a_job_that_ends_before_the_heads_reservation() -> None:
    """EASY (Lifka 1995): B's reservation is at 10 h, when A ends; C (2 h, 8 GPUs) fits now and
    ends at 2.2 h < 10 h, so it starts at once and B still starts at 10 h."""
    run = _run("backfill", _jobs())
    t = run.jobs_frame().set_index("job")
    assert t.loc["C", "first_start_s"] == pytest.approx(0.2 * H, abs=1e-9)
    assert t.loc["B", "first_start_s"] == pytest.approx(10 * H, abs=1e-9)
    # busy GPU-hours 8*10 + 16*1 + 8*2 = 112 over 16 GPUs x 30 h
    assert run.utilization() == pytest.approx(112 / (16 * 30), rel=1e-12)


def test_a_failure_costs_the_work_since_the_last_checkpoint() -> None:
    """Checkpoint every 1 h (no stall); a GPU failure at 2.5 h keeps 2 h of work and loses 0.5 h;
    the job restarts at once (spare server) and needs 10 - 2 = 8 h more: it ends at 10.5 h."""
    job = ClusterJob("A", 0.0, 8, 10 * H, interval_s=1 * H, init_s=0.0)
    fail = FailureEvent(2.5 * H, 0, "gpu", "gpu", 3, 3, 1, 5 * H)
    run = _run("backfill", [job], [fail], spare_servers=1)
    row = run.jobs_frame().iloc[0]
    assert row["lost_work_s"] == pytest.approx(0.5 * H, abs=1e-9)
    assert row["restarts"] == 1
    assert row["end_s"] == pytest.approx(10.5 * H, abs=1e-9)
    assert row["goodput"] == pytest.approx(10 / 10.5, rel=1e-12)


def test_without_spares_a_job_waits_for_the_repair() -> None:
    """A 16-GPU job on both servers; a host failure at 1 h takes n0 down for 5 h: no spare, so
    the job restarts at 6 h from its 1 h checkpoint and ends at 6 + 9 = 15 h."""
    job = ClusterJob("B", 0.0, 16, 10 * H, interval_s=1 * H, init_s=0.0)
    fail = FailureEvent(1.0 * H, 0, "host", "host", 0, 0, 8, 5 * H)
    row = _run("fifo", [job], [fail]).jobs_frame().iloc[0]
    assert row["end_s"] == pytest.approx(15 * H, abs=1e-9)
    spared = _run(
        "fifo", [ClusterJob("B", 0.0, 16, 10 * H, interval_s=1 * H, init_s=0.0)], [fail], spare_servers=1
    )
    assert spared.jobs_frame().iloc[0]["end_s"] == pytest.approx(10 * H, abs=1e-9)


def test_leaf_aligned_keeps_a_job_under_one_leaf_group() -> None:
    """Four servers in two leaf groups, n0 half used: packed takes two whole free servers (n1,
    n2: across both groups), leaf_aligned the empty group (n2, n3); packed puts a remainder on
    the partly free server it fills best (4 GPUs on n0)."""
    layout = _layout(4, 2)
    free = np.array([4, 8, 8, 8])
    assert place_counts(layout, "packed", 16, free) == [(1, 8), (2, 8)]
    assert place_counts(layout, "packed", 4, free) == [(0, 4)]
    assert place_counts(layout, "packed", 12, free) == [(0, 4), (1, 8)]
    assert place_counts(layout, "packed", 6, np.array([8, 7, 6, 8])) == [(2, 6)]
    # not enough whole servers: servers in order, as far as each has free GPUs
    assert place_counts(layout, "packed", 24, np.array([4, 8, 8, 6])) == [(0, 4), (1, 8), (2, 8), (3, 4)]
    assert place_counts(layout, "leaf_aligned", 16, free) == [(2, 8), (3, 8)]
    assert place_counts(layout, "spread", 16, np.array([8, 8, 8, 8])) == [(0, 8), (2, 8)]
    assert place_counts(layout, "packed", 40, free) is None


@pytest.mark.parametrize("policy", ["packed", "leaf_aligned", "spread", "random"])
def test_every_policy_places_a_job_wherever_enough_gpus_are_free(policy: str) -> None:
    """What the scheduler relies on to place a job only when it starts it: under every
    policy `place_counts` finds GPUs exactly when the free GPUs in all are enough, and takes
    exactly the job's count from servers that have them free."""
    layout = _layout(servers=8, per_group=3)
    rng = np.random.default_rng(5)
    for _ in range(300):
        free = rng.integers(0, 9, size=8)
        n = int(rng.integers(1, 70))
        counts = place_counts(layout, policy, n, free)
        assert (counts is not None) == (n <= int(free.sum())), (free, n)
        if counts is not None:
            assert sum(k for _, k in counts) == n
            assert all(0 < k <= free[i] for i, k in counts)
            assert len({i for i, _ in counts}) == len(counts)


@pytest.mark.parametrize("policy", ["packed", "leaf_aligned", "spread", "random"])
def test_every_policy_takes_the_jobs_count_on_servers_of_mixed_sizes(policy: str) -> None:
    """Servers of 4, 4 and 8 GPUs, all free: `packed` counted whole servers at the largest
    size (16 GPUs = 2 servers) and took the first two, of 4 GPUs each: a 16-GPU job ran on 8."""
    sizes = [4, 4, 8, 2, 8, 4, 8, 8]
    names = [f"n{i}" for i in range(len(sizes))]
    layout = ClusterLayout(
        names, [[f"{n}.gpu{k}" for k in range(g)] for n, g in zip(names, sizes, strict=True)],
        np.array([i // 3 for i in range(len(sizes))]), 3,
    )  # fmt: skip
    assert place_counts(ClusterLayout(names[:3], layout.gpus[:3], np.zeros(3, int), 1), "packed", 16,
                        np.array([4, 4, 8])) == [(0, 4), (1, 4), (2, 8)]  # fmt: skip
    rng = np.random.default_rng(7)
    for _ in range(300):
        free = rng.integers(0, np.array(sizes) + 1)
        n = int(rng.integers(1, 50))
        counts = place_counts(layout, policy, n, free)
        assert (counts is not None) == (n <= int(free.sum())), (free, n)
        if counts is not None:
            assert sum(k for _, k in counts) == n, (free, n, counts)
            assert all(0 < k <= free[i] for i, k in counts)


@pytest.mark.parametrize("scheduler", ["fifo", "backfill", "topology_aware"])
def test_a_long_queue_places_only_the_jobs_it_starts(scheduler: str, monkeypatch) -> None:  # noqa: ANN001
    """A queue of 400 one-server jobs on 2 servers: each pass over the queue places the jobs
    it starts (and tries the head once), instead of placing every queued job at every event
    (400 x 400 placements: a week of a busy cluster took minutes)."""
    import simulator.jobs.scheduler as sched

    calls = []

    def counting(*args, **kw):  # noqa: ANN002, ANN003, ANN202
        calls.append(1)
        return place_counts(*args, **kw)

    monkeypatch.setattr(sched, "place_counts", counting)
    jobs = [ClusterJob(f"j{i}", i * 1.0, 8, 1 * H, init_s=0.0) for i in range(400)]
    settings = ClusterSettings(scheduler=scheduler, duration_s=300 * H, detection_s=0.0, checkpoint_s=0.0)
    run = ClusterRun(_layout(), jobs, [], settings)
    run.run()
    t = run.jobs_frame()
    assert t["end_s"].notna().all()  # 400 jobs of 1 h, two at a time: done by 200 h
    assert len(calls) <= 3 * len(jobs)


def test_a_blast_past_the_last_gpu_takes_the_first_servers_too() -> None:
    """A blast of 8 GPUs from GPU 12 of 16 takes GPUs 12-15 (n1) and, wrapping round as the
    run level does, 0-3 (n0): both servers' jobs are interrupted (only n1's was)."""
    jobs = [ClusterJob(name, 0.0, 8, 10 * H, interval_s=1 * H, init_s=0.0) for name in ("X", "Y")]
    fail = FailureEvent(1.0 * H, 0, "switch", "switch", 1, 12, 8, 1 * H)
    t = _run("fifo", jobs, [fail], spare_servers=2).jobs_frame().set_index("job")
    assert list(t["restarts"]) == [1, 1]


def test_a_software_failure_interrupts_only_the_job_that_holds_its_gpu() -> None:
    """Two 4-GPU jobs packed on n0: X holds GPUs 0-3 (started first), Y GPUs 4-7. A software
    failure (no blast) on GPU 5 interrupts Y alone and takes no server down; one on GPU 12
    (n1, idle) interrupts nobody. Both jobs used to be interrupted: the scheduler knew how
    many GPUs each job held per server, not which."""
    jobs = [
        ClusterJob(name, t, 4, 10 * H, interval_s=1 * H, init_s=0.0) for name, t in (("X", 0.0), ("Y", 1.0))
    ]
    fails = [
        FailureEvent(2.5 * H, 0, "software", "software", 5, 5, 0, 0.0),
        FailureEvent(3.5 * H, 0, "software", "software", 12, 12, 0, 0.0),
    ]
    run = _run("fifo", jobs, fails)
    t = run.jobs_frame().set_index("job")
    assert list(t["restarts"]) == [0, 1]
    assert t.loc["Y", "lost_work_s"] == pytest.approx(0.5 * H - 1.0, abs=1e-6)
    assert [i["job"] for i in run.incidents] == ["Y"]
    assert not run.down.any()
    assert (run.owner == -1).all()  # every GPU released at the end


def test_a_restarted_job_keeps_its_place_in_the_fifo_queue() -> None:
    """A (16 GPUs, submitted first) is interrupted at 2.5 h and rejoins the queue after 0.5 h
    of detection; meanwhile B and C take both servers until 3.5 h and D (submitted at 0.3 h,
    after A) waits. At 3.5 h A is the head by submit time and starts; D waits for A. (A used
    to be queued by when it rejoined, so D started first and A waited 1 h behind it.)"""
    jobs = [
        ClusterJob("A", 0.0, 16, 10 * H, interval_s=1 * H, init_s=0.0),
        ClusterJob("B", 0.1 * H, 8, 1 * H, init_s=0.0),
        ClusterJob("C", 0.2 * H, 8, 1 * H, init_s=0.0),
        ClusterJob("D", 0.3 * H, 8, 1 * H, init_s=0.0),
    ]
    fail = FailureEvent(2.5 * H, 0, "software", "software", 3, 3, 0, 0.0)
    settings = ClusterSettings(scheduler="fifo", duration_s=30 * H, detection_s=0.5 * H, checkpoint_s=0.0)
    run = ClusterRun(_layout(), jobs, [fail], settings)
    run.run()
    t = run.jobs_frame().set_index("job")
    assert t.loc["A", "restarts"] == 1
    assert t.loc["A", "end_s"] / H == pytest.approx(3.5 + 8.0, abs=1e-9)  # 2 h kept of 10
    assert t.loc["D", "first_start_s"] / H == pytest.approx(11.5, abs=1e-9)
