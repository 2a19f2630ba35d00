"""Using calibration profiles in a run: the engine's `CollectiveTuning` and compute model.

For a collective of kind k over n ranks on N nodes with size S, the first profile (in the
scenario's order) with a matching entry gives the fitted time
`t(S) = (alpha + S·f/B) / e(S)` (see `CollectiveFit`). The engine keeps its own flows (so
contention stays real) and rescales them:

* the collective's latency becomes `alpha / e(S)`;
* its bandwidth becomes `B·e(S)`: flows carry `S_flow · model_busbw / (B·e(S))` bytes, where
  `model_busbw` is what the uncalibrated flows reach alone on this topology.

Alone on the fabric the calibrated collective therefore takes exactly the fitted time,
unless a clamp applies. An efficiency above 1 means the real library moves less data than
the modeled algorithm (e.g. in-switch reduction); it is allowed up to `MAX_EFFICIENCY` (4x)
and clamped above that, and below `MIN_EFFICIENCY` (1/1000, the engine's floor) likewise.
A profile with a `collective_params:` block (fitted physical parameters, see
`simulator.calibration.joint`) passes them to the engine (`fitted_collective_params`, into
`StepSettings.collective_params`); its curve entries then apply only where they were
measured (same kind, GPU and node count), and the physical parameters everywhere else, except
for a collective the scenario fixes to an algorithm without a protocol: that one runs the
textbook model (path latencies, full link rate), which has no such parameter, so it is
warned about and not listed as priced by them.
Every clamp, every collective no profile can speak for (no entry of its kind and scope),
every collective a profile speaks for beyond what it measured (predicted across GPU or node
counts, or beyond the largest measured size), and every curve entry applied to another GPU
model than its table ran on (`CollectiveEntry.gpu`, from the log's `# Rank` lines; a log
that does not name its GPU is not compared), is kept in `ProfileTuning.warnings`: one
sentence each, naming the profile entry and why, which the run's `summary.json` lists under
`calibration_warnings` and `clustersim run` prints.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from simulator.calibration.compute import ComputeCalibration
from simulator.calibration.profile import CalibrationProfile, CollectiveFit, load_profile
from simulator.network.cluster import Cluster
from simulator.network.collective_params import CollectiveParams, default_params, with_fitted
from simulator.network.hardware import other_model

MAX_EFFICIENCY = 4.0
MIN_EFFICIENCY = 1e-3


def _scope_text(n_ranks: int, n_nodes: int) -> str:
    return f"{n_ranks} ranks on {n_nodes} node(s)"


class ProfileTuning:
    """`CollectiveTuning` backed by one or more calibration profiles.

    Attributes:
        profiles: (name, profile) in the scenario's order.
        clamps: per (kind, ranks, nodes, profile source): [calls clamped, lowest raw
            efficiency, highest raw efficiency].
        unmatched: per (kind, ranks, nodes): why no profile speaks for it.
        stretched: per (kind, ranks, nodes): the entry used where it was not measured (another
            GPU or node count, or sizes beyond the largest measured), as its source says.
    """

    def __init__(self, profiles: list[tuple[str, CalibrationProfile]]) -> None:
        self.profiles = profiles
        self.clamps: dict[tuple[str, int, int, str], list[float]] = {}
        self.unmatched: dict[tuple[str, int, int], str] = {}
        self.stretched: dict[tuple[str, int, int], str] = {}
        #: collective kind -> the profile whose fitted physical parameters priced it
        self.by_params: dict[str, str] = {}
        #: profiles whose parameters were fitted on another GPU than the run's: name -> (theirs,
        #: the run's); once each, however many step simulations ask for the parameters
        self.other_gpu: dict[str, tuple[str, str]] = {}
        #: collective kind -> the profile whose fitted physical parameters would have priced
        #: it, had it not run the textbook model (a fixed algorithm without a protocol)
        self.textbook: dict[str, str] = {}
        #: profiles whose fitted physical parameters priced some collective of the run
        #: (their fields clamped at a bound are warned only then)
        self.params_used: set[str] = set()
        #: the compute calibration the run uses (`tuning_from_profiles`), and what the run's
        #: GPU makes of it (`ComputeCalibration.notes_for`, set with `run_gpu`)
        self.compute: ComputeCalibration | None = None
        self.compute_notes: list[str] = []
        #: the run's GPU (`fitted_collective_params` sets it), and per (kind, ranks, nodes)
        #: the curve entry used whose table ran on another GPU model: (its source, its GPU)
        self.run_gpu: str | None = None
        self.entry_other_gpu: dict[tuple[str, int, int], tuple[str, str]] = {}

    def tune(
        self,
        kind: str,
        n_ranks: int,
        n_nodes: int,
        size_bytes: float,
        model_busbw_bytes_per_s: float,
        *,
        modelled: bool = True,
    ) -> tuple[float | None, float, str] | None:
        for name, profile in self.profiles:
            fit = profile.collective(kind, n_ranks, n_nodes, size_bytes)
            if profile.collective_params is not None and (fit is None or fit.predicted):
                # the fitted physical parameters speak where no table was measured, unless the
                # collective runs the textbook model, which has none of them
                if modelled:
                    self.by_params.setdefault(
                        kind, f"{name}: fitted collective parameters (collective_params)"
                    )
                    self.params_used.add(name)
                else:
                    self.textbook.setdefault(kind, name)
                return None
            if fit is None:
                continue
            e = float(np.asarray(fit.curve(size_bytes)).reshape(-1)[0]) if size_bytes > 0 else 1.0
            latency = fit.alpha_s / e
            eff = fit.peak_busbw_bytes_per_s * e / model_busbw_bytes_per_s
            if fit.predicted or "extrapolated beyond" in fit.source:
                self.stretched.setdefault((kind, n_ranks, n_nodes), f"{name}: {fit.source}")
            if other_model(fit.gpu, self.run_gpu) and fit.gpu is not None:
                self.entry_other_gpu.setdefault((kind, n_ranks, n_nodes), (f"{name}: {fit.source}", fit.gpu))
            return latency, self._clamp(eff, kind, n_ranks, n_nodes, name, fit), f"{name}: {fit.source}"
        if n_ranks > 1:
            self.unmatched[(kind, n_ranks, n_nodes)] = self._why_unmatched(kind, n_ranks, n_nodes)
        return None

    def _clamp(
        self, eff: float, kind: str, n_ranks: int, n_nodes: int, name: str, fit: CollectiveFit
    ) -> float:
        clamped = min(max(eff, MIN_EFFICIENCY), MAX_EFFICIENCY)
        if clamped != eff:
            key = (kind, n_ranks, n_nodes, f"{name}: {fit.source}")
            rec = self.clamps.setdefault(key, [0.0, eff, eff])
            rec[0] += 1
            rec[1], rec[2] = min(rec[1], eff), max(rec[2], eff)
        return clamped

    def _why_unmatched(self, kind: str, n_ranks: int, n_nodes: int) -> str:
        scope = "intra" if n_nodes == 1 else "inter"
        parts = []
        for name, profile in self.profiles:
            same_kind = profile.entries(kind)
            if not same_kind:
                parts.append(f"{name} has no {kind} entry")
            else:
                others = ", ".join(e.describe() for e in same_kind)
                parts.append(f"{name}'s {kind} entries ({others}) are all {same_kind[0].scope}-node, "
                             f"not {scope}-node")  # fmt: skip
        return (
            f"no calibration for {kind} on {_scope_text(n_ranks, n_nodes)}: "
            + "; ".join(parts)
            + "; the uncalibrated model is used"
        )

    @property
    def warnings(self) -> list[str]:
        """Every clamp applied and every collective left uncalibrated, one sentence each, sorted."""
        out = [why for _, why in sorted(self.unmatched.items())]
        out += [
            f"{name}: collective_params were fitted on {theirs} tables; this run's GPU is {mine}, "
            "and they are applied to it as they are"
            for name, (theirs, mine) in sorted(self.other_gpu.items())
            if name in self.params_used  # said only where they priced something
        ]
        out += [
            f"{kind} runs the textbook model (path latencies, full link rate): its algorithm is fixed "
            "without a protocol, or is not one NCCL's tuning model prices; no collective_params field "
            f"prices it, so {name}'s collective_params do not apply to it; name one of NCCL's "
            "algorithms with its protocol (e.g. `ring/simple`) or leave the algorithm `auto`"
            for kind, name in sorted(self.textbook.items())
        ]
        out += [
            f"{name}: collective_params {k} ended on its physical bound {b:g} when fitted (clamped)"
            for name, profile in self.profiles
            if profile.collective_params is not None and name in self.params_used
            for k, b in sorted(profile.collective_params.at_bounds.items())
        ]
        out += [
            f"{kind} on {_scope_text(n, nodes)}: priced by {source}, whose table ran on {theirs}; this "
            f"run's GPU is {self.run_gpu}, another model, and the entry is applied to it as it is"
            for (kind, n, nodes), (source, theirs) in sorted(self.entry_other_gpu.items())
        ]
        out += self.compute_notes
        out += [
            f"{kind} on {_scope_text(n, nodes)}: beyond what the profile measured; using {source}"
            for (kind, n, nodes), source in sorted(self.stretched.items())
        ]
        for (kind, n_ranks, n_nodes, source), (calls, lo, hi) in sorted(self.clamps.items()):
            if hi > MAX_EFFICIENCY:
                what, effect = f"{hi:.3g}x capped at {MAX_EFFICIENCY:g}x", "slower"
            else:
                what, effect = f"{lo:.3g}x raised to {MIN_EFFICIENCY:g}x", "faster"
            out.append(
                f"{kind} on {_scope_text(n_ranks, n_nodes)}: calibrated bandwidth efficiency {what} "
                f"({int(calls)} size(s); profile entry {source}); the run is {effect} than the "
                "profile predicts there"
            )
        return out


def fitted_collective_params(tuning: object, cluster: Cluster) -> CollectiveParams | None:
    """The collective model's parameters for `cluster` under the first profile of `tuning`
    with a `collective_params:` block (None: no such profile; the library's defaults)."""
    if not isinstance(tuning, ProfileTuning):
        return None
    tuning.run_gpu = cluster.gpu.name  # curve entries measured on another GPU model are warned
    if tuning.compute is not None:
        tuning.compute_notes = tuning.compute.notes_for(cluster.gpu)
    for name, profile in tuning.profiles:
        if profile.collective_params is not None:
            theirs = profile.collective_params.gpu
            if theirs is not None and theirs != cluster.gpu.name:  # both GPU files' names
                tuning.other_gpu[name] = (theirs, cluster.gpu.name)
            base = default_params(cluster.gpu.name, cluster.topo.nic)
            return with_fitted(base, profile.collective_params.values)
    return None


def tuning_from_profiles(paths: list[Path]) -> tuple[ProfileTuning, ComputeCalibration | None, list[str]]:
    """Load profiles; the first one with a `compute:` block calibrates compute."""
    profiles = [(Path(p).stem, load_profile(p)) for p in paths]
    compute = next((p.compute for _, p in profiles if p.compute is not None), None)
    tuning = ProfileTuning(profiles)
    tuning.compute = compute
    return tuning, compute, [str(p) for p in paths]
