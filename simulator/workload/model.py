"""Transformer model descriptions and their parameter counts.

Models a decoder-only transformer as `layers` identical-shape blocks (pre-norm attention,
then a dense MLP or a mixture-of-experts block), an input embedding, a final norm and an
output projection. Attention is multi-head with grouped-query KV heads, or DeepSeek's
multi-head latent attention (MLA). MLPs are gated (SwiGLU: gate, up, down) or not (GELU:
up, down).

Simplifies: dropout layers have no parameters; rotary embeddings have none; a multi-token
prediction (MTP) module is described (`mtp_depth`) but not counted anywhere (published
totals such as DeepSeek-V3's 671B exclude it too); routers are one linear layer (E x h);
load-balancing bias buffers are ignored.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from simulator.config.base import Spec
from simulator.config.loader import load
from simulator.errors import FieldError
from simulator.network.hardware import DTYPES

#: Parameter kinds reported by `ModelSpec.params_by_kind` (each a count of parameters).
PARAM_KINDS = (
    "attention",
    "dense_mlp",
    "moe_experts",
    "shared_experts",
    "router",
    "embeddings",
    "norms",
)


def element_bytes(dtype: str) -> int:
    """Bytes of one stored activation/weight element for a training dtype.

    fp8/fp4/int8 training keeps bf16 weights and activations in memory (the low precision
    only speeds up GEMMs), so those count 2 bytes; fp32/tf32 count 4; fp64 counts 8.
    """
    if dtype == "fp64":
        return 8
    if dtype in ("fp32", "tf32"):
        return 4
    return 2


class MoESpec(Spec):
    """A mixture-of-experts MLP block and which layers use it."""

    experts: int = Field(ge=1, description="Number of routed experts per MoE layer.")
    top_k: int = Field(ge=1, description="Routed experts each token is sent to.")
    expert_ffn_hidden_size: int = Field(ge=1, description="Intermediate size of one routed expert's MLP.")
    shared_experts: int = Field(
        0, ge=0, description="Always-active shared experts per MoE layer (DeepSeek style)."
    )
    shared_expert_ffn_hidden_size: int | None = Field(
        None,
        ge=1,
        description="Intermediate size of one shared expert; defaults to expert_ffn_hidden_size.",
    )
    first_k_dense: int = Field(
        0, ge=0, description="The first k layers use the dense MLP instead (DeepSeek-V3: 3)."
    )
    every_n: int = Field(
        1,
        ge=1,
        description="After the first_k_dense layers, every n-th layer is MoE (1 = all of them).",
    )
    moe_layers: list[int] | None = Field(
        None,
        description="Explicit 0-based indices of MoE layers; overrides first_k_dense/every_n.",
    )

    @model_validator(mode="after")
    def _check(self) -> MoESpec:
        if self.top_k > self.experts:
            raise FieldError(f"top_k ({self.top_k}) exceeds experts ({self.experts})", field="top_k")
        if self.moe_layers is not None and (self.first_k_dense or self.every_n != 1):
            raise FieldError("give either moe_layers or first_k_dense/every_n, not both", field="moe_layers")
        if self.moe_layers is not None and len(set(self.moe_layers)) < len(self.moe_layers):
            twice = sorted({i for i in self.moe_layers if self.moe_layers.count(i) > 1})
            raise FieldError(f"moe_layers names layers {twice} more than once", field="moe_layers")
        if self.moe_layers is not None and not self.moe_layers:
            raise FieldError(
                "moe_layers is empty: no layer is MoE; leave out the moe block for a dense model",
                field="moe_layers",
            )
        return self

    @property
    def shared_ffn(self) -> int:
        """Intermediate size of one shared expert."""
        return self.shared_expert_ffn_hidden_size or self.expert_ffn_hidden_size


class MLASpec(Spec):
    """DeepSeek multi-head latent attention (DeepSeek-V2/V3): low-rank Q and KV projections."""

    q_lora_rank: int | None = Field(
        None, ge=1, description="Rank of the query down-projection; null = full-rank Q projection."
    )
    kv_lora_rank: int = Field(ge=1, description="Rank of the compressed KV latent.")
    qk_rope_head_dim: int = Field(ge=1, description="Per-head dims of the rotary Q/K part.")
    qk_nope_head_dim: int = Field(ge=1, description="Per-head dims of the non-rotary Q/K part.")
    v_head_dim: int = Field(ge=1, description="Per-head dims of the values.")

    @property
    def qk_head_dim(self) -> int:
        """Per-head dims of queries and keys (nope + rope)."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim


