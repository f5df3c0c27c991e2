"""The selective activation checkpoints (Longformer's feed-forward activation and attention windows, recomputed in the
backward pass) and the ``saved_tensors_hooks`` around them (``save_on_cpu``, a hook counting the bytes saved for
backward). torch 2.14 asks whether the tensors such a checkpoint keeps go through those hooks, with a FutureWarning
until the caller chooses; we choose yes (``hf_scratch.layers.SAC_OPTIONS``). Older torch has no such choice: the kept
tensors bypass the hooks there."""

import pytest
import torch

import hf_scratch
from hf_scratch.layers import SAC_OPTIONS, keep_matmuls, selective_checkpoint

CHOOSES = "respect_saved_tensors_hooks" in SAC_OPTIONS


def test_the_choice_is_made_exactly_where_torch_offers_it():
    import inspect

    offered = "respect_saved_tensors_hooks" in inspect.signature(torch.utils.checkpoint.checkpoint).parameters
    assert SAC_OPTIONS == ({"respect_saved_tensors_hooks": True} if offered else {})


def test_the_hooks_around_a_selective_checkpoint_see_the_products_it_keeps():
    """``keep_matmuls`` keeps x·w and recomputes sin: the pack hook around the region is handed x·w where torch
    offers the choice (torch ≥ 2.14), and never sees it before; the gradients are those without a checkpoint."""
    x, w = torch.randn(4, 5, requires_grad=True), torch.randn(5, 3, requires_grad=True)
    seen = []

    def pack(tensor):
        seen.append(tensor)
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):  # a FutureWarning here is an error
        out = selective_checkpoint(lambda a, b: torch.mm(a, b).sin(), x, w, policy=keep_matmuls)
    out.sum().backward()
    product = (x @ w).detach()
    assert any(t.shape == product.shape and torch.equal(t, product) for t in seen) == CHOOSES
    grads = [x.grad.clone(), w.grad.clone()]
    x.grad = w.grad = None
    torch.mm(x, w).sin().sum().backward()
    torch.testing.assert_close(grads, [x.grad, w.grad])


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_longformer_trains_under_save_on_cpu_without_a_warning(attn_implementation):
    """Both checkpoints (the feed-forward's activation with either kernel; the attention windows with sdpa) run
    under ``save_on_cpu`` without torch's FutureWarning (an error here), and give the gradients of a plain run."""
    config = hf_scratch.ScratchLongformerConfig(
        vocab_size=50,
        hidden_size=16,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=64,
        attention_window=4,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
        pad_token_id=1,
    )
    model = hf_scratch.ScratchLongformerForMaskedLM._from_config(config, attn_implementation=attn_implementation)
    ids = torch.randint(5, 50, (2, 13))

    def gradients(offload: bool):
        model.zero_grad()
        if offload:
            with torch.autograd.graph.save_on_cpu():
                loss = model(input_ids=ids, labels=ids).loss
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        return [p.grad.clone() for p in model.parameters() if p.grad is not None]

    torch.testing.assert_close(gradients(offload=True), gradients(offload=False))
