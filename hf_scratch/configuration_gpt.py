"""Configuration of GPT (Radford et al. 2018, "Improving Language Understanding by Generative Pre-Training", §3 and
§4.1 "Model specifications") and, by one setting, GPT-2 (Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners", §2.3).

Defaults are GPT-1 (openai-gpt): 12 layers, hidden 768, 12 heads, FFN 3072, learned positions for 512 tokens, the
tanh-approximated GELU (``gelu_new``), post-LN blocks, an LM head tied to the token embeddings. GPT-2 is the same
decoder with the LayerNorm moved in front of each sub-layer plus a final LayerNorm (GPT-2 §2.3):
``layer_norm_placement="pre"``, or ``pre_norm=True`` as in the other families.
"""

from __future__ import annotations

from .configuration_common import ScratchConfig

LAYER_NORM_PLACEMENTS = ("post", "pre")


class ScratchGPTConfig(ScratchConfig):
    r"""
    GPT-specific fields (the names every family shares, and the GPT-2 / OpenAI GPT names ``attribute_map`` accepts,
    are listed in CONTRIBUTING.md, "Names across families"):

    - ``layer_norm_placement``: ``"post"`` (GPT-1: LayerNorm(x + Sublayer(x))) or ``"pre"`` (GPT-2:
      x + Sublayer(LayerNorm(x)), and a LayerNorm after the last block). It is the field config.json stores;
      ``pre_norm``, the switch's name in the other families, reads and sets it as a bool (a property: an
      ``attribute_map`` alias cannot turn "pre" into True).
    - ``embedding_dropout_prob``: dropout on token + position embeddings (the reference's ``embd_pdrop``).
    - ``lm_loss_weight``: λ of GPT-1 §3.2, L3 = L2(task) + λ·L1(language modelling), used by the task heads when
      language-modelling labels are given as well.
    - ``multiple_choice_activation`` / ``multiple_choice_dropout``: the multiple-choice head of
      ``ScratchGPTForMultipleChoice`` and ``ScratchGPTDoubleHeadsModel`` (dropout → Linear(hidden, 1) → optional
      activation such as ``"tanh"``).

    Example:
    ```python
    >>> from hf_scratch import ScratchGPTConfig, ScratchGPTLMHeadModel
    >>> gpt1 = ScratchGPTConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4)
    >>> gpt2 = ScratchGPTConfig(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
    ...                         layer_norm_placement="pre")
    >>> model = ScratchGPTLMHeadModel(gpt2)
    ```"""

    model_type = "scratch-gpt"
    default_auto_map = {
        "AutoConfig": "configuration_gpt.ScratchGPTConfig",
        "AutoModel": "modeling_gpt.ScratchGPTModel",
        "AutoModelForCausalLM": "modeling_gpt.ScratchGPTLMHeadModel",
        "AutoModelForMultipleChoice": "modeling_gpt.ScratchGPTForMultipleChoice",
        "AutoModelForSequenceClassification": "modeling_gpt.ScratchGPTForSequenceClassification",
    }
    default_tokenizer = "bpe"
    learning_rates = {"tiny": 1e-3, "small": 5e-4, "base": 2.5e-4}  # base: Radford et al. 2018 §4.1
    # the names users of GPT2Config / OpenAIGPTConfig know
    attribute_map = {
        "n_embd": "hidden_size",
        "n_layer": "num_hidden_layers",
        "n_head": "num_attention_heads",
        "n_positions": "max_position_embeddings",
        "n_inner": "intermediate_size",
        "activation_function": "hidden_act",
        "afn": "hidden_act",
        "resid_pdrop": "hidden_dropout_prob",
        "attn_pdrop": "attention_probs_dropout_prob",
        "embd_pdrop": "embedding_dropout_prob",
        "layer_norm_epsilon": "layer_norm_eps",
        "summary_activation": "multiple_choice_activation",
        "summary_first_dropout": "multiple_choice_dropout",
    }

    vocab_size: int = 40478
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int | None = None  # None: 4 × hidden_size
    hidden_act: str = "gelu_new"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    embedding_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    layer_norm_eps: float = 1e-5
    initializer_range: float = 0.02
    layer_norm_placement: str = "post"
    lm_loss_weight: float = 0.5
    multiple_choice_activation: str | None = None
    multiple_choice_dropout: float = 0.1
    pad_token_id: int | None = None
    bos_token_id: int | None = None
    eos_token_id: int | list[int] | None = None
    tie_word_embeddings: bool = True
    use_cache: bool = True

    def derive_defaults(self) -> None:
        if self.intermediate_size is None and isinstance(self.hidden_size, int):
            self.intermediate_size = 4 * self.hidden_size

    @property
    def pre_norm(self) -> bool:
        """True for GPT-2's pre-LN blocks (with a final LayerNorm), False for GPT-1's post-LN blocks: the bool view
        of ``layer_norm_placement``, under the name the other families use."""
        return self.layer_norm_placement == "pre"

    @pre_norm.setter
    def pre_norm(self, value: bool) -> None:
        if not isinstance(value, bool):
            raise ValueError(
                f"ScratchGPTConfig.pre_norm is a bool (True: GPT-2's pre-LN blocks), got {value!r}: pass True or "
                "False, or set layer_norm_placement to 'pre' or 'post'."
            )
        self.layer_norm_placement = "pre" if value else "post"

    def check(self) -> None:
        self.require_positive(
            "vocab_size",
            "hidden_size",
            "num_hidden_layers",
            "num_attention_heads",
            "intermediate_size",
            "max_position_embeddings",
        )
        self.require_divisible("hidden_size", "num_attention_heads")
        self.require_probability(
            "hidden_dropout_prob", "attention_probs_dropout_prob", "embedding_dropout_prob", "multiple_choice_dropout"
        )
        self.require_choice("layer_norm_placement", LAYER_NORM_PLACEMENTS)
        if not float(self.lm_loss_weight) >= 0.0:
            raise ValueError(
                f"ScratchGPTConfig.lm_loss_weight is λ, the weight of the auxiliary language-modelling loss: use a "
                f"value ≥ 0 (GPT-1 used 0.5), got {self.lm_loss_weight!r}."
            )
