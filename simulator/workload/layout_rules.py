"""Rules a parallel layout must meet to run a model on a cluster (`check_layout`).

Each rule is Megatron-LM's (or the simulator's, where it says so), checked before a step
program is built; a failure is one `InputError` at the layout field it names. The layout
itself, its rank grid and its layer split are `simulator.workload.layout`.
"""

from __future__ import annotations

import logging

from simulator.workload.layout import LayoutSpec, RankGrid, _fail, stage_layer_counts
from simulator.workload.model import ModelSpec

log = logging.getLogger(__name__)


def check_layout(model: ModelSpec, layout: LayoutSpec, n_gpus: int, gpus_per_node: int) -> list[str]:
    """Check that `layout` can run `model` on `n_gpus` GPUs, `gpus_per_node` per server.

    Rules (each failure names its constraint):
        * dp·tp·pp·cp == n_gpus (ep is folded into dp, so dp % ep == 0);
        * attention_heads % tp == 0; the dense, routed-expert and shared-expert MLP
          intermediate sizes % tp == 0 (those the model has);
        * KV heads: if kv_heads >= tp, kv_heads % tp == 0; else tp % kv_heads == 0 and each
          KV head is replicated tp/kv_heads times (as Megatron does);
        * layers % (pp·virtual_stages) == 0; with first_stage_layers / last_stage_layers
          (pp >= 2) the layers left divide evenly over the other stages, at least one each,
          and with interleaving into equal chunks (`virtual_stage_layer_counts`);
        * ep > 1 needs an MoE model and experts % ep == 0;
        * cp > 1 needs seq_len % (2·cp) == 0 (load-balanced causal ring attention gives each
          rank two chunks); with sequence parallelism (seq_len/cp) % tp == 0;
        * global_batch_size % (micro_batch_size·dp) == 0;
        * interleaved_1f1b needs pp >= 2 and micro_batches % pp == 0 (Megatron rule);
        * tp <= gpus_per_node (tensor parallelism across servers is an error).

    Returns:
        Warnings (also logged): e.g. a TP group that the placement spreads over servers, or
        fewer micro-batches than stages (a large bubble).

    Raises:
        InputError: the first failed constraint, with field `layout.<name>`.
    """
    _check_degrees(model, layout, n_gpus)
    stage_layer_counts(model, layout)
    _check_experts_and_context(model, layout)
    _check_batch_and_servers(layout, gpus_per_node)
    warnings = _layout_warnings(layout, gpus_per_node)
    for w in warnings:
        log.warning(w)
    return warnings


def _check_degrees(model: ModelSpec, L: LayoutSpec, n_gpus: int) -> None:
    """The GPU count, ep inside dp, and MLP sizes, attention and KV heads over tp."""
    if L.world_size != n_gpus:
        raise _fail(
            f"dp·tp·pp·cp = {L.dp}·{L.tp}·{L.pp}·{L.cp} = {L.world_size} must equal the "
            f"GPU count {n_gpus} (ep={L.ep} is folded into dp)",
            "dp",
        )
    if L.dp % L.ep:
        raise _fail(f"dp ({L.dp}) must be divisible by ep ({L.ep}); ep is folded into dp", "ep")
    if model.attention_heads % L.tp:
        raise _fail(
            f"attention_heads ({model.attention_heads}) of {model.name} must be divisible by tp ({L.tp})",
            "tp",
        )
    _check_ffn_over_tp(model, L.tp)
    kv = model.n_kv_heads
    if kv >= L.tp and kv % L.tp:
        raise _fail(f"kv_heads ({kv}) must be divisible by tp ({L.tp})", "tp")
    if kv < L.tp and L.tp % kv:
        raise _fail(
            f"tp ({L.tp}) must be a multiple of kv_heads ({kv}) so KV heads can be replicated",
            "tp",
        )


