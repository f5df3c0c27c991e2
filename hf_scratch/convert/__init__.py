"""The bridge to reference checkpoints: weight maps between hf_scratch models and the transformers (or original)
implementations.

    from_transformers(model)          a transformers model → the hf_scratch model with the same head and weights
    to_transformers(model)            the way back, where transformers still ships the class
    load_reference_checkpoint(path)   a reference checkpoint directory (config.json + weights) → hf_scratch model,
                                      without importing the reference class (transfo-xl has none in transformers 5)
    needs_conversion(model_type)      whether a checkpoint of that model_type goes through load_reference_checkpoint
    REFERENCE_TO_SCRATCH              reference model_type → hf_scratch model_type ({"gpt2": "scratch-gpt", …})
    python -m hf_scratch.convert SRC_DIR OUT_DIR    the same on the command line; also copies tokenizer files

Where to read what:

    engine.py        the weight rules (run both ways), the registry of family conversions, checkpoint I/O, the CLI
    bert.py          bert → scratch-bert            (its encoder rules also serve longformer.py)
    gpt.py           gpt2, openai-gpt → scratch-gpt
    transformer.py   marian → scratch-transformer
    transfo_xl.py    transfo-xl → scratch-transfo-xl
    longformer.py    longformer → scratch-longformer

Each family file holds that family's config translation (both ways, the reference config read as a plain dict so
no reference class is needed; ``FieldNames.of`` derives the renames from the config's ``attribute_map``), its
``WeightMap``, and the ``register_conversion(...)`` call that makes it known.
The configuration/modeling files a checkpoint carries never import this package.
"""

from . import bert, gpt, longformer, transfo_xl, transformer  # noqa: F401  (each registers its conversion)
from .engine import (
    REFERENCE_TO_SCRATCH,
    TOKENIZER_FILES,
    Conversion,
    FieldNames,
    WeightMap,
    WeightRule,
    _conversion_for_reference,  # noqa: F401  (tests reach a reference type's Conversion through it)
    convert_directory,
    from_transformers,
    load_reference_checkpoint,
    main,
    needs_conversion,
    read_reference_weights,
    register_conversion,
    rule,
    to_transformers,
    weight_and_bias,
)

__all__ = [
    "REFERENCE_TO_SCRATCH",
    "TOKENIZER_FILES",
    "Conversion",
    "FieldNames",
    "WeightMap",
    "WeightRule",
    "convert_directory",
    "from_transformers",
    "load_reference_checkpoint",
    "main",
    "needs_conversion",
    "read_reference_weights",
    "register_conversion",
    "rule",
    "to_transformers",
    "weight_and_bias",
]
