"""A revision's weights read into the module an earlier revision built (issue 54,
verbeval.core.weight_swap): the model is the one from_pretrained builds, byte for byte, and whatever
does not fit exactly is built as before."""

from __future__ import annotations

import json
import logging
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from verbeval.core.errors import VerbevalError  # noqa: E402
from verbeval.core.model_sources.source import ModelSource  # noqa: E402
from verbeval.core.models import load_model  # noqa: E402
from verbeval.core.prefetch import LoadRequest, Prefetcher  # noqa: E402
from verbeval.core.tiny_models import make_tiny_model  # noqa: E402
from verbeval.core.wordtok import save_word_tokenizer  # noqa: E402

WORDS = "the dog walks the dogs walk the author writes the cats eat near a door and they swim"


@pytest.fixture(scope="module")
def revisions(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Path]]:
    """Three revisions (seeds 1, 2, 3) of a tiny GPT-2 and of a tiny BERT on a word-level tokenizer."""
    root = tmp_path_factory.mktemp("swap")
    corpus = root / "corpus.txt"
    corpus.write_text(WORDS + "\n")
    out: dict[str, list[Path]] = {}
    for arch, style in (("gpt2", "causal"), ("bert", "masked")):
        tok = save_word_tokenizer([corpus], style, root / f"tok-{arch}")  # type: ignore[arg-type]
        out[arch] = [
            make_tiny_model(tok, arch, root / f"{arch}-step-{seed}", seed=seed, layers=2, hidden=16)
            for seed in (1, 2, 3)
        ]
    return out


def _request(folder: Path, **kw: object) -> LoadRequest:
    return LoadRequest(ModelSource.of(str(folder)), kind="auto", dtype="float32", device="cpu", **kw)  # type: ignore[arg-type]


def _state(model: torch.nn.Module) -> dict[str, bytes]:
    """Every parameter and buffer (persistent or not) as bytes, by name (tied ones under each name)."""
    named = [*model.named_parameters(remove_duplicate=False), *model.named_buffers(remove_duplicate=False)]
    return {name: t.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes() for name, t in named}


def _forward(lm: object) -> bytes:
    ids = lm.tokenizer("the dog walks near the door", return_tensors="pt")  # type: ignore[attr-defined]
    with torch.no_grad():
        return lm.model(**ids).logits.numpy().tobytes()  # type: ignore[attr-defined]


