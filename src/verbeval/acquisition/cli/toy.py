"""The toy-model sub-command: ``train-toy`` (:mod:`verbeval.acquisition.toy.training`)."""

from __future__ import annotations

import argparse
import logging

from verbeval.acquisition.toy.spec import DEFAULT_WEIGHTS, CorpusSpec
from verbeval.acquisition.toy.training import TrainSpec
from verbeval.core.cliutil import Add, ConfigDefault, check_outputs

log = logging.getLogger("verbeval")


def _weights(text: str) -> dict[str, float]:
    """``simple=8,prep=2`` -> {"simple": 8.0, "prep": 2.0}."""
    from verbeval.core.cliutil import split_pair
    from verbeval.core.errors import VerbevalError

    out: dict[str, float] = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, value = split_pair(item, "--weights", "WEIGHT")
        try:
            out[name] = float(value)
        except ValueError:
            raise VerbevalError(f"--weights {item!r}: {value!r} is not a number") from None
    return out


def cmd_train_toy(a: argparse.Namespace) -> None:
    import time

    from verbeval.acquisition.toy.training import log_spaced, parse_checkpoints, read_inputs, train_toy

    check_outputs(a.out)
    templates, lexicon = read_inputs(a.templates, a.lexicon)
    corpus = CorpusSpec(
        seed=a.seed if a.corpus_seed is None else a.corpus_seed,
        n_sentences=a.sentences,
        n_lemmas=a.lemmas,
        zipf_exponent=a.zipf,
        weights={**DEFAULT_WEIGHTS, **_weights(a.weights or "")},
    )
    spec = TrainSpec(
        seed=a.seed,
        steps=a.steps,
        checkpoints=parse_checkpoints(a.checkpoints) if a.checkpoints else log_spaced(a.steps),
        batch_size=a.batch_size,
        learning_rate=a.learning_rate,
        layers=a.layers,
        hidden=a.hidden,
        threads=a.threads,
        corpus=corpus,
    )
    start = time.perf_counter()
    out = train_toy(templates, lexicon, a.out, spec, progress=not a.no_progress)
    log.info(
        "toy model (seed %d, %d steps, checkpoints %s) -> %s in %.1f s",
        a.seed,
        a.steps,
        ",".join(map(str, spec.checkpoints)),
        out,
        time.perf_counter() - start,
    )


def register_train_toy(add: Add) -> None:
    s = add(
        "train-toy",
        cmd_train_toy,
        "train the toy model: a small GPT-2 that learns agreement from a synthetic corpus, on a CPU",
        "The corpus fills the template frames with planted verbs (Zipf-distributed lemma frequencies, graded "
        "constructions; verbeval.acquisition.toy.corpus); the model is saved at log-spaced steps as OUT/step-<N>/ "
        "(ordinary Hugging Face folders), with OUT/corpus_frequencies.csv (lemma,count,zipf), "
        "OUT/corpus_lemmas.csv, OUT/corpus.txt and OUT/training.json. Same inputs, seed and threads: identical "
        "files on one machine. Its numbers are a toy model's (docs/toy_model.md).",
    )
    s.add_argument("--templates", required=True, metavar="PARQUET", help="the template table (templates.parquet)")
    s.add_argument("--lexicon", required=True, metavar="PARQUET", help="the verb lexicon (lexicon.parquet)")
    s.add_argument(
        "--out",
        required=True,
        metavar="DIR",
        help="output folder (built beside it, then renamed into place; an existing folder is replaced only "
        "when it is an earlier train-toy output, else refused)",
    )
    s.add_argument(
        "--seed",
        type=int,
        default=ConfigDefault("toy_models[].seed"),
        help="seed of the corpus, the initialisation and the data order",
    )
    s.add_argument(
        "--corpus-seed",
        type=int,
        default=None,
        help="seed of the corpus alone (default: --seed); seeds of one model share it, so they see the same "
        "corpus and planted frequencies",
    )
    s.add_argument("--steps", type=int, default=TrainSpec.steps, help="training steps (batches)")
    s.add_argument(
        "--checkpoints",
        metavar="N,N,...",
        help="steps to save, comma-separated, 0 = the initialisation (default: log-spaced, two a doubling from 32 "
        "below --steps, then --steps: 32,45,64,91,128,181,256,362,512 for 512 steps)",
    )
    s.add_argument(
        "--sentences", type=int, default=CorpusSpec.n_sentences, help="corpus size: one planted verb per sentence"
    )
    s.add_argument(
        "--lemmas",
        type=int,
        default=CorpusSpec.n_lemmas,
        help="planted lemmas: the templates' verb pairs, then lexicon lemmas",
    )
    s.add_argument(
        "--zipf",
        type=float,
        default=CorpusSpec.zipf_exponent,
        help="Zipf exponent s: the lemma of rank r gets a share 1/r^s",
    )
    s.add_argument(
        "--weights",
        metavar="GROUP=W,...",
        help="construction weights replacing the defaults ("
        + ", ".join(f"{g} {w:g}" for g, w in DEFAULT_WEIGHTS.items())
        + "; any other group 1); a weight of 0 leaves a group out of the corpus",
    )
    s.add_argument("--batch-size", type=int, default=TrainSpec.batch_size, help="sentences per step")
    s.add_argument(
        "--learning-rate",
        type=float,
        default=TrainSpec.learning_rate,
        help="AdamW learning rate (constant after warm-up)",
    )
    s.add_argument("--layers", type=int, default=TrainSpec.layers, help="transformer layers")
    s.add_argument("--hidden", type=int, default=TrainSpec.hidden, help="hidden size (2 attention heads)")
    s.add_argument(
        "--threads",
        type=int,
        default=ConfigDefault("toy_models[].threads"),
        help="torch CPU threads (part of what makes a run repeatable)",
    )
    s.add_argument("--no-progress", action="store_true", help="no progress bar")
