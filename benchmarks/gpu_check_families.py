"""Every family on a CUDA GPU against the same model on the CPU: forward (padded batch; eager and the fast kernel),
loss and gradients, greedy generation, save → load onto the GPU, and bf16 autocast. Not part of CI (it needs a GPU);
the tiny configurations are the test suite's (``tests/families.py``).

    python benchmarks/gpu_check_families.py [--device cuda]      (--device cpu: a dry run, CPU against CPU)

Prints one PASS/FAIL line per check and exits non-zero if any fails.
"""

from __future__ import annotations

import argparse
import copy
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from common import check_summary, guarded, max_diff, report  # noqa: E402
from families import FAMILIES, NAMES, fixed_sizes  # noqa: E402


def padded_inputs(name: str, device: torch.device) -> tuple[dict, dict]:
    family, sizes = FAMILIES[name], fixed_sizes()
    torch.manual_seed(1)
    sizes["ids"] = torch.randint(3, sizes["vocab"], (2, 6))
    sizes["decoder_ids"] = torch.randint(3, sizes["vocab"], (2, 3))
    mask = torch.ones_like(sizes["ids"])
    mask[1, 4:] = 0
    if family.padding_side == "left":
        mask = mask.flip(1)
    inputs = family.inputs(sizes, sizes["ids"], mask)
    return sizes, {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in inputs.items()}


def check_family(name: str, device: torch.device) -> None:
    family = FAMILIES[name]
    sizes, cpu_inputs = padded_inputs(name, torch.device("cpu"))
    _, gpu_inputs = padded_inputs(name, device)
    check_forward(name, sizes, cpu_inputs, gpu_inputs, device)
    cpu_model, gpu_model, labels = check_loss_and_gradients(name, sizes, cpu_inputs, gpu_inputs, device)
    if family.causal or family.seq2seq:  # greedy generation (the generative heads)
        check_greedy_generation(name, cpu_model, gpu_model, cpu_inputs, device)
    check_save_and_load(name, gpu_model, gpu_inputs, device)
    check_bf16_autocast(name, sizes, gpu_inputs, labels, device)


def check_forward(name: str, sizes: dict, cpu_inputs: dict, gpu_inputs: dict, device: torch.device) -> None:
    """The padded batch's logits, eager and the fast kernel, on the device against the CPU."""
    family = FAMILIES[name]
    for implementation in ("eager", "sdpa"):
        cpu_model = family.build(sizes, attn_implementation=implementation)
        gpu_model = copy.deepcopy(cpu_model).to(device)
        with torch.no_grad():
            expected, actual = cpu_model(**cpu_inputs).logits, gpu_model(**gpu_inputs).logits
        difference = max_diff(expected, actual)
        finite = bool(torch.isfinite(actual).all())
        report(
            f"{name} {implementation} forward",
            difference <= 1e-4 and finite,
            f"max |Δ logits| {difference:.2e}, finite {finite}",
        )


def check_loss_and_gradients(name: str, sizes: dict, cpu_inputs: dict, gpu_inputs: dict, device: torch.device):
    """Loss and gradients in training mode, -100 on padding; gives back both models (their gradients taken) and the
    labels."""
    family = FAMILIES[name]
    cpu_model = family.build(sizes).train()
    gpu_model = copy.deepcopy(cpu_model).to(device).train()
    key = "input_ids" if not family.seq2seq else "decoder_input_ids"
    labels = cpu_inputs[key].clone()
    if not family.seq2seq:
        labels = labels.masked_fill(cpu_inputs["attention_mask"] == 0, -100)
    losses = []
    for model, inputs, label in ((cpu_model, cpu_inputs, labels), (gpu_model, gpu_inputs, labels.to(device))):
        loss = model(**inputs, labels=label).loss
        loss.backward()
        losses.append(loss)
    gradient = max(
        max_diff(a.grad, b.grad) for a, b in zip(cpu_model.parameters(), gpu_model.parameters()) if a.grad is not None
    )
    loss_difference = abs(losses[0].item() - losses[1].item())
    report(
        f"{name} loss and gradients",
        loss_difference <= 1e-4 and gradient <= 1e-4,
        f"|Δ loss| {loss_difference:.2e}, max |Δ grad| {gradient:.2e}",
    )
    return cpu_model, gpu_model, labels


def check_greedy_generation(name: str, cpu_model, gpu_model, cpu_inputs: dict, device: torch.device) -> None:
    cpu_model, gpu_model = cpu_model.eval(), gpu_model.eval()
    generate_inputs = {k: v for k, v in cpu_inputs.items() if k != "decoder_input_ids"}
    kwargs = dict(max_new_tokens=5, do_sample=False, pad_token_id=0)
    cpu_tokens = cpu_model.generate(**generate_inputs, **kwargs)
    gpu_tokens = gpu_model.generate(**{k: v.to(device) for k, v in generate_inputs.items()}, **kwargs)
    same = torch.equal(cpu_tokens, gpu_tokens.cpu())
    report(
        f"{name} greedy generation",
        same and gpu_tokens.device.type == device.type,
        f"same tokens {same}, on {gpu_tokens.device}",
    )


def check_save_and_load(name: str, gpu_model, gpu_inputs: dict, device: torch.device) -> None:
    """Save on the GPU → load onto the GPU."""
    with tempfile.TemporaryDirectory() as directory:
        gpu_model.save_pretrained(directory)
        reloaded = type(gpu_model).from_pretrained(directory, device_map=str(device)).eval()
        with torch.no_grad():
            difference = max_diff(gpu_model.eval()(**gpu_inputs).logits, reloaded(**gpu_inputs).logits)
        on_device = next(reloaded.parameters()).device.type == device.type
        report(
            f"{name} save → load",
            difference == 0.0 and on_device,
            f"max |Δ| {difference:.1e}, on {device.type} {on_device}",
        )


def check_bf16_autocast(name: str, sizes: dict, gpu_inputs: dict, labels, device: torch.device) -> None:
    """A training step under bf16 autocast, a fully padded row included: a finite loss and finite gradients."""
    family = FAMILIES[name]
    model = family.build(sizes).to(device).train()
    inputs = dict(gpu_inputs)
    inputs["attention_mask"] = inputs["attention_mask"].clone()
    inputs["attention_mask"][1] = 0
    bf16_labels = labels.to(device)
    if not family.seq2seq:  # nothing to predict in the padded row
        bf16_labels = bf16_labels.masked_fill(inputs["attention_mask"] == 0, -100)
    with torch.autocast(device.type, dtype=torch.bfloat16):
        out = model(**inputs, labels=bf16_labels)
    out.loss.backward()
    finite = bool(torch.isfinite(out.loss)) and all(
        torch.isfinite(p.grad).all() for p in model.parameters() if p.grad is not None
    )
    report(f"{name} bf16 autocast", finite, f"loss {out.loss.item():.4f}, gradients finite {finite}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    print(
        f"torch {torch.__version__}; device {torch.cuda.get_device_name() if device.type == 'cuda' else 'cpu'}",
        flush=True,
    )
    for name in NAMES:
        guarded(name)(check_family)(name, device)
    sys.exit(1 if check_summary() else 0)


if __name__ == "__main__":
    main()
