"""Pipelines that transformers v5 no longer ships, registered with ``PIPELINE_REGISTRY`` under task names of ours:

- ``"scratch-question-answering"``: extractive question answering (BERT, Longformer);
- ``"scratch-seq2seq"``: sequence-to-sequence generation, e.g. translation (the encoder-decoder Transformer, RNNs).
"""

from __future__ import annotations

# ---- extractive question answering ---------------------------------------------------------------------------

# ---- sequence-to-sequence generation -------------------------------------------------------------------------
