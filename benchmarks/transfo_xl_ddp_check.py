"""Check (not a CI test: it needs two processes) that TransfoXLTrainer gives each data-parallel rank its own
streams, carries them step after step, and writes one memory file per rank into each checkpoint:

    torchrun --nproc_per_node 2 benchmarks/transfo_xl_ddp_check.py       # CPU, gloo; prints "ok" from each rank

40 segments, 2 per device batch, 2 ranks → 4 streams of 10 segments: rank 0 must read segments (0, 10), (1, 11), …
and rank 1 (20, 30), (21, 31), ….
"""

from __future__ import annotations

import os
import tempfile

import torch
from transformers import TrainingArguments

from hf_scratch import ScratchTransfoXLConfig, ScratchTransfoXLLMHeadModel
from hf_scratch.tools.training_transfo_xl import MEMORY_FILE, TransfoXLTrainer, segment_dataset


class RecordingSegments(torch.utils.data.Dataset):
    def __init__(self, dataset):
        self.dataset, self.seen = dataset, []

    def __len__(self):
        return len(self.dataset)

    def __getitem__(self, index):
        self.seen.append(index)
        return self.dataset[index]


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = ScratchTransfoXLLMHeadModel(
        ScratchTransfoXLConfig(
            vocab_size=50,
            cutoffs=[],
            hidden_size=16,
            embedding_size=16,
            num_hidden_layers=1,
            num_attention_heads=2,
            head_dim=8,
            intermediate_size=32,
            mem_len=16,
            clamp_len=-1,
            same_length=False,
        )
    )
    data = RecordingSegments(segment_dataset(torch.arange(16 * 40) % 50, 16))
    output_dir = os.environ.get("CHECK_OUTPUT_DIR", os.path.join(tempfile.gettempdir(), "transfo_xl_ddp_check"))
    args = TrainingArguments(
        output_dir=output_dir,
        per_device_train_batch_size=2,
        max_steps=10,
        report_to=[],
        use_cpu=True,
        disable_tqdm=True,
        save_strategy="steps",
        save_steps=5,
        ddp_find_unused_parameters=False,
        logging_steps=100,
    )
    TransfoXLTrainer(model=model, args=args, train_dataset=data).train()
    rank, world = args.process_index, args.world_size
    assert world == 2, f"run with torchrun --nproc_per_node 2 (got world size {world})"
    first_streams = (0, 10) if rank == 0 else (20, 30)
    expected = [stream + step for step in range(10) for stream in first_streams]
    assert data.seen == expected, f"rank {rank} read {data.seen}, expected {expected}"
    assert os.path.exists(os.path.join(output_dir, "checkpoint-5", MEMORY_FILE.format(rank=rank)))
    print(f"rank {rank}: ok — streams {first_streams} read in order, memory saved per rank", flush=True)


if __name__ == "__main__":
    main()
