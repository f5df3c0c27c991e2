"""What a computation runs underneath: the aten operators it dispatches, for tests that assert a kernel runs once
(or not at all)."""

from __future__ import annotations

from collections.abc import Callable

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
