"""Topology builders: one spec and one graph builder per generator, found through `registry`.

Every builder returns an undirected `networkx.Graph` following `simulator.network.graph`:
GPUs `n{i}.gpu{j}`, NICs `n{i}.nic{j}` (with `node`, `local_rank`, `rail`), in-server
switches `n{i}.nvsw` / `n{i}.pcie{s}` (tier 0), scale-out switches at tier 1 (leaf, rail,
edge, router), tier 2 (spine, aggregation) and tier 3 (core), storage servers `stor{i}`
with NICs `stor{i}.nic{j}`. Specs keep the human units of the YAML (`*_gbps` in Gbit/s,
`*_gbyte_per_s` in GB/s, `*_latency_us` in microseconds); builders convert to SI once.

Modules: `parts` (unit factors and the pieces every design repeats), `tiers` (spines and
cores above a row of leaves), `storage` (attached storage servers), `spec` (fields the
designs share), `scale_up` (single-server fabrics and PCIe servers), `clos` (switched
designs), `direct` (torus, dragonfly) and `registry` (generator name -> spec and builder).

Modelling choices shared by the designs (all but the plain `switch`, `nvswitch_node`,
`xgmi_mesh` and `rail_clos` generators):
    * Parallel cables between the same two switches become one edge whose bandwidth is
      the sum and whose `links` attribute counts the cables (cost estimates use it).
    * Edges carry `reach` (`dac` in-rack copper, `aoc` active optical cable within a row,
      `optics` transceivers plus fibre between tiers) so the cost model can price cables.
    * An in-server switch (4 NVSwitch chips of a DGX, several PCIe switches) is drawn as
      one tier-0 switch unless the design says otherwise; its ports are not priced.
    * Every builder records `g.graph["structure"]` with the bisection bandwidth derived
      from the structure (and the formula used), which `facts.py` reports.
"""
