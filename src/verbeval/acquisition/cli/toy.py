"""The toy-model sub-command: ``train-toy`` (:mod:`verbeval.acquisition.toy.training`)."""

from __future__ import annotations

import argparse
import logging

from verbeval.acquisition.steps import TRAIN_TOY
from verbeval.acquisition.toy.spec import DEFAULT_WEIGHTS, CorpusSpec
from verbeval.acquisition.toy.training import TrainSpec
from verbeval.core.cliutil import Add, ConfigDefault, check_outputs
from verbeval.core.steps import NO_PROGRESS, THREADS, Option, add_options

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
        group="user",
    )
    add_options(
        s,
        TRAIN_TOY.file("--templates"),
        TRAIN_TOY.file("--lexicon"),
        TRAIN_TOY.file("--out"),
        Option(
            "--seed",
            "seed of the corpus, the initialisation and the data order",
            type=int,
            default=ConfigDefault("toy_models[].seed"),
        ),
        Option(
            "--corpus-seed",
            "seed of the corpus alone (default: --seed); seeds of one model share it, so they see the same "
            "corpus and planted frequencies",
            type=int,
            default=None,
        ),
        Option("--steps", "training steps (batches)", type=int, default=TrainSpec.steps),
        Option(
            "--checkpoints",
            "steps to save, comma-separated, 0 = the initialisation (default: log-spaced, two a doubling from 32 "
            "below --steps, then --steps: 32,45,64,91,128,181,256,362,512 for 512 steps)",
            metavar="N,N,...",
        ),
        Option("--sentences", "corpus size: one planted verb per sentence", type=int, default=CorpusSpec.n_sentences),
        Option(
            "--lemmas",
            "planted lemmas: the templates' verb pairs, then lexicon lemmas",
            type=int,
            default=CorpusSpec.n_lemmas,
        ),
        Option(
            "--zipf",
            "Zipf exponent s: the lemma of rank r gets a share 1/r^s",
            type=float,
            default=CorpusSpec.zipf_exponent,
        ),
        Option(
            "--weights",
            "construction weights replacing the defaults ("
            + ", ".join(f"{g} {w:g}" for g, w in DEFAULT_WEIGHTS.items())
            + "; any other group 1); a weight of 0 leaves a group out of the corpus",
            metavar="GROUP=W,...",
        ),
        Option("--batch-size", "sentences per step", type=int, default=TrainSpec.batch_size),
        Option(
            "--learning-rate",
            "AdamW learning rate (constant after warm-up)",
            type=float,
            default=TrainSpec.learning_rate,
        ),
        Option("--layers", "transformer layers", type=int, default=TrainSpec.layers),
        Option("--hidden", "hidden size (2 attention heads)", type=int, default=TrainSpec.hidden),
        THREADS.but(
            default=ConfigDefault("toy_models[].threads"),
            help="torch CPU threads (part of what makes a run repeatable)",
        ),
        NO_PROGRESS,
    )
