"""transformers' own common model tests (``ModelTesterMixin`` of the installed release's
``tests/test_modeling_common.py``) run against every family, with testers shaped like transformers' own
(``BertModelTester``, ``GPT2ModelTester``, ``MarianModelTester``, ``LongformerModelTester``, 4.x's
``TransfoXLModelTester``): tiny sizes, ``prepare_config_and_inputs``, ``prepare_config_and_inputs_for_common``,
``get_config``.

The mixin comes from the sdist on the package registry (``transformers_suite``), downloaded when the tests run;
offline, this module skips — except in CI (``CI`` set, as ``.ci/run`` runs), where the model tests must run and a
failed download fails the collection. What a family does not support is declared the way transformers' own models
and test classes declare it (class flags such as ``_can_compile_fullgraph`` or ``_supports_attention_backend``,
config fields such as ``use_cache``, tester attributes such as ``test_resize_embeddings`` or ``has_attentions``), so
the mixin skips those tests itself; the few tests skipped here say why, for a transformers model of the same kind.
"""

from __future__ import annotations

import os
import unittest

import pytest
import torch
from families import MODEL_TEST_HEADS
from transformers_suite import SuiteUnavailable, load_common_tests, name_our_heads

import hf_scratch

try:
    common = load_common_tests()
except SuiteUnavailable as error:
    if os.environ.get("CI"):  # CI shows the model tests of every family, or fails
        raise
    pytest.skip(f"transformers' model tests (ModelTesterMixin) not run: {error}", allow_module_level=True)
# the mixin tells a head's kind (base model, multiple choice, question answering, ...) by its class name
name_our_heads(common, hf_scratch.FAMILY_CONFIGS)

ModelTesterMixin = common.ModelTesterMixin
ids_tensor = common.ids_tensor
random_attention_mask = common.random_attention_mask

GENERATION_TESTS_ELSEWHERE = (
    "transformers' generation tests (GenerationTesterMixin, tests/generation/test_utils.py) are not in the sdist; "
    "the generation conventions they check are tested in tests/test_generation_conventions.py (packed sequences: "
    "tests/test_packed_sequences.py; custom 4-D masks: tests/test_custom_masks.py)"
)


class ScratchModelTest(ModelTesterMixin):
    """What the family test classes share."""

    if hasattr(ModelTesterMixin, "test_bc_cache_name_forward"):  # 5.24 on
        # The warning is what the test looks for; pyproject turns every FutureWarning into an error.
        @pytest.mark.filterwarnings("default:`past_key_values` is deprecated:FutureWarning")
        def test_bc_cache_name_forward(self):
            super().test_bc_cache_name_forward()


class ScratchGenerativeModelTest(ScratchModelTest):
    """The families with a head that generates: transformers' test classes of such models also inherit
    ``GenerationTesterMixin``, which the sdist does not ship."""

    @unittest.skip(reason=GENERATION_TESTS_ELSEWHERE)
    def test_generation_tester_mixin_inheritance(self):
        pass


# --------------------------------------------------------------------------------------------------------------
# BERT (BertModelTester)
# --------------------------------------------------------------------------------------------------------------


# what BertModelTester and MarianModelTester share (with a batch of 3, not 13: the suite runs on two CPU cores)
COMMON_SIZES = dict(
    batch_size=3,
    seq_length=7,
    is_training=True,
    vocab_size=99,
    num_hidden_layers=2,
    num_attention_heads=4,
    hidden_act="gelu",
    hidden_dropout_prob=0.1,
    attention_probs_dropout_prob=0.1,
)


class ScratchModelTester:
    """A tester shaped like transformers' (``BertModelTester``, ``MarianModelTester``, ...): its sizes are
    attributes (the mixin reads ``batch_size``, ``seq_length``, ``num_hidden_layers``, ``is_training``, ...), set from
    the class's ``sizes`` and the keyword arguments."""

    sizes: dict = {}

    def __init__(self, parent, **overrides):
        self.parent = parent
        for name, value in {**self.sizes, **overrides}.items():
            setattr(self, name, value)


