"""Spine and core tiers above a row of leaf switches, as the Clos-like designs build them.

What is modelled: leaves get u = ceil(max_down / oversubscription) uplinks. When every
leaf can reach every spine (leaves <= radix) the fabric has two tiers: the leaves' uplinks
are spread round-robin over ceil(leaves * u / radix) spines. Otherwise it has three, built
like a k-ary fat-tree: pods of radix/2 leaves, each pod with u spines of radix/2 down and
radix/2 up ports, and core group j joining spine j of every pod.

What is simplified: every tier's links have the speed of the leaves' uplinks; parallel
cables between two switches are one edge; a switch's port count is the ports it uses.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from simulator.errors import InputError
from simulator.network.design.parts import GraphParts, add_switch


@dataclass(frozen=True, slots=True)
class ClosTiers:
    """What `clos_above_leaves` built.

    Attributes:
        uplinks_per_leaf: uplinks of every leaf.
        cores: core switches (empty with two tiers or one leaf).
        top: the highest tier's switches (the leaf itself when there is only one).
        tier_up_bytes_per_s: capacity of each tier's uplinks, leaves first, bytes/s.
    """

    uplinks_per_leaf: int
    cores: list[str]
    top: list[str]
    tier_up_bytes_per_s: list[float]


@dataclass(frozen=True, slots=True)
class _Cable:
    """Speed, latency and medium of every link above the leaves."""

    bandwidth_bytes_per_s: float
    latency_s: float
    medium: str


def round_robin(
    sources: list[str], ports_each: int, targets: list[str], offset_step: int | None = None
) -> dict[tuple[str, str], int]:
    """Spread `ports_each` uplinks of every source over `targets`; count cables per pair.

    Port p of source s goes to target (s * step + p) mod len(targets), step being
    `ports_each` unless `offset_step` is given; with the default step the targets' port
    counts stay within one of each other.
    """
    counts: dict[tuple[str, str], int] = {}
    n = len(targets)
    step = ports_each if offset_step is None else offset_step
    for si, s in enumerate(sources):
        for p in range(ports_each):
            t = targets[(si * step + p) % n]
            counts[(s, t)] = counts.get((s, t), 0) + 1
    return counts


def clos_above_leaves(
    parts: GraphParts,
    leaves: list[tuple[str, int]],
    radix: int,
    oversubscription: float,
    link_bytes_per_s: float,
    latency_s: float,
    medium: str,
    prefix: str = "",
    extra: dict[str, Any] | None = None,
    min_tiers: int = 2,
) -> ClosTiers:
    """Build spines (and cores if needed) above `leaves` = [(name, down ports)].

    Args:
        parts: the graph under construction; the leaves are already in it.
        leaves: every leaf switch with its count of down ports.
        radix: ports per switch.
        oversubscription: leaf down:up bandwidth ratio.
        link_bytes_per_s: bandwidth of one uplink cable, per direction.
        latency_s: one-way latency of one uplink hop.
        medium: medium of the uplinks.
        prefix: prefix of the spine and core names (one fabric per plane).
        extra: further attributes of every spine and core switch.
        min_tiers: 3 builds cores even when every leaf could reach every spine.

    Raises:
        InputError: the leaves or the pods need more ports than `radix` (field `switch_radix`).
    """
    extra = extra or {}
    max_down = max(d for _, d in leaves)
    up = math.ceil(max_down / oversubscription)
    if max_down + up > radix:
        raise InputError(
            f"a leaf needs {max_down} down + {up} up ports but switch_radix is {radix}",
            field="switch_radix",
        )
    names = [n for n, _ in leaves]
    cable = _Cable(link_bytes_per_s, latency_s, medium)
    if len(names) == 1:
        # a single leaf switches everything itself; no spine needed
        return ClosTiers(up, cores=[], top=names, tier_up_bytes_per_s=[])
    if len(names) <= radix and min_tiers < 3:
        return _two_tiers(parts, names, up, radix, cable, prefix, extra)
    return _three_tiers(parts, names, up, radix, cable, prefix, extra)


def _two_tiers(
    parts: GraphParts,
    leaves: list[str],
    up: int,
    radix: int,
    cable: _Cable,
    prefix: str,
    extra: dict[str, Any],
) -> ClosTiers:
    """Spines joined to every leaf, the leaves' uplinks spread round-robin over them."""
    n_spines = math.ceil(len(leaves) * up / radix)
    spines = [f"{prefix}spine{k}" for k in range(n_spines)]
    counts = round_robin(leaves, up, spines)
    load: dict[str, int] = {}
    for (_, s), c in counts.items():
        load[s] = load.get(s, 0) + c
    for s in spines:
        add_switch(parts, s, 2, "spine", load.get(s, 0), **extra)
    for (lf, s), c in counts.items():
        parts.link(
            lf, s, c * cable.bandwidth_bytes_per_s, cable.latency_s, cable.medium, links=c, reach="optics"
        )
    return ClosTiers(
        up, cores=[], top=spines, tier_up_bytes_per_s=[len(leaves) * up * cable.bandwidth_bytes_per_s]
    )


def _three_tiers(
    parts: GraphParts,
    leaves: list[str],
    up: int,
    radix: int,
    cable: _Cable,
    prefix: str,
    extra: dict[str, Any],
) -> ClosTiers:
    """Pods of radix/2 leaves with `up` spines each; core group j joins spine j of every pod."""
    half = radix // 2
    n_pods = math.ceil(len(leaves) / half)
    if n_pods > radix:
        raise InputError(
            f"{len(leaves)} leaves need {n_pods} pods but a {radix}-port core reaches at most "
            f"{radix}; use larger switches",
            field="switch_radix",
        )
    per_group = math.ceil(n_pods * half / radix)
    cores = [f"{prefix}core{j * per_group + c}" for j in range(up) for c in range(per_group)]
    core_load: dict[str, int] = {}
    spine_up_total = 0
    bw, lat, medium = cable.bandwidth_bytes_per_s, cable.latency_s, cable.medium
    for pod in range(n_pods):
        pod_leaves = leaves[pod * half : (pod + 1) * half]
        pod_spines = [f"{prefix}spine{pod * up + j}" for j in range(up)]
        for j, s in enumerate(pod_spines):
            add_switch(parts, s, 2, "spine", 2 * len(pod_leaves), pod=pod, **extra)
            for lf in pod_leaves:
                parts.link(lf, s, bw, lat, medium, reach="optics")
            group = cores[j * per_group : (j + 1) * per_group]
            for (sp, core), cnt in round_robin([s], len(pod_leaves), group, 0).items():
                parts.link(sp, core, cnt * bw, lat, medium, links=cnt, reach="optics")
                core_load[core] = core_load.get(core, 0) + cnt
                spine_up_total += cnt
    for core in cores:
        add_switch(parts, core, 3, "core", core_load.get(core, 0), **extra)
    return ClosTiers(
        up, cores=cores, top=cores, tier_up_bytes_per_s=[len(leaves) * up * bw, spine_up_total * bw]
    )