def _check_ffn_over_tp(model: ModelSpec, tp: int) -> None:
    """Each MLP's intermediate size splits evenly over tp: Megatron-LM's column-parallel
    first MLP GEMM divides its output features by the tp size (`divide()` asserts it), for
    the dense MLP, every routed expert (expert tensor parallelism = tp here) and the shared
    experts, which run as one MLP of their summed width (Megatron's shared-expert
    intermediate size; `workload.flops` prices them so). Only the MLPs the model has are
    checked."""
    n_moe = model.moe_layer_count
    sizes: dict[str, int] = {}
    if n_moe < model.layers:
        sizes["ffn_hidden_size"] = model.ffn_hidden_size
    if model.moe is not None and n_moe > 0:
        sizes["moe.expert_ffn_hidden_size"] = model.moe.expert_ffn_hidden_size
        if model.moe.shared_experts:
            width = model.moe.shared_experts * model.moe.shared_ffn
            sizes["moe.shared_experts·shared_expert_ffn_hidden_size"] = width
    for name, size in sizes.items():
        if size % tp:
            raise _fail(f"{name} ({size}) of {model.name} must be divisible by tp ({tp})", "tp")


def _check_experts_and_context(model: ModelSpec, L: LayoutSpec) -> None:
    """Expert parallelism over the model's experts; cp and sequence parallelism over seq_len."""
    if L.ep > 1:
        if model.moe is None or model.moe_layer_count == 0:
            raise _fail(f"ep = {L.ep} but {model.name} has no MoE layers", "ep")
        if model.moe.experts % L.ep:
            raise _fail(f"experts ({model.moe.experts}) must be divisible by ep ({L.ep})", "ep")
    if L.cp > 1 and model.seq_len % (2 * L.cp):
        raise _fail(
            f"seq_len ({model.seq_len}) must be divisible by 2·cp = {2 * L.cp} "
            "(load-balanced ring attention gives each cp rank two chunks)",
            "cp",
        )
    if L.sequence_parallel and (model.seq_len // L.cp) % L.tp:
        raise _fail(
            f"with sequence_parallel, seq_len/cp = {model.seq_len // L.cp} must be divisible by tp ({L.tp})",
            "sequence_parallel",
        )


def _check_batch_and_servers(L: LayoutSpec, gpus_per_node: int) -> None:
    """The batch over micro-batches and dp, the interleaved schedule's rule, tp in a server."""
    if L.global_batch_size % (L.micro_batch_size * L.dp):
        raise _fail(
            f"global_batch_size ({L.global_batch_size}) must be divisible by "
            f"micro_batch_size·dp = {L.micro_batch_size}·{L.dp} = {L.micro_batch_size * L.dp}",
            "global_batch_size",
        )
    if L.pp_schedule == "interleaved_1f1b" and L.micro_batches % L.pp:
        raise _fail(
            f"interleaved_1f1b needs micro-batches ({L.micro_batches}) divisible by pp "
            f"({L.pp}) (Megatron rule)",
            "pp_schedule",
        )
    if L.tp > gpus_per_node:
        raise _fail(
            f"tp ({L.tp}) exceeds GPUs per node ({gpus_per_node}); tensor parallelism must "
            "stay inside one server",
            "tp",
        )


def _layout_warnings(L: LayoutSpec, gpus_per_node: int) -> list[str]:
    """Layouts that run but run badly: TP groups over servers, fewer micro-batches than stages."""
    warnings: list[str] = []
    grid = RankGrid(L)
    if L.tp > 1 and any(len({r // gpus_per_node for r in g}) > 1 for g in grid.groups("tp")):
        warnings.append(
            f"placement {L.placement!r} spreads tensor-parallel groups over servers "
            f"({gpus_per_node} GPUs per node); put tp first"
        )
    if L.pp > 1 and L.micro_batches < L.pp:
        warnings.append(
            f"{L.micro_batches} micro-batches for {L.pp} pipeline stages: most of the step is pipeline bubble"
        )
    return warnings
