"""Framework behaviour of a training job: named settings of what the training framework does.

The parallel degrees and the schedule are `layout.LayoutSpec`; this base class holds how
the framework runs them, each setting a documented field (`docs/fidelity.md` says what each
one models):
    * ZeRO stage (Rajbhandari et al. 2020) and, for ZeRO-3, the parameter gathers' bucket
      size and prefetch depth, the gradient reduce-scatter bucket size and a per-call
      software overhead. Defaults are DeepSpeed's (`stage3_prefetch_bucket_size` 5e7 and
      `reduce_bucket_size` 5e8 elements, here in bf16 bytes; one bucket prefetched);
    * data-parallel gradient buckets and their overlap with the backward pass, and (ZeRO-1/2)
      whether the updated weights' all-gather ends the step or is prefetched under the next
      step's forward (Megatron-LM `--overlap-param-gather`; MegaScale, Jiang et al. NSDI'24
      §3.2: the all-gather of the next iteration's parameters runs during the first
      micro-batches' forward, the reduce-scatter of the last micro-batch's backward
      overlaps it);
    * ZeRO-2 gradient reduction once per step or after every micro-batch's backward (what
      sharded gradients need: PyTorch FSDP's SHARD_GRAD_OP outside `no_sync`);
    * the gradients' precision: in the model's dtype, or fp32 main gradients accumulated
      over the micro-batches and reduced over data parallelism in fp32 (Megatron-LM forces
      this for bf16 training, `--accumulate-allreduce-grads-in-fp32`, in
      `megatron/training/arguments.py`; Llama 3 405B did both, Dubey et al. 2024 §3.3.2),
      accumulated in the weight-gradient GEMM's epilogue (Megatron's
      `--gradient-accumulation-fusion`) or by a separate kernel;
    * activation recomputation (Korthikanti et al. 2022);
    * how context parallelism exchanges K/V: a ring whose transfers overlap the attention
      core (ring attention; Transformer Engine's default) or an all-gather the core waits
      for (Llama 3, Dubey et al. 2024 §3.3.2: all-gather based CP, its latency exposed on
      the critical path);
    * tensor-parallel communication overlap: none, Megatron-LM's (`--tp-comm-overlap`) or
      T3-style fine-grained overlap (Pati et al., ASPLOS'24) with its contention penalty.

Contention shares (`tp_contention_share`), from the T3 paper (§3.2 and §6.1, sub-layers
of T-NLG/Mega-GPT-2 on a simulated 80-CU GPU): the ideal overlap of a GEMM and its
reduce-scatter speeds sub-layers up 35% geomean, which with the collective hidden means
collective ≈ 0.35 × GEMM; T3 with memory-controller arbitration reaches 30% geomean, so
the GEMM runs 1.35/1.30 - 1 = 3.8% longer while overlapped; software overlap of two
concurrent kernels, the collective holding 16 of 80 CUs, slows the GEMM 21% (Fig. 6).

Simplifies: the settings are read by the step-program generator (`generate`, `emit`,
`gradients`); they are not cross-checked against any one framework's version.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.errors import FieldError
from simulator.units import to_si

MB = 1024 * 1024
#: Default share of an overlapped GEMM's time lost to contention, by `tp_comm_overlap`
#: (T3 paper: 21% for concurrent kernels, Fig. 6; 1.35/1.30 - 1 for T3-MCA, §6.1).
TP_CONTENTION_DEFAULTS = {"none": 0.0, "megatron": 0.21, "t3": 1.35 / 1.30 - 1}
#: Most sequences one optimizer step may take (`global_batch_size`): 16,777,216 (2**24),
#: 1,000 times the largest published batches (Llama 3 405B: 2,048 sequences of 8,192 tokens;
#: DeepSeek-V3: 15,360). The batch itself is a number in the cost formulas; what the step
#: program builds is its micro-batches, bounded next.
MAX_GLOBAL_BATCH = 2**24
#: Most micro-batches per pipeline per step (gradient-accumulation steps: global_batch_size
#: / (micro_batch_size·dp)): 4,096, 34 times the most a shipped workload takes (120). The
#: step program holds every micro-batch's forward and backward of every layer: measured some
#: 300 KB and 3 ms a micro-batch for Llama 3 8B at TP2 (32 layers; 8,192 micro-batches:
#: 6.5M ops, 2.5 GB, 25 s) and 1.8 MB and 15 ms for Llama 3 405B at TP8/PP16 (126 layers),
#: so the limit is a few GB and about a minute of building at most.
MAX_MICRO_BATCHES = 4096
#: Smallest ZeRO-3 bucket: 1 MiB. A layer is gathered and reduced in ceil(its bytes / bucket)
#: calls per micro-batch, each an op of the step program; a near-zero bucket (a typo such as
#: `zero3_gather_bucket_mb: 0.0001`) would split every layer into millions of ops.
ZERO3_MIN_BUCKET_BYTES = 2**20


def check_batch(global_batch: int, micro_batch: int, dp: int) -> None:
    """Refuse a batch past `MAX_GLOBAL_BATCH` sequences or `MAX_MICRO_BATCHES` micro-batches.

    Raises:
        FieldError: on `global_batch_size`, naming the count and the limit.
    """
    if global_batch > MAX_GLOBAL_BATCH:
        raise FieldError(
            f"{global_batch:,} sequences per step; at most {MAX_GLOBAL_BATCH:,} (2**24, 1,000 times "
            "the largest published batches)",
            field="global_batch_size",
        )
    micro_batches = global_batch // (micro_batch * dp)
    if micro_batches > MAX_MICRO_BATCHES:
        raise FieldError(
            f"global_batch_size / (micro_batch_size·dp) = {global_batch:,} / ({micro_batch}·{dp}) = "
            f"{micro_batches:,} micro-batches per pipeline; at most {MAX_MICRO_BATCHES:,} (the step "
            "program holds each micro-batch's forward and backward of every layer, some 0.3-2 MB "
            "and 3-15 ms a micro-batch)",
            field="global_batch_size",
        )


def _fsdp_spelling(schema: dict[str, Any]) -> None:
    """The ZeRO stage's JSON schema also takes `fsdp` (any case), which `_human_units` reads as 3."""
    number = {k: schema.pop(k) for k in ("type", "minimum", "maximum") if k in schema}
    schema["anyOf"] = [number, {"type": "string", "pattern": "^[Ff][Ss][Dd][Pp]$"}]


