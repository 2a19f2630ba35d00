"""Pipeline schedules: the order of forward and backward tasks on each pipeline rank.

Models Megatron-LM's schedules for `p` pipeline stages and `m` micro-batches:
    * GPipe: all forwards, then all backwards.
    * 1F1B: `p - stage - 1` warm-up forwards, then one-forward-one-backward, then the
      cool-down backwards.
    * Interleaved 1F1B (`virtual_stages` = v chunks per rank): Megatron's order of virtual
      micro-batches (chunk `(k // p) % v`, micro-batch `(k // (p·v))·p + k % p`) with
      warm-up `2·(p - stage - 1) + (v - 1)·p`.
    * Uneven stages (`first_stage_layers`, `last_stage_layers`): the first and last stage
      hold their own layer counts (`layout.stage_layer_counts`); with interleaving the
      first chunk of the first stage and the last chunk of the last stage are the lighter
      ones, possibly empty (`layout.virtual_stage_layer_counts`, Llama 3's layout). The
      task order is the same.

Also the analytic consequences of a schedule: the pipeline bubble and the micro-batches
whose activations a stage holds at its peak.

Simplifies: stages (and chunks) are taken as equally fast for the analytic bubble; the task order does
not depend on measured times (no dynamic scheduling).
"""

from __future__ import annotations

from simulator.workload.layout import LayoutSpec, virtual_stage_layers
from simulator.workload.model import ModelSpec

#: One task of a schedule: ("F" | "B", micro-batch, chunk).
Task = tuple[str, int, int]


def stage_schedule(schedule: str, p: int, m: int, v: int, stage: int) -> list[Task]:
    """Order of forward/backward tasks of pipeline rank `stage` (Megatron-LM's schedules).

    Args:
        schedule: gpipe | 1f1b | interleaved_1f1b.
        p: pipeline stages.
        m: micro-batches.
        v: chunks per rank (1 unless interleaved).
        stage: the pipeline rank.

    Returns:
        The tasks in execution order.

    Raises:
        ValueError: for an unknown schedule name.
    """
    if schedule == "gpipe":
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule == "1f1b":
        w = min(p - stage - 1, m)
        out: list[Task] = [("F", i, 0) for i in range(w)]
        for i in range(m - w):
            out += [("F", w + i, 0), ("B", i, 0)]
        return out + [("B", i, 0) for i in range(m - w, m)]
    if schedule != "interleaved_1f1b":
        raise ValueError(f"unknown schedule {schedule!r}")
    total = m * v

    def micro_batch(k: int) -> int:
        return (k // (p * v)) * p + k % p

    fwd = [("F", micro_batch(k), (k // p) % v) for k in range(total)]
    bwd = [("B", micro_batch(k), v - 1 - (k // p) % v) for k in range(total)]
    w = min(2 * (p - stage - 1) + (v - 1) * p, total)
    out = list(fwd[:w])
    for i in range(total - w):
        out += [fwd[w + i], bwd[i]]
    return out + bwd[total - w :]


def chunk_layers(model: ModelSpec, layout: LayoutSpec, stage: int) -> dict[int, list[int]]:
    """Layers of each chunk of pipeline rank `stage`, by virtual stage (chunk·pp + stage).

    Uneven first and last stages (`layout.stage_layer_counts`) hold fewer (or more) layers;
    the schedule runs them the same way.
    """
    p = layout.pp
    return {
        c * p + stage: list(virtual_stage_layers(model, layout, c * p + stage))
        for c in range(layout.virtual_stages)
    }


def bubble_fraction(layout: LayoutSpec) -> float:
    """Analytic pipeline bubble: bubble time / pipeline time = (p-1)/(v·m + p - 1).

    For 1F1B and GPipe (v = 1) this is (p-1)/(m+p-1) (Narayanan et al. SC'21 §2.2);
    interleaving divides the bubble *time* by v (ibid. §2.2.2).
    """
    p, m, v = layout.pp, layout.micro_batches, layout.virtual_stages
    return (p - 1) / (v * m + p - 1)


def in_flight_micro_batches(layout: LayoutSpec, stage: int) -> float:
    """Micro-batches whose activations pipeline rank `stage` holds at its peak.

    GPipe: all m. 1F1B: min(pp - stage, m) (Narayanan et al. 2021; Korthikanti et al. 2022
    §4.2.3: the first stage holds pp). Interleaved 1F1B with v chunks: Megatron's warm-up
    `2·(pp - stage - 1) + (v - 1)·pp` chunks plus the one in progress, divided by v (each
    chunk is 1/v of the stage's layers) — for stage 0 this is pp·(1 + (pp - 1)/(pp·v)).
    """
    m = layout.micro_batches
    if layout.pp_schedule == "gpipe":
        return float(m)
    if layout.pp_schedule == "1f1b":
        return float(min(layout.pp - stage, m))
    v = layout.virtual_stages
    chunks = 2 * (layout.pp - stage - 1) + (v - 1) * layout.pp + 1
    return min(chunks, m * v) / v