class ModelSpec(Spec):
    """A decoder-only transformer (dense or MoE), as `workloads/models/*.yaml` describe it."""

    name: str = Field(description="Model name, e.g. 'llama3-70b'.")
    layers: int = Field(ge=1, description="Number of transformer blocks (MTP modules excluded).")
    hidden_size: int = Field(ge=1, description="Model (residual stream) width h.")
    ffn_hidden_size: int = Field(ge=1, description="Intermediate size of the dense MLP.")
    attention_heads: int = Field(ge=1, description="Number of query heads a.")
    kv_heads: int | None = Field(
        None, ge=1, description="Key/value heads (GQA); null = attention_heads (MHA)."
    )
    head_dim: int | None = Field(
        None, ge=1, description="Per-head dims; null = hidden_size / attention_heads."
    )
    vocab_size: int = Field(ge=1, description="Vocabulary size V.")
    seq_len: int = Field(ge=1, description="Training sequence length s, tokens.")
    dtype: str = Field("bf16", description=f"Training compute dtype, one of {list(DTYPES)}.")
    gated_ffn: bool = Field(
        True, description="Gated MLP (SwiGLU: 3 matrices) if true, else GELU MLP (2 matrices)."
    )
    tied_embeddings: bool = Field(False, description="Output projection shares the input embedding matrix.")
    bias: bool = Field(False, description="Linear layers have biases (GPT-2/3 style).")
    norm: Literal["layernorm", "rmsnorm"] = Field(
        "rmsnorm", description="Normalization: layernorm (weight+bias) or rmsnorm (weight)."
    )
    position_embedding: Literal["rope", "learned"] = Field(
        "rope", description="Rotary (no parameters) or learned absolute (seq_len x h table)."
    )
    dropout: bool = Field(
        False,
        description="Trained with dropout; adds dropout masks to activation memory "
        "(Korthikanti et al. 2022 count them).",
    )
    moe: MoESpec | None = Field(None, description="Mixture-of-experts block; null = dense model.")
    mla: MLASpec | None = Field(
        None, description="Multi-head latent attention; null = standard (GQA) attention."
    )
    mtp_depth: int = Field(
        0,
        ge=0,
        description="Multi-token-prediction modules (DeepSeek-V3: 1). Documented only: "
        "not counted in parameters, FLOPs or memory.",
    )

    @model_validator(mode="after")
    def _check(self) -> ModelSpec:
        if self.dtype not in DTYPES:
            raise FieldError(f"unknown dtype {self.dtype!r}; expected one of {list(DTYPES)}", field="dtype")
        if self.head_dim is None and self.hidden_size % self.attention_heads:
            raise FieldError(
                f"hidden_size ({self.hidden_size}) is not divisible by attention_heads "
                f"({self.attention_heads}); give head_dim explicitly",
                field="attention_heads",
            )
        kv = self.kv_heads or self.attention_heads
        if self.attention_heads % kv:
            raise FieldError(
                f"attention_heads ({self.attention_heads}) must be a multiple of kv_heads ({kv})",
                field="kv_heads" if self.kv_heads else "attention_heads",
            )
        if self.mla is not None and self.kv_heads not in (None, self.attention_heads):
            raise FieldError("MLA has one KV head per query head; leave kv_heads unset", field="kv_heads")
        if self.moe is not None and self.moe.moe_layers is not None:
            bad = [i for i in self.moe.moe_layers if not 0 <= i < self.layers]
            if bad:
                raise FieldError(
                    f"moe_layers {bad} outside 0..{self.layers - 1} (the model's {self.layers} layers)",
                    field="moe.moe_layers",
                )
        if self.moe is not None and self.moe.moe_layers is None and self.moe.first_k_dense >= self.layers:
            raise FieldError(
                f"first_k_dense ({self.moe.first_k_dense}) leaves no MoE layer of the model's {self.layers}; "
                "lower it, or leave out the moe block for a dense model",
                field="moe.first_k_dense",
            )
        return self

    # ---- shape helpers -------------------------------------------------------------

    @property
    def n_kv_heads(self) -> int:
        """Key/value heads (equal to attention_heads for MHA and MLA)."""
        return self.kv_heads or self.attention_heads

    @property
    def qk_head_dim(self) -> int:
        """Per-head dims of queries and keys."""
        if self.mla is not None:
            return self.mla.qk_head_dim
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def v_head_dim(self) -> int:
        """Per-head dims of values (and of the attention output before the out projection)."""
        if self.mla is not None:
            return self.mla.v_head_dim
        return self.head_dim or self.hidden_size // self.attention_heads

    @property
    def element_bytes(self) -> int:
        """Bytes per stored weight/activation element (see `element_bytes`)."""
        return element_bytes(self.dtype)

    def is_moe_layer(self, layer_index: int) -> bool:
        """Whether block `layer_index` (0-based) has a mixture-of-experts MLP."""
        if not 0 <= layer_index < self.layers:
            raise IndexError(f"layer {layer_index} outside 0..{self.layers - 1}")
        m = self.moe
        if m is None:
            return False
        if m.moe_layers is not None:
            return layer_index in m.moe_layers
        if layer_index < m.first_k_dense:
            return False
        return (layer_index - m.first_k_dense) % m.every_n == 0

    def layer_kind(self, layer_index: int) -> Literal["dense", "moe"]:
        """'moe' or 'dense' for block `layer_index`."""
        return "moe" if self.is_moe_layer(layer_index) else "dense"

    @property
    def moe_layer_count(self) -> int:
        """Number of MoE blocks."""
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    # ---- parameter counts ----------------------------------------------------------

    def _linear(self, n_in: int, n_out: int) -> int:
        return n_in * n_out + (n_out if self.bias else 0)

    def _norm(self, width: int) -> int:
        return width * (2 if self.norm == "layernorm" else 1)

    def attention_params(self) -> dict[str, int]:
        """Parameters of one attention block by matrix (norms excluded).

        Keys name the projections: `q`, `kv` (or MLA's `q_a`, `q_b`, `kv_a`, `kv_b`), `o`.
        """
        h, a = self.hidden_size, self.attention_heads
        if self.mla is not None:
            m = self.mla
            out: dict[str, int] = {}
            if m.q_lora_rank is None:
                out["q"] = self._linear(h, a * m.qk_head_dim)
            else:
                out["q_a"] = self._linear(h, m.q_lora_rank)
                out["q_b"] = self._linear(m.q_lora_rank, a * m.qk_head_dim)
            out["kv_a"] = self._linear(h, m.kv_lora_rank + m.qk_rope_head_dim)
            out["kv_b"] = self._linear(m.kv_lora_rank, a * (m.qk_nope_head_dim + m.v_head_dim))
            out["o"] = self._linear(a * m.v_head_dim, h)
            return out
        q = a * self.qk_head_dim
        kv = self.n_kv_heads * (self.qk_head_dim + self.v_head_dim)
        return {
            "q": self._linear(h, q),
            "kv": self._linear(h, kv),
            "o": self._linear(a * self.v_head_dim, h),
        }

    def mlp_params(self, ffn: int) -> int:
        """Parameters of one MLP of intermediate size `ffn` (gated or not)."""
        h = self.hidden_size
        if self.gated_ffn:
            return 2 * self._linear(h, ffn) + self._linear(ffn, h)
        return self._linear(h, ffn) + self._linear(ffn, h)

    def layer_params(self, layer_index: int) -> dict[str, int]:
        """Parameters of one transformer block, by kind (keys of `PARAM_KINDS`)."""
        out = dict.fromkeys(PARAM_KINDS, 0)
        out["attention"] = sum(self.attention_params().values())
        norms = 2 * self._norm(self.hidden_size)
        if self.mla is not None:
            if self.mla.q_lora_rank is not None:
                norms += self._norm(self.mla.q_lora_rank)
            norms += self._norm(self.mla.kv_lora_rank)
        out["norms"] = norms
        if self.is_moe_layer(layer_index):
            m = self.moe
            if m is None:  # unreachable: is_moe_layer is False without moe
                raise ValueError("no MoE block")
            out["moe_experts"] = m.experts * self.mlp_params(m.expert_ffn_hidden_size)
            out["shared_experts"] = m.shared_experts * self.mlp_params(m.shared_ffn)
            out["router"] = self.hidden_size * m.experts
        else:
            out["dense_mlp"] = self.mlp_params(self.ffn_hidden_size)
        return out

    def embedding_params(self) -> dict[str, int]:
        """Input embedding, learned positions and output projection (0 when tied)."""
        h = self.hidden_size
        return {
            "input": self.vocab_size * h,
            "position": self.seq_len * h if self.position_embedding == "learned" else 0,
            "output": 0 if self.tied_embeddings else self.vocab_size * h,
        }

    def params_by_kind(self) -> dict[str, int]:
        """Total parameters by kind (`PARAM_KINDS`), summed over all blocks plus the ends."""
        out = dict.fromkeys(PARAM_KINDS, 0)
        for i in range(self.layers):
            for k, v in self.layer_params(i).items():
                out[k] += v
        out["embeddings"] = sum(self.embedding_params().values())
        out["norms"] += self._norm(self.hidden_size)  # final norm
        return out

    def total_params(self) -> int:
        """All parameters (MTP modules excluded)."""
        return sum(self.params_by_kind().values())

    def active_params(self) -> int:
        """Parameters used per token: all but the routed experts a token is not sent to.

        Convention (matches the published Mixtral 12.9B and DeepSeek-V3 37B figures within
        1%): embeddings count in full (input and output matrices), routed experts count
        `top_k / experts` of their total.
        """
        kinds = self.params_by_kind()
        active = sum(v for k, v in kinds.items() if k != "moe_experts")
        if self.moe is not None:
            active += kinds["moe_experts"] * self.moe.top_k // self.moe.experts
        return active

    def matmul_params(self) -> int:
        """The N of 6·N model FLOPs per token (MFU): active parameters but the lookups.

        Active parameters minus the input embedding and position tables (lookups, not
        matmuls); a tied embedding counts once, as the output projection. Norm weights
        and biases stay in, as PaLM's N (all non-embedding parameters) counts them: they
        take no matmul, but they are under 0.01% of a large model's N (GPT-3 175B).
        """
        emb = self.embedding_params()
        n = self.active_params() - emb["position"] - emb["input"]
        if self.tied_embeddings:
            n += emb["input"]
        return n


def load_model(path: str | Any) -> ModelSpec:
    """Read and validate one model file (`workloads/models/*.yaml`)."""
    return load(ModelSpec, path)
