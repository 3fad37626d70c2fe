"""The checkpoint shapes of the bench's sweep part (``verbeval bench --sweep-size``), apart from
:mod:`verbeval.bench.sweep` so that the command line declares its choices without importing torch."""

from __future__ import annotations

from typing import Any

#: the checkpoints' shapes (``--sweep-size``): architecture, layers, hidden size, heads and the shared
#: tokenizer (``shared/tokenizers/<name>``, its real vocabulary); random weights, seeded per revision.
#: ``gpt2-small`` is GPT-2 small's (124M parameters, 0.5 GB in float32), ``pythia-160m`` Pythia-160M's
#: (GPT-NeoX); their position tables are the tiny factory's (128 and 512 rows)
SWEEP_SIZES: dict[str, dict[str, Any]] = {
    "tiny": {"arch": "gpt2", "layers": 2, "hidden": 32, "heads": 2, "tokenizer": "gpt2"},
    "gpt2-small": {"arch": "gpt2", "layers": 12, "hidden": 768, "heads": 12, "tokenizer": "gpt2"},
    "pythia-160m": {"arch": "gpt-neox", "layers": 12, "hidden": 768, "heads": 12, "tokenizer": "gpt_neox_olmo1"},
}
