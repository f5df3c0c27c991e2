"""The hf_scratch quickstart: train a small GPT from scratch on the embedded Shakespeare text with the 🤗 Trainer,
write a hub-ready folder (safetensors, config with auto_map, modeling code, tokenizer, generation config, model
card), reload it through ``AutoModelForCausalLM`` and generate through a ``pipeline``.

    python training/quickstart.py                         # 2000 steps: about 2-3 minutes on 2 CPU cores
    python training/quickstart.py --max_steps 20          # a smoke test

It uses ``training/run_clm.py`` (the script for any amount of data and any GPT size) with a character-level
tokenizer, as nanoGPT's Shakespeare demo does. The folder it writes is what ``--push_to_hub`` would upload; it loads
with ``trust_remote_code=True`` where hf_scratch is not installed.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="outputs/quickstart-gpt", help="Where the hub-ready folder goes.")
    parser.add_argument("--max_steps", type=int, default=2000, help="Training steps (batches of 8 blocks of 128 characters).")
    parser.add_argument("--prompt", default="HAMLET.\nTo be, or not", help="Text the trained model continues.")
    options = parser.parse_args(argv)
    if options.max_steps <= 0:
        parser.error(f"--max_steps must be positive, got {options.max_steps}")

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, pipeline

    import hf_scratch  # noqa: F401  (registers the scratch-* model types with the Auto classes)
    from training import run_clm

    torch.set_num_threads(max(1, torch.get_num_threads()))
    started = time.perf_counter()
    print(f"1. Training a small GPT from scratch on the embedded Shakespeare text ({options.max_steps} steps)…")
    results = run_clm.main([
        "--model_type", "scratch-gpt", "--tokenizer_type", "char", "--output_dir", options.output_dir,
        "--config_overrides", "hidden_size=128,num_hidden_layers=3,num_attention_heads=4,intermediate_size=512,max_position_embeddings=256,layer_norm_placement=pre",
        "--max_seq_length", "128", "--per_device_train_batch_size", "8", "--per_device_eval_batch_size", "16",
        "--learning_rate", "1e-3", "--warmup_steps", str(max(1, options.max_steps // 20)), "--lr_scheduler_type", "cosine",
        "--weight_decay", "0.1", "--max_steps", str(options.max_steps), "--logging_steps", str(max(1, options.max_steps // 10)),
        "--save_strategy", "no", "--eval_strategy", "no", "--dataloader_pin_memory", "false",
        "--seed", "0", "--overwrite_output_dir",  # a demo: every run starts over in the same folder
    ])
    folder = Path(results["output_dir"])
    first_loss = next(e["loss"] for e in results["log_history"] if "loss" in e)
    print(f"   training loss {first_loss:.3f} → {results['train']['train_loss']:.3f} (mean); "
          f"validation perplexity {results['eval']['eval_perplexity']:.2f} per character")

    print(f"2. Wrote the hub-ready folder {folder}/:")
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        print(f"     {path.name:28s} {path.stat().st_size:>10,d} bytes")
    card_metadata = (folder / "README.md").read_text().split("---")[1]
    print("   model card metadata:", " ".join(line.strip() for line in card_metadata.splitlines() if line.strip())[:300])
    print("   auto_map:", json.loads((folder / "config.json").read_text())["auto_map"])

    print("3. Reloading it through AutoModelForCausalLM / AutoTokenizer…")
    model = AutoModelForCausalLM.from_pretrained(folder, trust_remote_code=True)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    print(f"   {type(model).__name__}: {model.num_parameters():,} parameters, vocabulary of {len(tokenizer)} characters")

    print("4. Generating through pipeline('text-generation'):")
    generate = pipeline("text-generation", model=model, tokenizer=tokenizer)
    torch.manual_seed(0)
    sample = generate(options.prompt, max_new_tokens=120, do_sample=True, temperature=0.8, top_k=40)[0]["generated_text"]
    print("   " + sample.replace("\n", "\n   "))
    elapsed = time.perf_counter() - started
    print(f"Done in {elapsed:.0f} s. Upload with: python training/run_clm.py … --push_to_hub --hub_model_id you/name, "
          f"or huggingface_hub.upload_folder(folder_path='{folder}', repo_id='you/name').")
    return {"results": results, "sample": sample, "folder": str(folder), "seconds": elapsed}


if __name__ == "__main__":
    main()
