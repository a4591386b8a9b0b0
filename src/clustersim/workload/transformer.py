"""A decoder-only transformer: its shape, parameter count and FLOPs per token.

Conventions (see ../shared/reference/prior-art.md, "FLOPs per iteration"):

* a matrix multiply of an ``m x k`` by a ``k x n`` matrix is ``2 m k n`` FLOPs;
* **model FLOPs** per token are the forward and backward passes (``x 3``) of every matrix multiply
  with a weight (``2 x`` active matmul parameters), the logits included, plus the two attention
  matmuls (scores and context) over the full sequence, ``4 s d_attn`` per layer, as Megatron-LM,
  NeMo and the MFU figures of the papers count them (no causal halving). For a GPT with a 4h FFN
  and an untied or tied vocab this reproduces ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))`` exactly.
* **hardware FLOPs** add the forward work that activation recompute repeats.

Beyond the GPT and Llama blocks, a few optional fields describe what other families change in the
counts (each default leaves a model as it was): ``geglu`` MLPs (Gemma), Q/K/V-only biases (Qwen2),
one or four norms per block (Falcon-7B and Phi-2; Gemma 2 and 3), per-head query/key norms (Qwen3,
Gemma 3), multi-head latent attention (DeepSeek-V2/V3, :class:`MLA`), leading dense layers in a MoE
model (DeepSeek), MoE blocks every n-th layer between dense ones (``moe_layer_step``, Llama 4 Maverick),
group-limited expert routing (DeepSeek-V3), recurrent-state layers in place of most attention layers
(``linear_attention``: Gated DeltaNet in Qwen3-Next and Qwen3.5, Mamba-2 in Nemotron-H and Nemotron 3,
:mod:`clustersim.workload.linear_attention`; they attend to no keys, so their scores and context count
nothing), layers with a token mixer and no MLP (``mlp_free_layers``, Nemotron-H, whose blocks are a mixer
or an MLP: each mixer is folded with the MLP block after it into one layer, and a mixer followed by another
has none), a sigmoid gate on the attention output (``attention_gate``, Qwen3-Next and Qwen3.5:
one more ``h -> heads x head_dim`` projection), sliding-window attention (Mistral 7B v0.1, Gemma 2 and
3, Phi-3: a windowed layer's scores and context cover ``min(s, window)`` keys per token in the model FLOPs)
and multi-token-prediction modules trained beside the model (``mtp_layers``, DeepSeek-V3 and GLM-4.5: each
one more block, a ``2h -> h`` projection and one more pass through the shared output head and loss). Two change
no count, only the element-wise work a framework may leave outside its fused kernels (``clustersim.workload.ops``):
a clamped gated MLP (``clamped_glu``, gpt-oss) and YaRN's factor on the rotary tables (``rope_concentration``). Like
the papers' parameter counts, the parameters and model FLOPs leave the MTP modules out; what they cost a
training step is priced by ``clustersim.workload.ops`` and ``clustersim.compute.memory``.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    ValidationError,
    model_serializer,
    model_validator,
)

from clustersim.errors import ClusterSimError, validation_problems
from clustersim.workload.block_parts import MLA as MLA
from clustersim.workload.block_parts import FfnType as FfnType
from clustersim.workload.block_parts import Norm as Norm
from clustersim.workload.block_parts import Position as Position
from clustersim.workload.linear_attention import LinearAttention
from clustersim.workload.moe import Count, MoE, Switch
from clustersim.workload.quantization import Quantization
from clustersim.workload.quantization import QuantMethod as QuantMethod
from clustersim.workload.transformer_checks import check_extensions

# Optional architecture fields and the value that leaves a model as before; model_dump leaves them
# out at that value (qkv_bias: when it equals linear_bias), so a plain model's record is unchanged.
_EXTENSIONS: dict[str, object] = {
    "layer_norms": 2,
    "qk_norm": False,
    "mla": None,
    "dense_layers": 0,
    "moe_layer_step": 1,
    "sliding_window": 0,
    "window_layers": 0,
    "max_context_tokens": None,
    "quantization": None,
    "mtp_layers": 0,
    "clamped_glu": False,
    "rope_concentration": 1.0,
    "linear_attention": None,
    "attention_gate": False,
    "mlp_free_layers": 0,
}


class Transformer(BaseModel):
    """A decoder-only transformer. Defaults follow the FFN type: ``gelu`` models are GPT-style
    (biases, LayerNorm, learned positions, tied embeddings), gated ones Llama-style (no biases,
    RMSNorm, rotary, untied). The fields after ``moe`` are optional extensions; see the module."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="custom", description="Model id.")
    layers: Count = Field(gt=0, le=100_000, description="Transformer blocks.")
    hidden: Count = Field(gt=0, le=10_000_000, description="Model width h.")
    ffn_hidden: Count = Field(gt=0, description="MLP inner width (per expert for MoE).")
    heads: Count = Field(gt=0, description="Attention (query) heads.")
    kv_heads: Count = Field(default=0, ge=0, description="Key/value heads (GQA/MQA); 0 = heads.")
    head_dim: Count = Field(default=0, ge=0, description="Width of one head; 0 = hidden / heads.")
    vocab: Count = Field(gt=0, description="Vocabulary size (padded where the source pads).")
    seq_len: Count = Field(default=2048, gt=0, description="Default training sequence length, tokens.")
    ffn_type: FfnType = Field(default=FfnType.GELU, description="MLP kind.")
    norm: Norm | None = Field(default=None, description="Normalization; default by ffn_type.")
    position: Position | None = Field(default=None, description="Position encoding; default by ffn_type.")
    linear_bias: Switch | None = Field(default=None, description="Biases on the linear layers; default by ffn_type.")
    tied_embeddings: Switch | None = Field(default=None, description="Logits share the embedding; default by ffn_type.")
    moe: MoE | None = Field(default=None, description="Mixture of experts, if any.")
    qkv_bias: Switch | None = Field(default=None, description="Biases on Q, K and V (Qwen2); default linear_bias.")
    layer_norms: Count = Field(
        default=2, ge=1, le=4, description="Norms per block: 2; 1 before a parallel attention and MLP; 4 (Gemma 2)."
    )
    qk_norm: Switch = Field(default=False, description="An RMSNorm on each query and key head (Qwen3, Gemma 3).")
    mla: MLA | None = Field(default=None, description="Multi-head latent attention (DeepSeek), if any.")
    dense_layers: Count = Field(default=0, ge=0, description="Leading MoE-model blocks with a dense MLP of ffn_hidden.")
    moe_layer_step: Count = Field(
        default=1, ge=1, description="Every n-th block is a MoE block (the last of each n), the rest dense MLPs."
    )
    sliding_window: Count = Field(default=0, ge=0, description="Keys a windowed layer attends to; 0 = no window.")
    window_layers: Count | None = Field(
        default=None, ge=0, description="Layers with the sliding window (the rest see the whole sequence); default all."
    )
    max_context_tokens: Count | None = Field(
        default=None,
        gt=0,
        description="Longest sequence (prompt + output) the positions cover, tokens; None = not stated "
        "(learned positions: the table, seq_len).",
    )
    quantization: Quantization | None = Field(
        default=None, description="How a quantized checkpoint stores its layer weights; None = 16-bit."
    )
    mtp_layers: Count = Field(
        default=0,
        ge=0,
        le=8,
        description="Multi-token-prediction modules trained beside the model (DeepSeek-V3: 1): each one more block "
        "on the last pipeline stage and one more pass through the output head; not in the parameter count.",
    )
    clamped_glu: Switch = Field(
        default=False,
        description="A gated MLP whose gate and up inputs are clamped before the gate's activation, and the up "
        "half offset by one (gpt-oss: swiglu_limit 7); the same matrices and FLOPs as the gated MLP.",
    )
    rope_concentration: float = Field(
        default=1.0,
        gt=0,
        le=10,
        description="The factor YaRN puts on the rotary cos and sin tables (gpt-oss: 0.1 ln 32 + 1 = 1.347); "
        "1 without YaRN, or where its two mscales cancel (DeepSeek-V3).",
    )
    linear_attention: LinearAttention | None = Field(
        default=None,
        description="Gated DeltaNet or Mamba-2 layers in place of that many attention layers (Qwen3-Next, Nemotron-H).",
    )
    attention_gate: Switch = Field(
        default=False, description="A sigmoid gate on each attention layer's output, made from its input (Qwen3-Next)."
    )
    mlp_free_layers: Count = Field(
        default=0,
        ge=0,
        description="Layers with a token mixer and no MLP after it (Nemotron-H: a Mamba-2 or attention block followed "
        "by another mixer), one norm each.",
    )

    @model_validator(mode="after")
    def _resolve(self) -> Self:
        gpt = self.ffn_type is FfnType.GELU
        resolved: dict[str, Any] = {}
        if self.kv_heads == 0:
            resolved["kv_heads"] = self.heads
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise ValueError(f"hidden {self.hidden} is not divisible by heads {self.heads}; give head_dim")
            resolved["head_dim"] = self.hidden // self.heads
        if self.norm is None:
            resolved["norm"] = Norm.LAYERNORM if gpt else Norm.RMSNORM
        if self.position is None:
            resolved["position"] = Position.LEARNED if gpt else Position.ROTARY
        if self.linear_bias is None:
            resolved["linear_bias"] = gpt
        if self.tied_embeddings is None:
            resolved["tied_embeddings"] = gpt
        if self.qkv_bias is None:
            resolved["qkv_bias"] = resolved.get("linear_bias", self.linear_bias)
        if self.window_layers is None:
            resolved["window_layers"] = self.layers if self.sliding_window else 0
        for key, value in resolved.items():
            object.__setattr__(self, key, value)
        if self.heads % self.kv_heads:
            raise ValueError(f"heads {self.heads} is not a multiple of kv_heads {self.kv_heads}")
        check_extensions(self)
        return self

    @model_serializer(mode="wrap")
    def _omit_unused_extensions(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key, default in _EXTENSIONS.items():
            if key in data and data[key] == default:
                del data[key]
        if data.get("qkv_bias") == data.get("linear_bias"):
            data.pop("qkv_bias", None)
        return data

    # ---- context ------------------------------------------------------------------------------
    @property
    def context_tokens(self) -> int | None:
        """The longest sequence the model's positions cover: ``max_context_tokens``, or with learned
        positions the table (``seq_len``); None when not stated."""
        if self.max_context_tokens is not None:
            return self.max_context_tokens
        return self.seq_len if self.position is Position.LEARNED else None

    def check_unquantized(self, priced: str) -> None:
        """``ClusterSimError`` naming ``priced`` (what is priced for 16-bit weights and optimizer state,
        e.g. "training") when the model is a quantized checkpoint."""
        if self.quantization is not None:
            raise ClusterSimError(
                f"model: {self.name} is a {self.quantization.describe()} checkpoint; {priced} is priced for 16-bit "
                "weights and their optimizer state, so a quantized checkpoint is not modelled: give its "
                "unquantized model",
                field="model",
                value=self.name,
            )

    def check_context(self, tokens: float, what: str, *, beyond_context: bool = False) -> str | None:
        """None when a sequence of ``tokens`` fits the context (or none is stated); with ``beyond_context``
        the note an estimate beyond it carries; otherwise ``ClusterSimError`` naming ``what`` (the field
        or option and its value), the model's context and the override."""
        context = self.context_tokens
        if context is None or tokens <= context:
            return None
        words = f"{what} is {tokens:,.0f} tokens, beyond the context of {self.name}, {context:,} tokens"
        if beyond_context:
            return f"beyond context: {words}; priced anyway as asked (the model was not trained for it)"
        field = what.split(" ", 1)[0]
        raise ClusterSimError(
            f"{words} (its max_context_tokens); give a shorter sequence, or beyond_context "
            f"(--beyond-context) to price it anyway",
            field=field,
            value=tokens,
        )

    # ---- shape --------------------------------------------------------------------------------
    @property
    def q_width(self) -> int:
        """Width of the queries (and of the attention output): heads x head_dim."""
        return self.heads * self.head_dim

    @property
    def kv_width(self) -> int:
        """Width of the keys (and of the values): kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def value_head_dim(self) -> int:
        """Width of one value head: head_dim, or the latent attention's v_head_dim."""
        return self.mla.v_head_dim if self.mla else self.head_dim

    @property
    def value_width(self) -> int:
        """Width of the values: kv_heads x value_head_dim (kv_width without latent attention)."""
        return self.kv_heads * self.value_head_dim

    @property
    def context_width(self) -> int:
        """Width of the attention output (the output projection's input): heads x value_head_dim."""
        return self.heads * self.value_head_dim

    @property
    def kv_cache_elements(self) -> int:
        """Elements one token adds to the KV cache of one layer: its key and value on every kv head
        (``2 x kv_heads x head_dim``), or with latent attention the compressed latent and the shared
        rotary key (``kv_lora_rank + rope_head_dim``), from which every head's key and value are made."""
        if self.mla is not None:
            return self.mla.kv_lora_rank + self.mla.rope_head_dim
        return 2 * self.kv_width

    @property
    def kv_cache_heads(self) -> int:
        """Heads the KV cache divides into (what tensor parallelism can split): kv_heads, or 1 with
        latent attention (one latent that every head reads)."""
        return 1 if self.mla is not None else self.kv_heads

    @property
    def linear_attention_layers(self) -> int:
        """Layers whose token mixer is recurrent, a Gated DeltaNet or Mamba-2 (0 without ``linear_attention``)."""
        return self.linear_attention.layers if self.linear_attention else 0

    @property
    def full_attention_layers(self) -> int:
        """Layers with attention over keys (a windowed layer counts): all but the recurrent ones."""
        return self.layers - self.linear_attention_layers

    @property
    def moe_layers(self) -> int:
        """Blocks whose MLP is the model's MLP or experts: all but the leading dense layers and the MLP-free ones,
        every moe_layer_step-th of them."""
        return (self.layers - self.dense_layers - self.mlp_free_layers) // self.moe_layer_step

    @property
    def dense_mlp_layers(self) -> int:
        """Blocks of a MoE model with a dense MLP of ffn_hidden (leading or between MoE blocks); 0 without MoE."""
        return self.layers - self.moe_layers - self.mlp_free_layers

    @property
    def mlp_share(self) -> float:
        """The share of the layers with an MLP (1 unless some are MLP-free)."""
        return (self.layers - self.mlp_free_layers) / self.layers

    @property
    def expert_ffn(self) -> int:
        """MLP width of one expert (the dense MLP width without MoE)."""
        return self.moe.expert_ffn_hidden or self.ffn_hidden if self.moe else self.ffn_hidden

    @property
    def expert_input(self) -> int:
        """The width a routed expert reads and writes: a latent MoE's ``moe.latent``, else the hidden size."""
        return self.moe.latent or self.hidden if self.moe else self.hidden

    @property
    def active_mlps(self) -> int:
        """MLPs a token goes through per layer: 1 dense, or top_k + shared experts."""
        return self.moe.top_k + self.moe.shared_experts if self.moe else 1

    @property
    def total_mlps(self) -> int:
        """MLPs held per layer: 1 dense, or experts + shared experts."""
        return self.moe.experts + self.moe.shared_experts if self.moe else 1

    # ---- parameters ---------------------------------------------------------------------------
    def qkv_matmul_params(self) -> int:
        """The weight matrices that make one attention layer's queries, keys and values (the latent
        attention's down and up projections where it has them, the output gate's where it has one)."""
        if self.mla is None:
            gate = self.q_width if self.attention_gate else 0
            return self.hidden * (self.q_width + gate + 2 * self.kv_width)
        m = self.mla
        rank = m.q_lora_rank
        query = self.hidden * rank + rank * self.q_width if rank else self.hidden * self.q_width
        keys_values = self.hidden * (m.kv_lora_rank + m.rope_head_dim) + m.kv_lora_rank * self.heads * (
            self.head_dim - m.rope_head_dim + m.v_head_dim
        )
        return query + keys_values

    def output_matmul_params(self) -> int:
        """The weight matrix of one layer's output projection."""
        return self.context_width * self.hidden

    def attention_matmul_params(self) -> int:
        """The weight matrices of one layer's Q, K, V and output projections (no biases)."""
        return self.qkv_matmul_params() + self.output_matmul_params()

    def attention_params(self) -> int:
        """Q, K, V and output projections of one attention layer, with their biases where the model has them,
        per-head query/key norms and the latent attention's norms."""
        biases = (self.q_width + 2 * self.kv_width if self.qkv_bias else 0) + (self.hidden if self.linear_bias else 0)
        norms = 2 * self.head_dim if self.qk_norm else 0
        if self.mla is not None:
            norms += self.mla.q_lora_rank + self.mla.kv_lora_rank
        return self.attention_matmul_params() + biases + norms

    def mixer_mean(self, attention: float, delta_rule: float) -> float:
        """A per-layer figure averaged over the layer kinds: ``attention`` on an attention layer, ``delta_rule`` on a
        recurrent one (``attention`` itself without linear attention)."""
        return (self.full_attention_layers * attention + self.linear_attention_layers * delta_rule) / self.layers

    def mixer_qkv_matmul_params(self) -> float:
        """The input projections of one layer's token mixer averaged over the layers: the attention's queries, keys
        and values (``qkv_matmul_params``) or a recurrent layer's input projection."""
        linear = self.linear_attention
        return self.mixer_mean(self.qkv_matmul_params(), linear.input_matmul_params(self.hidden) if linear else 0)

    def mixer_output_matmul_params(self) -> float:
        """The output projection of one layer's token mixer averaged over the layers."""
        linear = self.linear_attention
        return self.mixer_mean(self.output_matmul_params(), linear.output_matmul_params(self.hidden) if linear else 0)

    def mixer_matmul_params(self) -> float:
        """Matmul weights of one layer's token mixer averaged over the layers (``attention_matmul_params`` alone)."""
        return self.mixer_qkv_matmul_params() + self.mixer_output_matmul_params()

    def mixer_params(self) -> float:
        """One layer's token mixer with its biases and norms, averaged over the layers (``attention_params``
        without linear attention)."""
        linear = self.linear_attention
        return self.mixer_mean(self.attention_params(), linear.params(self.hidden) if linear else 0)

    def mlp_matmul_params(self, width: int | None = None) -> int:
        """The weight matrices of one MLP (one routed expert) of one layer (no biases); ``width``: its input and
        output width instead of ``expert_input`` (a latent MoE's shared experts read the hidden size)."""
        return self.ffn_type.num_matrices * (width or self.expert_input) * self.expert_ffn

    def mlp_params(self, width: int | None = None) -> int:
        """One MLP (one routed expert, or of ``width``) of one layer, with its biases."""
        width = width or self.expert_input
        biases = ((self.ffn_type.num_matrices - 1) * self.expert_ffn + width) if self.linear_bias else 0
        return self.mlp_matmul_params(width) + biases

    def latent_projection_params(self, biases: bool = True) -> int:
        """A latent MoE's two projections of one layer (0 without them), with their biases where ``biases``."""
        return self.moe.latent_projection_params(self.hidden, bool(biases and self.linear_bias)) if self.moe else 0

    def dense_mlp_matmul_params(self) -> int:
        """The weight matrices of the dense MLP (width ffn_hidden) of a MoE model's dense block."""
        return self.ffn_type.num_matrices * self.hidden * self.ffn_hidden

    def dense_mlp_params(self) -> int:
        """The dense MLP of one dense block of a MoE model, with its biases."""
        biases = ((self.ffn_type.num_matrices - 1) * self.ffn_hidden + self.hidden) if self.linear_bias else 0
        return self.dense_mlp_matmul_params() + biases

    def router_params(self) -> int:
        """The MoE router of one layer (0 for a dense model)."""
        return self.hidden * self.moe.experts if self.moe else 0

    def norm_params(self) -> int:
        """One normalization layer."""
        return (2 if self.norm is Norm.LAYERNORM else 1) * self.hidden

    def layer_norm_params(self) -> int:
        """The norms of one block (layer_norms of them)."""
        return self.layer_norms * self.norm_params()

    def layer_params(self) -> float:
        """All parameters of one transformer block (a MoE block where the model has experts), its token mixer
        averaged over the layers (``mixer_params``)."""
        shared = self.moe.shared_experts if self.moe else 0
        mlps = (self.total_mlps - shared) * self.mlp_params() + shared * self.mlp_params(self.hidden)
        around = self.router_params() + self.latent_projection_params()
        return self.mixer_params() + mlps + around + self.layer_norm_params()

    def dense_layer_params(self) -> float:
        """All parameters of one dense block of a MoE model (leading or between MoE blocks), its token mixer
        averaged over the layers."""
        return self.mixer_params() + self.dense_mlp_params() + self.layer_norm_params()

    def embedding_params(self) -> int:
        """Token embedding, learned positions, and the output matrix when it is not tied."""
        positions = self.seq_len * self.hidden if self.position is Position.LEARNED else 0
        output = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.vocab * self.hidden + positions + output

    def mtp_module_params(self) -> int:
        """One multi-token-prediction module beyond its block (a block of the model's last kind): the
        ``2h x h`` projection and its three norms; it shares the embedding and the output head."""
        return 2 * self.hidden * self.hidden + 3 * self.norm_params()

    def num_params(self) -> int:
        """Total parameters (the final norm included; the multi-token-prediction modules not)."""
        blocks = self.moe_layers * self.layer_params() + self.dense_mlp_layers * self.dense_layer_params()
        mixers_alone = self.mlp_free_layers * (self.mixer_params() + self.norm_params())
        return round(blocks + mixers_alone) + self.embedding_params() + self.norm_params()

    def active_params(self) -> int:
        """Parameters a token uses (routed experts counted top_k times)."""
        inactive = (self.total_mlps - self.active_mlps) * self.mlp_params()
        return self.num_params() - self.moe_layers * inactive

    # ---- FLOPs --------------------------------------------------------------------------------
    def matmul_params_per_token(self) -> int:
        """Weights a token multiplies: per layer QKV, output, active MLPs, router; then the logits."""
        shared = self.moe.shared_experts if self.moe else 0
        mlp = (self.active_mlps - shared) * self.mlp_matmul_params() + shared * self.mlp_matmul_params(self.hidden)
        mlp += self.router_params() + self.latent_projection_params(biases=False)
        mixers = round(self.layers * self.mixer_matmul_params())
        dense = self.dense_mlp_layers * self.dense_mlp_matmul_params()
        return mixers + self.moe_layers * mlp + dense + self.vocab * self.hidden

    def attended_keys(self, seq_len: int | None = None) -> int:
        """Keys one token's queries meet, summed over the layers: the whole sequence ``s``, or
        ``min(s, sliding_window)`` on a windowed layer (the model-FLOPs convention, no causal halving); none on a
        recurrent layer."""
        s = seq_len or self.seq_len
        windowed = self.window_layers or 0
        return (self.full_attention_layers - windowed) * s + windowed * min(s, self.sliding_window)

    def attention_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward FLOPs of the attention scores (``2 q_width``) and context (``2 context_width``)
        per attended key of one token, all layers."""
        return float(2 * (self.q_width + self.context_width) * self.attended_keys(seq_len))

    def linear_mixing_flops_per_token(self) -> float:
        """Forward FLOPs of one token in the recurrent layers beyond their projections (convolution and
        delta rule or scan), all layers; 0 without them."""
        linear = self.linear_attention
        return self.linear_attention_layers * linear.mixing_flops_per_token() if linear else 0.0

    def forward_flops_per_token(self, seq_len: int | None = None) -> float:
        """Forward-pass matmul FLOPs of one token."""
        mixing = self.attention_flops_per_token(seq_len) + self.linear_mixing_flops_per_token()
        return 2.0 * self.matmul_params_per_token() + mixing

    def model_flops_per_token(self, seq_len: int | None = None) -> float:
        """Training model FLOPs per token: forward + backward (3 x forward), no recompute."""
        return 3.0 * self.forward_flops_per_token(seq_len)


def transformer_from_mapping(data: dict[str, Any], where: str = "model") -> Transformer:
    """A ``Transformer`` from plain data; ``ClusterSimError`` naming the field, value and rule."""
    try:
        return Transformer.model_validate(data)
    except ValidationError as exc:
        problems = validation_problems(exc.errors())
        raise ClusterSimError(f"{where}: {problems}") from None
