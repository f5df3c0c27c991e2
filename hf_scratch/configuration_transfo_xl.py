"""Configuration of Transformer-XL (Dai et al. 2019, "Transformer-XL: Attentive Language Models Beyond a Fixed-Length
Context", §3.2 segment-level recurrence, §3.3 relative positional encodings). Defaults are transfo-xl-wt103: 18
layers, hidden 1024, 16 heads of 64, FFN 4096, adaptive input/softmax with cutoffs 20000/40000/200000 and div_val 4,
memory 1600, relative distances clamped at 1000."""

from __future__ import annotations

from .configuration_common import ScratchConfig


class ScratchTransfoXLConfig(ScratchConfig):
    r"""
    Transformer-XL settings, under the shared field names (CONTRIBUTING.md, "Names across families"; the reference
    names ``n_token``, ``d_model``, ``n_head``, ``d_head``, ``d_inner``, ``n_layer``, ``d_embed``, ``dropout``,
    ``dropatt``, ``layer_norm_epsilon``, ``init_std`` and ``pre_lnorm`` read and write the same fields).

    - ``pre_norm``: False = post-LN blocks, LayerNorm(x + Sublayer(x)); True = pre-LN, x + Sublayer(LayerNorm(x))
      (``pre_lnorm``, the reference's name and the key of config.json files saved before the rename, still reads
      and writes it).
    - ``mem_len``: how many hidden states per layer the memory keeps. It is read at every call, so a loaded model can
      evaluate with a longer memory than it trained with (``model.config.mem_len = 1600``), as the paper does.
    - ``clamp_len``: relative distances beyond this share one encoding (≤ 0: no clamping).
    - ``same_length``: every query attends the same number (``mem_len``) of keys, as in the paper's evaluation.
    - ``untie_r``: u and v (the global content and position biases) per layer (True) or shared by all layers.
    - ``cutoffs`` / ``div_val`` / ``tie_projs``: adaptive input and softmax (Baevski & Auli 2019; Grave et al. 2017):
      the vocabulary is split at the cutoffs into a head and tail clusters; cluster i embeds in
      ``embedding_size // div_val**i`` dimensions and is projected to ``hidden_size``. ``tie_projs[i]`` shares the
      softmax projection of cluster i with the input one (default: all but the first). No cutoffs: plain softmax.

    Example:
    ```python
    >>> from hf_scratch import ScratchTransfoXLConfig, ScratchTransfoXLLMHeadModel
    >>> config = ScratchTransfoXLConfig(vocab_size=1000, cutoffs=[200, 500], hidden_size=64, embedding_size=64,
    ...                                 num_hidden_layers=2, num_attention_heads=4, head_dim=16,
    ...                                 intermediate_size=128, div_val=2, mem_len=32)
    >>> model = ScratchTransfoXLLMHeadModel(config)
    ```"""

    model_type = "scratch-transfo-xl"
    default_auto_map = {
        "AutoConfig": "configuration_transfo_xl.ScratchTransfoXLConfig",
        "AutoModel": "modeling_transfo_xl.ScratchTransfoXLModel",
        "AutoModelForCausalLM": "modeling_transfo_xl.ScratchTransfoXLLMHeadModel",
    }
    default_tokenizer = "bpe"
    learning_rates = {"tiny": 1e-3, "small": 5e-4, "base": 2.5e-4}  # base: Dai et al. 2019
    # a trained tokenizer's small vocabulary has no use for the adaptive-softmax cutoffs sized for WikiText-103
    size_presets = {
        "tiny": {"embedding_size": 64, "head_dim": 32, "mem_len": 32, "cutoffs": []},
        "small": {"embedding_size": 256, "head_dim": 64, "mem_len": 128, "cutoffs": []},
        "base": {"cutoffs": []},
    }
    keys_to_ignore_at_inference = ["mems"]
    attribute_map = {
        "n_token": "vocab_size",
        "d_model": "hidden_size",
        "d_embed": "embedding_size",
        "n_head": "num_attention_heads",
        "d_head": "head_dim",
        "d_inner": "intermediate_size",
        "n_layer": "num_hidden_layers",
        "dropout": "hidden_dropout_prob",
        "dropatt": "attention_probs_dropout_prob",
        "layer_norm_epsilon": "layer_norm_eps",
        "init_std": "initializer_range",
        "pre_lnorm": "pre_norm",
    }

    vocab_size: int = 267735
    hidden_size: int = 1024
    embedding_size: int = 1024
    num_hidden_layers: int = 18
    num_attention_heads: int = 16
    head_dim: int = 64
    intermediate_size: int = 4096
    hidden_act: str = "relu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.0
    layer_norm_eps: float = 1e-5
    pre_norm: bool = False
    # segment-level recurrence and relative positions
    mem_len: int = 1600
    clamp_len: int = 1000
    same_length: bool = True
    untie_r: bool = True
    # adaptive input and softmax
    cutoffs: list[int] | None = None
    div_val: int = 4
    tie_projs: list[bool] | None = None
    tie_word_embeddings: bool = True
    # initialisation (the reference's init="normal")
    initializer_range: float = 0.02
    proj_init_std: float = 0.01
    bos_token_id: int | None = None  # the reference vocabulary has none: generate() needs a prompt
    eos_token_id: int | None = 0
    pad_token_id: int | None = None
    use_cache: bool = True

    def derive_defaults(self) -> None:
        if self.cutoffs is None:
            self.cutoffs = [20000, 40000, 200000]
        self.cutoffs = [int(c) for c in self.cutoffs]
        if self.tie_projs is None:
            self.tie_projs = [False] + [True] * len(self.cutoffs)
        self.tie_projs = [bool(t) for t in self.tie_projs]

    def check(self) -> None:
        self.require_positive(
            "vocab_size",
            "hidden_size",
            "embedding_size",
            "num_hidden_layers",
            "num_attention_heads",
            "head_dim",
            "intermediate_size",
            "div_val",
        )
        self.require_probability("hidden_dropout_prob", "attention_probs_dropout_prob")
        if not isinstance(self.mem_len, int) or self.mem_len < 0:
            raise ValueError(
                f"ScratchTransfoXLConfig.mem_len must be an integer ≥ 0 (0 = no memory), got {self.mem_len!r}."
            )
        if self.same_length and self.mem_len == 0:
            raise ValueError(
                "ScratchTransfoXLConfig: same_length=True makes every query attend mem_len keys, so it needs "
                "mem_len > 0; set mem_len or same_length=False."
            )
        cutoffs, tie_projs = self.filled_cutoffs, self.filled_tie_projs
        bounds = [0] + cutoffs + [self.vocab_size]
        if any(low >= high for low, high in zip(bounds, bounds[1:])):
            raise ValueError(
                f"ScratchTransfoXLConfig.cutoffs={cutoffs} must increase strictly and lie inside (0, vocab_size="
                f"{self.vocab_size}): e.g. cutoffs=[{self.vocab_size // 4}, {self.vocab_size // 2}], or [] for a plain "
                "softmax."
            )
        if len(tie_projs) != len(cutoffs) + 1:
            raise ValueError(
                f"ScratchTransfoXLConfig.tie_projs has {len(tie_projs)} entries but there are "
                f"{len(cutoffs) + 1} clusters (len(cutoffs) + 1): give one flag per cluster or leave it None."
            )
        if self.div_val > 1 and self.embedding_size // self.div_val ** len(cutoffs) == 0:
            raise ValueError(
                f"ScratchTransfoXLConfig: embedding_size={self.embedding_size} // div_val**{len(cutoffs)} is 0, "
                "so the last cluster would have no dimensions: lower div_val or use fewer cutoffs."
            )

    @property
    def filled_cutoffs(self) -> list[int]:
        """``cutoffs`` as ``derive_defaults`` filled them in (None only before it runs)."""
        if self.cutoffs is None:
            raise ValueError("ScratchTransfoXLConfig.cutoffs is None: give a list of ints ([] for a plain softmax).")
        return self.cutoffs

    @property
    def filled_tie_projs(self) -> list[bool]:
        """``tie_projs`` as ``derive_defaults`` filled them in (None only before it runs)."""
        if self.tie_projs is None:
            raise ValueError("ScratchTransfoXLConfig.tie_projs is None: give one bool per cluster.")
        return self.tie_projs

    @property
    def num_clusters(self) -> int:
        """Clusters of the adaptive softmax: the head (frequent words) plus one per cutoff."""
        return len(self.filled_cutoffs) + 1

    @property
    def has_projection(self) -> bool:
        """Embeddings narrower than the model (or any cluster when div_val > 1) are projected to ``hidden_size``."""
        return self.div_val > 1 or self.embedding_size != self.hidden_size

    def cluster_bounds(self) -> list[tuple[int, int]]:
        """[low, high) vocabulary ranges of the clusters."""
        ends = [0] + self.filled_cutoffs + [self.vocab_size]
        return list(zip(ends, ends[1:]))

    def cluster_embedding_size(self, cluster: int) -> int:
        """d_embed // div_val^i: rarer clusters get smaller embeddings."""
        return self.embedding_size // self.div_val**cluster