def _sweep(folders: list[Path], prefetch: Prefetcher) -> list[tuple[object, dict[str, bytes], bytes]]:
    """The models of ``folders`` taken one after another as a queue takes them (each released when
    its step is done), with their state and a forward output read while taken."""
    requests = [_request(f) for f in folders]
    prefetch.announce(requests)
    seen = []
    for r in requests:
        lm = prefetch.take(r)
        seen.append((lm.model, _state(lm.model), _forward(lm)))
        prefetch.release(lm)
    return seen


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_a_swapped_revision_is_the_model_from_pretrained_builds(
    revisions: dict[str, list[Path]], arch: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The third revision goes into the first's module (the second was built while the first
    computed); every parameter and buffer and the logits equal a fresh load's, byte for byte, and
    differ from the revision whose module it reused."""
    folders = revisions[arch]
    prefetch = Prefetcher()
    with caplog.at_level(logging.INFO, logger="verbeval"):
        seen = _sweep(folders, prefetch)
    prefetch.close()
    assert seen[2][0] is seen[0][0]  # the first revision's module, its weights replaced
    assert seen[1][0] is not seen[0][0]
    for folder, (_, state, logits) in zip(folders, seen, strict=True):
        fresh = load_model(str(folder), dtype="float32", device="cpu")
        assert state == _state(fresh.model)
        assert logits == _forward(fresh)
    assert seen[2][1] != seen[0][1] and seen[2][2] != seen[0][2]
    lines = [r.getMessage() for r in caplog.records]
    built = [line for line in lines if "module built (from_pretrained) in" in line]
    swapped = [line for line in lines if "weights swapped into the built module in" in line]
    assert [line.split(":")[0] for line in built] == [str(folders[0]), str(folders[1])]
    assert [line.split(":")[0] for line in swapped] == [str(folders[2])]


def test_weights_copied_in_by_load_state_dict_are_the_same(
    revisions: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """On another device than the CPU the mapped tensors are copied in with
    load_state_dict(strict=True): the same model."""
    from verbeval.core import weight_swap

    monkeypatch.setattr(weight_swap, "_on_cpu", lambda tensors: False)
    folders = revisions["gpt2"]
    prefetch = Prefetcher()
    seen = _sweep(folders, prefetch)
    prefetch.close()
    assert seen[2][0] is seen[0][0]
    fresh = load_model(str(folders[2]), dtype="float32", device="cpu")
    assert (seen[2][1], seen[2][2]) == (_state(fresh.model), _forward(fresh))


def test_the_swapped_model_is_named_after_its_own_folder(revisions: dict[str, list[Path]]) -> None:
    folders = revisions["gpt2"]
    prefetch = Prefetcher()
    prefetch.announce([_request(f) for f in folders])
    for f in folders:
        lm = prefetch.take(_request(f))
        assert (lm.model_id, lm.model.config.name_or_path) == (str(f), str(f))
        prefetch.release(lm)
    prefetch.close()


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def test_what_does_not_fit_exactly_is_built(
    revisions: dict[str, list[Path]], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another config value (dropout: the same tensors), weights in a .bin file, a model still held
    by a step that did not release it: each is built by from_pretrained, and equals a fresh load. A
    weights file missing a tensor is not swapped, and from_pretrained's load refuses it (scored, the
    tensor would be newly initialised: verbeval.core.load_report)."""
    first, second = revisions["gpt2"][:2]
    dropout = _copy(second, tmp_path / "dropout")
    cfg = json.loads((dropout / "config.json").read_text())
    cfg["resid_pdrop"] = 0.2
    (dropout / "config.json").write_text(json.dumps(cfg))
    binary = _copy(second, tmp_path / "bin")
    from safetensors.torch import load_file, save_file

    torch.save(load_file(str(binary / "model.safetensors")), binary / "pytorch_model.bin")
    (binary / "model.safetensors").unlink()
    missing = _copy(second, tmp_path / "missing")

    weights = load_file(str(missing / "model.safetensors"))
    weights.pop("transformer.h.1.mlp.c_proj.bias")
    save_file(weights, str(missing / "model.safetensors"), metadata={"format": "pt"})
    renamed = _copy(second, tmp_path / "renamed")  # the same config, but its path recorded (ignored)
    cfg = json.loads((renamed / "config.json").read_text())
    cfg["_name_or_path"], cfg["transformers_version"] = "/elsewhere", "0.0.1"
    (renamed / "config.json").write_text(json.dumps(cfg))

    for other, swapped in ((dropout, False), (binary, False), (renamed, True)):
        prefetch = Prefetcher()
        lm = prefetch.take(_request(first))
        prefetch.release(lm)
        with caplog.at_level(logging.INFO, logger="verbeval"):
            new = prefetch.take(_request(other))
        assert (new.model is lm.model) is swapped, other.name
        fresh = _request(other).load()  # seeded as the queue's load: what from_pretrained fills in is the same
        assert _state(new.model) == _state(fresh.model), other.name
        prefetch.close()
    prefetch = Prefetcher()
    lm = prefetch.take(_request(first))
    prefetch.release(lm)
    with caplog.at_level(logging.INFO, logger="verbeval"), pytest.raises(VerbevalError) as refused:
        prefetch.take(_request(missing))
    prefetch.close()
    assert f"{missing}: weights not swapped (['transformer.h.1.mlp.c_proj.bias']: 0 tensors in the files): built" in (
        caplog.text
    )
    assert str(refused.value) == (
        f"cannot load model '{missing}': its checkpoint lacks 1 tensor(s) of the model "
        "(transformer.h.1.mlp.c_proj.bias); scored, they would be random (newly initialised) weights; "
        "download or save the model again"
    )


def test_a_model_not_released_is_never_swapped_into(revisions: dict[str, list[Path]]) -> None:
    """Without release (a single command; a step still using it), each model is built: the weights
    of a model in use never change."""
    folders = revisions["gpt2"]
    prefetch = Prefetcher()
    held = [prefetch.take(_request(f)) for f in folders]
    prefetch.close()
    states = [_state(lm.model) for lm in held]
    assert len({id(lm.model) for lm in held}) == 3
    for f, state in zip(folders, states, strict=True):
        assert state == _state(load_model(str(f), dtype="float32", device="cpu").model)
    # releasing a model this prefetcher did not load releases nothing
    other = Prefetcher()
    other.release(held[0])
    assert other.take(_request(folders[1])).model is not held[0].model


