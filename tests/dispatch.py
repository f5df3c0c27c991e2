"""What a computation runs underneath: the aten operators it dispatches, for tests that assert a kernel runs once
(or not at all), and that a bad input is refused before any layer computes."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from torch.utils._python_dispatch import TorchDispatchMode


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.ops = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.append(func)
        return func(*args, **(kwargs or {}))


def dispatched_ops(fn: Callable[[], object]) -> list:
    """Run ``fn`` and return the aten operators it dispatched, in order (forward and any backward it runs)."""
    with _Recorder() as recorder:
        fn()
    return recorder.ops


# What computes a layer: an embedding lookup, a product, a norm, a softmax, an attention or recurrent kernel
COMPUTING = re.compile(
    r"embedding|mm|addmm|bmm|baddbmm|linear|matmul|native_layer_norm|_softmax|_log_softmax|.*scaled_dot_product.*"
    r"|.*flash.*|flex_attention|lstm|gru|rnn_tanh|rnn_relu|_thnn_fused_.*_cell|conv.*"
)


@contextmanager
def recording_ops() -> Iterator[list]:
    """The aten operators dispatched inside the ``with`` block, in order; kept when the block raises."""
    with _Recorder() as recorder:
        yield recorder.ops


def computing(ops: list) -> list[str]:
    """The names of the operators among ``ops`` that compute a layer (``COMPUTING``): none when an input was
    refused at the edge, before any kernel ran."""
    return sorted({name for op in ops if COMPUTING.fullmatch(name := op.overloadpacket.__name__)})
