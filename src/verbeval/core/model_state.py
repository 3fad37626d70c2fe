"""A caller's model, borrowed for scoring and handed back exactly as it came.

:func:`borrowed` puts every submodule in eval mode (and the model on ``device``) for the block, then
restores each submodule's own ``training`` flag (a frozen block in eval mode inside a model in train
mode stays so, and the reverse), every parameter's ``requires_grad``, and, when the block moved the
model, every parameter's and buffer's device (a model split across devices is split again as it was).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def borrowed(model: Any, device: Any = None) -> Iterator[Any]:
    """The block runs with ``model`` in eval mode, on ``device`` when given; everything restored after."""
    modes = [(m, m.training) for m in model.modules()]
    grads = [(p, p.requires_grad) for p in model.parameters()]
    places = [
        (module, slot, name, tensor.device)
        for module in model.modules()
        for slot in ("_parameters", "_buffers")
        for name, tensor in getattr(module, slot).items()
        if tensor is not None
    ]
    moved = device is not None and any(where != device for *_, where in places)
    try:
        if moved:
            model.to(device)
        model.eval()
        yield model
    finally:
        if moved:
            for module, slot, name, where in places:
                tensor = getattr(module, slot)[name]
                if tensor.device != where:
                    if slot == "_parameters":  # the same Parameter object (optimisers hold it)
                        tensor.data = tensor.data.to(where)
                        if tensor.grad is not None:
                            tensor.grad = tensor.grad.to(where)
                    else:
                        module._buffers[name] = tensor.to(where)
        for module, training in modes:
            module.training = training
        for param, requires_grad in grads:
            param.requires_grad_(requires_grad)
