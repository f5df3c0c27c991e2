"""``python -m hf_scratch.convert SRC_DIR OUT_DIR``: convert a reference checkpoint directory (``engine.main``)."""

from .engine import main

main()