def _counting_tokenizer_loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The folders whose tokenizer :func:`verbeval.core.models.load_tokenizer` loads from now on."""
    from verbeval.core import models

    loads: list[str] = []
    real = models.load_tokenizer

    def counted(source):  # type: ignore[no-untyped-def]
        loads.append(str(ModelSource.of(source).id))
        return real(source)

    monkeypatch.setattr(models, "load_tokenizer", counted)
    return loads


def test_a_swapped_revision_reuses_the_tokenizer_of_the_same_files(
    revisions: dict[str, list[Path]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 63: the tokenizer is loaded for the two built revisions, not for the swapped one, whose
    tokenizer files are the same bytes: it gets the first revision's tokenizer, which encodes as a
    fresh load of its own folder does; its identity (tokenizer key, case, revision) is its own."""
    from verbeval.core.models import load_tokenizer, model_fingerprint

    folders = revisions["gpt2"]
    loads = _counting_tokenizer_loads(monkeypatch)
    prefetch = Prefetcher()
    requests = [_request(f) for f in folders]
    prefetch.announce(requests)
    taken = []
    for r in requests:
        lm = prefetch.take(r)
        taken.append((lm, lm.tokenizer("the dogs walk near a door")["input_ids"]))
        prefetch.release(lm)
    prefetch.close()
    assert loads == [str(folders[0]), str(folders[1])]
    (first, ids1), _, (third, ids3) = taken
    assert third.model is first.model and third.tokenizer is first.tokenizer
    fresh = load_tokenizer(str(folders[2]))
    assert ids3 == ids1 == fresh("the dogs walk near a door")["input_ids"]
    assert third.tokenizer_key == first.tokenizer_key is not None
    assert third.revision == model_fingerprint(str(folders[2])) != first.revision


def test_a_tokenizer_changed_in_place_or_other_files_are_loaded_again(
    revisions: dict[str, list[Path]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A released model whose tokenizer a step changed (its padding side) is still swapped into, but
    its tokenizer is not reused: loaded again, as loaded. A revision with another tokenizer file (the
    same config.json) gets its own tokenizer, with that file's setting."""
    first, second = revisions["gpt2"][:2]
    loads = _counting_tokenizer_loads(monkeypatch)
    prefetch = Prefetcher()
    lm = prefetch.take(_request(first))
    side = lm.tokenizer.padding_side
    lm.tokenizer.padding_side = "left" if side == "right" else "right"
    prefetch.release(lm)
    with caplog.at_level(logging.INFO, logger="verbeval"):
        new = prefetch.take(_request(second))
    prefetch.close()
    assert new.model is lm.model and new.tokenizer is not lm.tokenizer
    assert new.tokenizer.padding_side == side
    assert loads == [str(first), str(second)]
    assert f"{second}: the tokenizer of {first} was changed since its load: loaded again" in caplog.text

    other = _copy(second, tmp_path / "other-tokenizer")
    cfg = other / "tokenizer_config.json"
    cfg.write_text(json.dumps({**json.loads(cfg.read_text()), "model_max_length": 77}))
    prefetch = Prefetcher()
    lm = prefetch.take(_request(first))
    prefetch.release(lm)
    new = prefetch.take(_request(other))
    prefetch.close()
    assert new.model is lm.model and new.tokenizer is not lm.tokenizer
    assert (new.tokenizer.model_max_length, new.tokenizer_key != lm.tokenizer_key) == (77, True)
    assert loads[-2:] == [str(first), str(other)]


def test_simverb_gives_the_tokenizer_back_as_it_was(revisions: dict[str, list[Path]]) -> None:
    """SimVerb pads its frames on the right with EOS (no pad token): the tokenizer is given back with
    the state it was loaded with, so a queue may reuse it for the next revision."""
    from verbeval.core.models import load_tokenizer, reusable_tokenizer
    from verbeval.simverb.vectors import verb_token_spans

    tok = load_tokenizer(str(revisions["gpt2"][0]))
    before = (tok.pad_token, tok.padding_side)
    tok.padding_side = "left"  # a padding side of its own (as loaded: reusable no more)
    assert not reusable_tokenizer(tok)
    tok.padding_side = before[1]
    enc, spans = verb_token_spans(tok, ["walks", "eat"], "the dog {verb}")
    assert enc["input_ids"].shape[0] == 2 and all(spans)
    assert (tok.pad_token, tok.padding_side) == before
    assert tok.backend_tokenizer.padding is None
    assert reusable_tokenizer(tok)