class FrameworkSettings(Spec):
    """How the training framework runs a layout (ZeRO, buckets, recomputation)."""

    #: Bytes per element of an fp32 main gradient.
    FP32_GRAD_BYTES: ClassVar[int] = 4

    zero_stage: int = Field(
        0,
        ge=0,
        le=3,
        description="ZeRO stage: 0 none, 1 optimizer states, 2 +gradients, 3 +weights "
        "(sharded over dp·cp). 'fsdp' is accepted as 3.",
        json_schema_extra=lambda schema: _fsdp_spelling(schema),
    )
    recompute: Literal["none", "selective", "full"] = Field(
        "none",
        description="Activation recomputation (Korthikanti et al. 2022): none, selective "
        "(attention core only; what FlashAttention does anyway) or full (whole layer).",
    )
    grad_bucket_bytes: float = Field(
        40 * MB,
        gt=0,
        description="Gradient bucket size, bytes (YAML: grad_bucket_mb, MiB; Megatron "
        "default 40M elements is close). A bucket holds whole layers: below one layer's "
        "gradients every layer is one bucket.",
    )
    overlap_grad_reduce: bool = Field(
        True, description="Overlap data-parallel gradient reduction with the backward pass."
    )
    zero2_reduce_per_micro_batch: bool = Field(
        False,
        description="ZeRO-2: each micro-batch's backward reduce-scatters every layer's "
        "gradients into the local shard, on the dp stream after the layer's backward (sharded "
        "gradients cannot be accumulated whole: PyTorch FSDP SHARD_GRAD_OP outside no_sync); "
        "false: one bucketed reduction after the last micro-batch, as for ZeRO-0/1. The "
        "updated weights' all-gather is the same either way. Ignored for other stages.",
    )
    zero1_grad_collective: Literal["reduce_scatter", "all_reduce"] = Field(
        "reduce_scatter",
        description="ZeRO-1: how the gradients reach each rank's optimizer shard: "
        "reduce_scatter (Megatron-LM's distributed optimizer, DeepSpeed's ZeRO-1 optimizer) or "
        "all_reduce of the whole gradient, each rank then updating its shard (DeepSpeed's "
        "BF16_Optimizer under pipeline parallelism, `_bf16_reduce_grads`); the updated weights "
        "are all-gathered either way. Ignored for other stages.",
    )
    tied_embedding_sync: Literal["after_dp", "before_dp"] = Field(
        "after_dp",
        description="Tied embeddings with pp > 1: where the all-reduce of the embedding's "
        "gradient between the first and last stage runs on their dp streams: after_dp (after "
        "the stage's data-parallel gradient buckets: Megatron-LM's finalize_model_grads) or "
        "before_dp (before them: DeepSpeed's pipeline schedule, ReduceTiedGrads before "
        "ReduceGrads). Ignored for untied models and pp = 1.",
    )
    overlap_param_gather: bool = Field(
        False,
        description="ZeRO-1/2: the all-gather of the updated weights is prefetched under the "
        "next step's forward, bucket by bucket in the order the forward uses them, each "
        "layer's first forward waiting for its bucket (Megatron-LM --overlap-param-gather; "
        "MegaScale §3.2); false: it follows the optimizer and ends the step. Ignored for "
        "ZeRO-0 (nothing to gather) and ZeRO-3 (gathers are per layer).",
    )
    main_grads: Literal["model", "fp32"] = Field(
        "model",
        description="Gradient precision: model (the weights' dtype, e.g. bf16) or fp32 main "
        "gradients, accumulated over micro-batches and reduced over dp in fp32 (Megatron-LM "
        "for bf16; Llama 3 405B).",
    )
    grad_accumulation_fusion: bool = Field(
        True,
        description="With fp32 main gradients: the weight-gradient GEMM adds into the fp32 "
        "buffer in its epilogue (Megatron --gradient-accumulation-fusion); false: a separate "
        "memory-bound kernel per micro-batch reads the gradient and the buffer and writes "
        "the buffer (2 + 4 + 4 bytes per bf16 parameter).",
    )
    cp_comm: Literal["ring", "all_gather"] = Field(
        "ring",
        description="Context-parallel K/V exchange: ring (the chunks travel a ring while the "
        "attention core computes; the core's end waits for them) or all_gather (K/V are "
        "all-gathered before the core, which waits for them: exposed, as Llama 3's "
        "all-gather based CP, Dubey et al. 2024 §3.3.2). Same bytes either way.",
    )
    tp_comm_overlap: Literal["none", "megatron", "t3"] = Field(
        "none",
        description="Tensor-parallel communication overlap: none (TP collectives block); "
        "megatron (reduce-scatters overlap the GEMM producing them, all-gathers the GEMMs "
        "consuming them, Megatron-LM --tp-comm-overlap); t3 (reduce-scatters / all-reduces "
        "overlap their producer GEMM, T3-style fine-grained overlap).",
    )
    tp_overlap_contention: float | None = Field(
        None,
        ge=0,
        le=1,
        description="Share of an overlapped GEMM's time added while its TP collective runs "
        "alongside (compute-unit and HBM contention), a fraction from 0 to 1; null = the mode's "
        "default: 0.21 for megatron (concurrent kernels), 0.038 for t3 (T3 with memory-"
        "controller arbitration); see the module docstring.",
    )
    zero3_gather_bucket_bytes: float = Field(
        1e8,
        ge=ZERO3_MIN_BUCKET_BYTES,
        description="ZeRO-3: parameters one all-gather call fetches at most, bytes (YAML: "
        "zero3_gather_bucket_mb, MiB); a layer is gathered in ceil(its bytes / bucket) calls "
        "on the gather stream. Default: DeepSpeed stage3_prefetch_bucket_size (5e7 elements) "
        "in bf16.",
    )
    zero3_prefetch_buckets: int = Field(
        1,
        ge=0,
        description="ZeRO-3: gather calls issued ahead, while the previous layer computes "
        "(DeepSpeed prefetches within one prefetch bucket); the rest of a layer's calls "
        "start when the previous layer's compute ends and the layer waits for them.",
    )
    zero3_reduce_bucket_bytes: float = Field(
        1e9,
        ge=ZERO3_MIN_BUCKET_BYTES,
        description="ZeRO-3: gradients one reduce-scatter call carries at most, bytes (YAML: "
        "zero3_reduce_bucket_mb, MiB); overlaps the backward on the data-parallel stream. "
        "Default: DeepSpeed reduce_bucket_size (5e8 elements) in bf16.",
    )
    zero3_call_overhead_s: float = Field(
        0.0,
        ge=0,
        description="ZeRO-3: software time of every gather / reduce-scatter call before its "
        "data moves (hooks, flattening, launch), s (YAML: zero3_call_overhead_us). Default 0: "
        "no published figure is taken; set it from a profile.",
    )

    @property
    def reduces_layers_per_micro_batch(self) -> bool:
        """Whether every layer's gradients are reduce-scattered after each micro-batch's
        backward (ZeRO-3, or ZeRO-2 with `zero2_reduce_per_micro_batch`)."""
        return self.zero_stage == 3 or (self.zero_stage == 2 and self.zero2_reduce_per_micro_batch)

    @property
    def grad_reduce_kind(self) -> str:
        """The collective that reduces the gradients over dp: all_reduce (ZeRO 0, or ZeRO-1
        with `zero1_grad_collective: all_reduce`) or reduce_scatter."""
        if self.zero_stage == 0 or (self.zero_stage == 1 and self.zero1_grad_collective == "all_reduce"):
            return "all_reduce"
        return "reduce_scatter"

    def grad_element_bytes(self, weight_bytes: int) -> int:
        """Bytes of one accumulated / reduced gradient element (`main_grads`)."""
        return self.FP32_GRAD_BYTES if self.main_grads == "fp32" else weight_bytes

    @property
    def tp_contention_share(self) -> float:
        """`tp_overlap_contention`, or the default of `tp_comm_overlap` (0 for none)."""
        if self.tp_overlap_contention is not None:
            return self.tp_overlap_contention
        return TP_CONTENTION_DEFAULTS[self.tp_comm_overlap]

    @model_validator(mode="before")
    @classmethod
    def _human_units(cls, data: Any) -> Any:
        """Accept *_mb (MiB), *_us and zero_stage: fsdp."""
        d = to_si(
            data,
            "grad_bucket_bytes",
            "zero3_gather_bucket_bytes",
            "zero3_reduce_bucket_bytes",
            "zero3_call_overhead_s",
        )
        if not isinstance(d, dict):
            return d
        if isinstance(d.get("zero_stage"), str) and d["zero_stage"].lower() == "fsdp":
            d["zero_stage"] = 3
        return d

    @model_validator(mode="after")
    def _per_micro_batch_reduction_overlaps(self) -> FrameworkSettings:
        """Per-micro-batch reduce-scatters follow each layer's backward as it ends, so they
        cannot also be held until the whole backward ends."""
        if self.zero_stage == 2 and self.zero2_reduce_per_micro_batch and not self.overlap_grad_reduce:
            raise FieldError(
                "zero2_reduce_per_micro_batch reduce-scatters each layer as its backward ends; "
                "it needs overlap_grad_reduce: true",
                field="zero2_reduce_per_micro_batch",
            )
        return self