class ScratchBertModelTester(ScratchModelTester):
    config_class = hf_scratch.ScratchBertConfig
    sizes = dict(  # BertModelTester's, with a smaller batch and position table
        **COMMON_SIZES,
        use_input_mask=True,
        use_token_type_ids=True,
        hidden_size=32,
        intermediate_size=37,
        max_position_embeddings=64,
        type_vocab_size=16,
        initializer_range=0.02,
        num_labels=3,
        num_choices=4,
    )

    CONFIG_FIELDS = (
        "vocab_size",
        "hidden_size",
        "num_hidden_layers",
        "num_attention_heads",
        "intermediate_size",
        "hidden_act",
        "hidden_dropout_prob",
        "attention_probs_dropout_prob",
        "max_position_embeddings",
        "initializer_range",
        "num_labels",
    )

    def get_config(self):
        fields = {name: getattr(self, name) for name in self.CONFIG_FIELDS}
        return self.config_class(**fields, type_vocab_size=self.type_vocab_size)

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        input_mask = random_attention_mask([self.batch_size, self.seq_length]) if self.use_input_mask else None
        token_type_ids = None
        if self.use_token_type_ids:
            token_type_ids = ids_tensor([self.batch_size, self.seq_length], self.type_vocab_size)
        return self.get_config(), input_ids, token_type_ids, input_mask

    def prepare_config_and_inputs_for_common(self):
        config, input_ids, token_type_ids, input_mask = self.prepare_config_and_inputs()
        inputs_dict = {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": input_mask}
        return config, inputs_dict


class ScratchBertModelTest(ScratchModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchBertModelTest"]

    def setUp(self):
        self.model_tester = ScratchBertModelTester(self)

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        # BertModelTest: the pre-training head takes both objectives' labels
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if return_labels and model_class is hf_scratch.ScratchBertForPreTraining:
            tester = self.model_tester
            inputs_dict["labels"] = torch.zeros((tester.batch_size, tester.seq_length), dtype=torch.long)
            inputs_dict["next_sentence_label"] = torch.zeros(tester.batch_size, dtype=torch.long)
        return inputs_dict


# --------------------------------------------------------------------------------------------------------------
# Longformer (LongformerModelTester)
# --------------------------------------------------------------------------------------------------------------


class ScratchLongformerModelTester(ScratchBertModelTester):
    config_class = hf_scratch.ScratchLongformerConfig

    sizes = {**ScratchBertModelTester.sizes, "attention_window": 4}

    def __init__(self, parent, **overrides):
        super().__init__(parent, **overrides)
        # LongformerModelTester: the local attention of a token covers attention_window + 1 keys (and the global
        # tokens); the attention outputs' last dimension is that, not the sequence length
        self.key_length = self.attention_window + 2

    def get_config(self):
        config = super().get_config()
        config.attention_window = self.attention_window
        return config

    def prepare_config_and_inputs(self):
        config, input_ids, token_type_ids, input_mask = super().prepare_config_and_inputs()
        # a question / context pair, as the question-answering head reads its inputs (LongformerModelTester's
        # prepare_config_and_inputs_for_question_answering): without a global_attention_mask, the tokens before the
        # first separator attend globally. Tests that rebuild the inputs from input_ids alone (eager ≡ sdpa) keep it.
        # Ids clear of the special tokens (<s> 0, <pad> 1, </s> 2; MarianModelTester clamps its ids the same way):
        # a <pad> id inside the text would take no position (RoBERTa's positions count the real tokens), which
        # inputs_embeds cannot tell, and test_inputs_embeds_matches_input_ids would compare two different inputs.
        input_ids = input_ids.clamp(min=3)
        input_ids[:, 2] = config.sep_token_id
        return config, input_ids, token_type_ids, input_mask

    def prepare_config_and_inputs_for_common(self):
        config, inputs_dict = super().prepare_config_and_inputs_for_common()
        # one global token, the first (<s>: global attention on the classification token, Beltagy et al. 2020 §3.1).
        # LongformerModelTester takes the last one, which random_attention_mask may pad in every row of a small
        # batch: no token is then global, the global projections get no gradient, and the mixin's checks that every
        # parameter trains fail at random. random_attention_mask always keeps the first token.
        global_attention_mask = torch.zeros_like(inputs_dict["input_ids"])
        global_attention_mask[:, 0] = 1
        inputs_dict["global_attention_mask"] = global_attention_mask
        return config, inputs_dict


class ScratchLongformerModelTest(ScratchModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchLongformerModelTest"]

    def setUp(self):
        # batch 7: the eager ≡ sdpa tests run 7 rows, and add random rows (without a separator) to a smaller batch
        self.model_tester = ScratchLongformerModelTester(self, batch_size=7)

    @unittest.skip(
        reason="Longformer cannot keep gradients in attention or hidden states (LongformerModelTest's reason): the "
        "attentions it returns are laid out anew (global keys, then the window's offsets, global rows zeroed) from the "
        "weights the output is computed with, so no gradient reaches them"
    )
    def test_retain_grad_hidden_states_attentions(self):
        pass


# --------------------------------------------------------------------------------------------------------------
# GPT (GPT2ModelTester)
# --------------------------------------------------------------------------------------------------------------


class ScratchGPTModelTester(ScratchBertModelTester):
    config_class = hf_scratch.ScratchGPTConfig

    def get_config(self):
        fields = {name: getattr(self, name) for name in self.CONFIG_FIELDS}
        # GPT2ModelTester: a pad token, so that the sequence classifier finds the last real token
        special = self.vocab_size - 1
        return self.config_class(**fields, pad_token_id=special, bos_token_id=special, eos_token_id=special)

    # GPT's token types are ids of its one vocabulary (Radford et al. 2018 §3.3); GPT2ModelTester draws them below 16
    # (type_vocab_size), so they stay in the vocabulary when test_resize_tokens_embeddings shrinks it


class ScratchGPTModelTest(ScratchGenerativeModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchGPTModelTest"]

    def setUp(self):
        self.model_tester = ScratchGPTModelTester(self)

    def _prepare_for_class(self, inputs_dict, model_class, return_labels=False):
        # GPT2ModelTest: the double-heads model takes two labels. Ours takes its inputs per choice, (batch, choices,
        # length), as GPT-1's multiple-choice fine-tuning does (Radford et al. 2018 §3.3), and refuses (batch,
        # length) as ambiguous: it gets them expanded per choice, as the mixin expands them for a multiple-choice head
        inputs_dict = super()._prepare_for_class(inputs_dict, model_class, return_labels=return_labels)
        if model_class is not hf_scratch.ScratchGPTDoubleHeadsModel:
            return inputs_dict
        tester = self.model_tester
        inputs_dict = {
            k: v.unsqueeze(1).expand(-1, tester.num_choices, *v.shape[1:]).contiguous()
            if isinstance(v, torch.Tensor) and v.ndim > 1
            else v
            for k, v in inputs_dict.items()
        }
        if return_labels:
            shape = (tester.batch_size, tester.num_choices, tester.seq_length)
            inputs_dict["labels"] = torch.zeros(shape, dtype=torch.long)
            inputs_dict["mc_token_ids"] = torch.zeros((tester.batch_size, tester.num_choices), dtype=torch.long)
            inputs_dict["mc_labels"] = torch.zeros(tester.batch_size, dtype=torch.long)
        return inputs_dict


# --------------------------------------------------------------------------------------------------------------
# Transformer-XL (4.x's TransfoXLModelTester)
# --------------------------------------------------------------------------------------------------------------


class ScratchTransfoXLModelTester(ScratchModelTester):
    sizes = dict(  # 4.x's TransfoXLModelTester's, with a smaller batch and 2 layers
        batch_size=3,
        seq_length=7,
        mem_len=30,
        clamp_len=15,
        is_training=True,
        vocab_size=99,
        cutoffs=[10, 50, 80],
        hidden_size=32,
        embedding_size=32,
        num_attention_heads=4,
        head_dim=8,
        intermediate_size=128,
        div_val=2,
        num_hidden_layers=2,
        eos_token_id=0,
    )

    def __init__(self, parent, **overrides):
        super().__init__(parent, **overrides)
        # the first segment has no memory yet (4.x's TransfoXL attended to mem_len zero slots: seq_length + mem_len)
        self.key_length = self.seq_length

    def get_config(self):
        return hf_scratch.ScratchTransfoXLConfig(
            vocab_size=self.vocab_size,
            mem_len=self.mem_len,
            clamp_len=self.clamp_len,
            cutoffs=list(self.cutoffs),
            hidden_size=self.hidden_size,
            embedding_size=self.embedding_size,
            num_attention_heads=self.num_attention_heads,
            head_dim=self.head_dim,
            intermediate_size=self.intermediate_size,
            div_val=self.div_val,
            num_hidden_layers=self.num_hidden_layers,
            eos_token_id=self.eos_token_id,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        return self.get_config(), input_ids

    def prepare_config_and_inputs_for_common(self):
        config, input_ids = self.prepare_config_and_inputs()
        return config, {"input_ids": input_ids}


ADAPTIVE = (
    "the vocabulary is split into frequency clusters: an adaptive input (Baevski & Auli 2019) and an adaptive softmax "
    "(Grave et al. 2017), one table per cluster, no single nn.Embedding / output matrix"
)


class ScratchTransfoXLModelTest(ScratchGenerativeModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchTransfoXLModelTest"]
    # ADAPTIVE: resize_token_embeddings grows the rarest cluster; transformers' TransfoXLModelTest replaced the
    # mixin's resize tests with a per-cluster one, as tests/test_transfo_xl.py::
    # test_resize_token_embeddings_grows_the_rarest_cluster checks here
    test_resize_embeddings = False

    def setUp(self):
        self.model_tester = ScratchTransfoXLModelTester(self)

    @unittest.skip(reason=f"The input embedding is not an nn.Embedding: {ADAPTIVE} (4.x's mixin accepted it here)")
    def test_model_get_set_embeddings(self):
        pass


# --------------------------------------------------------------------------------------------------------------
# The encoder-decoder Transformer (MarianModelTester)
# --------------------------------------------------------------------------------------------------------------


class ScratchTransformerModelTester(ScratchModelTester):
    sizes = dict(  # MarianModelTester's, with a smaller batch
        **COMMON_SIZES,
        hidden_size=16,
        intermediate_size=4,
        max_position_embeddings=100,
        eos_token_id=2,
        pad_token_id=1,
        bos_token_id=0,
        decoder_start_token_id=3,
    )

    def __init__(self, parent, **overrides):
        super().__init__(parent, **overrides)
        self.encoder_seq_length = self.decoder_seq_length = self.seq_length

    def get_config(self):
        return hf_scratch.ScratchTransformerConfig(
            vocab_size=self.vocab_size,
            d_model=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            encoder_attention_heads=self.num_attention_heads,
            decoder_attention_heads=self.num_attention_heads,
            encoder_ffn_dim=self.intermediate_size,
            decoder_ffn_dim=self.intermediate_size,
            hidden_act=self.hidden_act,
            hidden_dropout_prob=self.hidden_dropout_prob,
            attention_probs_dropout_prob=self.attention_probs_dropout_prob,
            max_position_embeddings=self.max_position_embeddings,
            eos_token_id=self.eos_token_id,
            bos_token_id=self.bos_token_id,
            pad_token_id=self.pad_token_id,
            decoder_start_token_id=self.decoder_start_token_id,
        )

    def prepare_config_and_inputs(self):
        input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size).clamp(3)
        input_ids[:, -1] = self.eos_token_id
        decoder_input_ids = ids_tensor([self.batch_size, self.seq_length], self.vocab_size)
        config = self.get_config()
        inputs_dict = {
            "input_ids": input_ids,
            "decoder_input_ids": decoder_input_ids,
            "attention_mask": input_ids.ne(config.pad_token_id),
            "decoder_attention_mask": decoder_input_ids.ne(config.pad_token_id),
        }
        return config, inputs_dict

    def prepare_config_and_inputs_for_common(self):
        return self.prepare_config_and_inputs()


class ScratchTransformerModelTest(ScratchGenerativeModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchTransformerModelTest"]
    is_encoder_decoder = True

    def setUp(self):
        self.model_tester = ScratchTransformerModelTester(self)


# --------------------------------------------------------------------------------------------------------------
# RNN seq2seq (MarianModelTester's shape: an encoder-decoder with a sequence classifier on the encoder)
# --------------------------------------------------------------------------------------------------------------


class ScratchRNNModelTester(ScratchTransformerModelTester):
    sizes = {**ScratchTransformerModelTester.sizes, "num_labels": 3}

    def get_config(self):
        return hf_scratch.ScratchRNNConfig(
            vocab_size=self.vocab_size,
            hidden_size=self.hidden_size,
            encoder_layers=self.num_hidden_layers,
            decoder_layers=self.num_hidden_layers,
            hidden_dropout_prob=self.hidden_dropout_prob,
            eos_token_id=self.eos_token_id,
            bos_token_id=self.bos_token_id,
            pad_token_id=self.pad_token_id,
            decoder_start_token_id=self.decoder_start_token_id,
            num_labels=self.num_labels,
        )


# No self-attention: the encoder and decoder are recurrent; ``cross_attentions`` holds one additive-attention map
# (Bahdanau et al. 2015), not one per layer and head. transformers' recurrent models (RWKV, Mamba) set the same flag.
RECURRENT_ATTENTION = False


class ScratchRNNModelTest(ScratchGenerativeModelTest, unittest.TestCase):
    all_model_classes = MODEL_TEST_HEADS["ScratchRNNModelTest"]
    is_encoder_decoder = True
    has_attentions = RECURRENT_ATTENTION

    def setUp(self):
        self.model_tester = ScratchRNNModelTester(self)


class ScratchRNNEncoderModelTester(ScratchRNNModelTester):
    """The sequence classifier reads the encoder only: source inputs, no decoder inputs, and outputs laid out as an
    encoder's (``hidden_states``): its config says ``is_encoder_decoder=False``, as T5EncoderOnlyModelTester's does."""

    def get_config(self):
        config = super().get_config()
        config.is_encoder_decoder = False
        return config

    def prepare_config_and_inputs_for_common(self):
        config, inputs_dict = self.prepare_config_and_inputs()
        return config, {"input_ids": inputs_dict["input_ids"], "attention_mask": inputs_dict["attention_mask"]}


class ScratchRNNForSequenceClassificationModelTest(ScratchModelTest, unittest.TestCase):
    """The RNN family's encoder-only head (as transformers tests an encoder-decoder's encoder-only classes, e.g.
    T5EncoderModel, in a class of their own)."""

    all_model_classes = MODEL_TEST_HEADS["ScratchRNNForSequenceClassificationModelTest"]
    has_attentions = RECURRENT_ATTENTION

    def setUp(self):
        self.model_tester = ScratchRNNEncoderModelTester(self)

    @unittest.skip(
        reason="The family's AutoModel is the encoder-decoder (ScratchRNNModel), which needs decoder inputs: the "
        "mixin calls it with input_ids alone for an encoder-only test class (ScratchRNNModelTest loads and runs it)"
    )
    def test_load_with_mismatched_shapes(self):
        pass


def test_the_test_classes_run_the_heads_of_the_offline_table():
    """Each test class here runs the heads ``MODEL_TEST_HEADS`` (families.py) lists for it, and no other class has
    heads: test_every_family.py checks offline that the table holds every head of every family."""
    test_classes = {
        name: test_class.all_model_classes
        for name, test_class in globals().items()
        if isinstance(test_class, type) and issubclass(test_class, ScratchModelTest) and test_class.all_model_classes
    }
    assert test_classes == MODEL_TEST_HEADS
