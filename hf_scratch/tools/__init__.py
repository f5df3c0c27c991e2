"""What you use around the models, which no checkpoint carries: training helpers (``trainer``: the ``Trainer`` the
training scripts use, with atomic checkpoints; ``training_transfo_xl``: Transformer-XL's streaming trainer;
``pretraining``: BERT's MLM + NSP data), small tokenizers trained with 🤗 tokenizers (``tokenization``), GPT-1's
task input transforms (``gpt_input_transforms``) and pictures (``viz``, ``python -m hf_scratch.tools.viz``).

A sub-package, like ``convert``: transformers copies only the same-directory relative imports of the files a
checkpoint carries for ``trust_remote_code=True``, so none of those files may import from here (these modules may
import them)."""
