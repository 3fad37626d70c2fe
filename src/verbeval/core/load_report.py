"""What ``from_pretrained`` says about a checkpoint's tensors, as verbeval's own refusal or warning.

transformers builds the model's module and fills it from the checkpoint; a tensor of the module
that the checkpoint lacks is left *newly initialised* (random), and only transformers' load report
(a table on the console) says so. A model scored so gives numbers that look like any other's and
are silently wrong, so a missing tensor is refused (:func:`check_load_report`: a
:class:`~verbeval.core.errors.VerbevalError` naming the checkpoint and the tensors). A tensor the
checkpoint holds and the module does not use (another task's head, e.g. BERT's next-sentence
classifier) changes no score: one WARNING line names them.

Tied weights are no missing tensor: GPT-2's ``lm_head.weight`` is ``transformer.wte.weight``, BERT's
``cls.predictions.decoder`` is its word embeddings and ``cls.predictions.bias``, and a checkpoint
holds one of each pair. transformers (5) reports a tied key missing only when both are absent; a key
tied (``all_tied_weights_keys``/``_tied_weights_keys``) to a key that is not missing is left out
here too. Non-persistent buffers (``position_ids``, rotary frequencies) are never in a checkpoint
nor in the report.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from verbeval.core.errors import VerbevalError

log = logging.getLogger("verbeval")

#: how many tensor names a message lists (then "and N more")
SHOWN = 5


def _names(keys: Iterable[str]) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - SHOWN} more" if len(keys) > SHOWN else ""
    return ", ".join(keys[:SHOWN]) + more


def tied_pairs(model: Any) -> dict[str, str]:
    """Each tied key of ``model`` with the key it is tied to, both ways round (transformers 5's
    ``all_tied_weights_keys``, else ``_tied_weights_keys`` when it is a mapping)."""
    pairs: dict[str, str] = {}
    for attr in ("all_tied_weights_keys", "_tied_weights_keys"):
        mapping = getattr(model, attr, None)
        if isinstance(mapping, Mapping):
            for target, source in mapping.items():
                pairs.setdefault(str(target), str(source))
                pairs.setdefault(str(source), str(target))
    return pairs


def check_load_report(checkpoint: str, model: Any, info: Mapping[str, Any], what: str = "model") -> None:
    """Refuse a model whose checkpoint lacks tensors of its module (``info``: ``from_pretrained``'s
    loading info, ``output_loading_info=True``); warn once about tensors it holds and the module does
    not use."""
    missing = set(info.get("missing_keys") or ())
    tied = tied_pairs(model)
    missing = {k for k in missing if not (k in tied and tied[k] not in missing)}
    if missing:
        raise VerbevalError(
            f"cannot load {what} {checkpoint!r}: its checkpoint lacks {len(missing)} tensor(s) of the model "
            f"({_names(missing)}); scored, they would be random (newly initialised) weights; "
            "download or save the model again"
        )
    unexpected = set(info.get("unexpected_keys") or ())
    if unexpected:
        log.warning(
            "%s: its checkpoint holds %d tensor(s) the model does not use, ignored (%s)",
            checkpoint,
            len(unexpected),
            _names(unexpected),
        )
