"""Train the toy model: a small GPT-2 learning agreement from the synthetic corpus, on a CPU, in seconds.

:func:`train_toy` generates the corpus (:mod:`verbeval.acquisition.toy.corpus`), builds a word-level
tokenizer from it (:mod:`verbeval.core.wordtok`: every word one token, so every planted verb form
is one token and every planted lexicon lemma is eligible), initialises a GPT-2 from scratch
(:class:`TrainSpec`: 2 layers, hidden size 64, no dropout) and trains it with the ``transformers``
``Trainer`` on the CPU, one sentence per example (no BOS token: the model reads a context as the
workflow gives it, :func:`verbeval.agreement.data.templates.render_context`), saving the model at the
steps listed (log-spaced by default, two a doubling: :data:`DEFAULT_CHECKPOINTS`). Step 0, the initialisation, is
saved only when listed.

The output folder ``OUT`` holds

- ``step-<N>/``: one ordinary Hugging Face model folder per checkpoint (``config.json``,
  ``model.safetensors``, the tokenizer files and :data:`TOY_RECORD`, the record naming it a toy
  model, its seed and step): a local model path for ``models:``/``revisions:``;
- ``corpus.txt``: the training sentences, one a line;
- ``corpus_lemmas.csv``: the planted lemmas (lemma, sing, plur, rank, planted verb-slot count,
  count of every occurrence of its forms, zipf, from_templates);
- ``corpus_frequencies.csv``: ``lemma,count,zipf`` of the same, then of every other lexicon lemma
  whose two forms are words of the corpus (eligible for the toy tokenizer too: nouns of the frames
  such as ``guards``, verbs of BLiMP contexts), the frequency file of the acquisition analysis
  (:func:`verbeval.acquisition.toy.corpus.corpus_frequencies`);
- ``training.json``: seed, steps, checkpoints, corpus and model sizes, library versions and the
  note that this is a toy model trained on synthetic data.

The folder is built beside ``OUT`` and renamed into place when complete. The same inputs, seed and
thread count give the same files on one machine (weights byte-identical: seeded initialisation and
data order, deterministic torch algorithms, no dropout); another machine or library version may
round differently.
"""

from __future__ import annotations

import math
import platform
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from verbeval.acquisition.toy.spec import CorpusSpec
from verbeval.core.errors import VerbevalError

if TYPE_CHECKING:  # pandas, torch and the corpus are imported where used: `verbeval --help` stays light
    import pandas as pd

    from verbeval.acquisition.toy.corpus import ToyCorpus


def log_spaced(steps: int, first: int = 32, per_octave: int = 2) -> tuple[int, ...]:
    """``first`` x 2^(k / ``per_octave``) for k = 0, 1, ..., rounded half up, below ``steps``; then
    ``steps`` (with the defaults: 32, 45, 64, 91, 128, 181, 256, 362, 512 for 512 steps)."""
    out: list[int] = []
    k = 0
    while (s := math.floor(first * 2 ** (k / per_octave) + 0.5)) < steps:
        if not out or s > out[-1]:
            out.append(s)
        k += 1
    return (*out, steps)


#: the default number of training steps (one pass over the default corpus of 16,384 sentences in
#: batches of 32) and the checkpoints saved by default
DEFAULT_STEPS = 512
DEFAULT_CHECKPOINTS: tuple[int, ...] = log_spaced(DEFAULT_STEPS)
#: the record in every checkpoint folder that names it a toy model
TOY_RECORD = "verbeval_toy.json"
TOY_NOTE = (
    "toy model: a small GPT-2 trained from scratch on a synthetic agreement corpus (verbeval train-toy); "
    "its numbers are a toy model's, not a language model's"
)


def _schema_default(key: str) -> Any:
    from verbeval.core.schema import schema_default

    return schema_default(key)


@dataclass(frozen=True)
class TrainSpec:
    """The model and its training: sizes, optimisation, checkpoints, seed and threads."""

    #: toy_models[].seed's default (the schema's, read when a spec is made)
    seed: int = field(default_factory=lambda: _schema_default("toy_models[].seed"))
    steps: int = DEFAULT_STEPS
    checkpoints: tuple[int, ...] = DEFAULT_CHECKPOINTS
    batch_size: int = 32
    learning_rate: float = 1e-3
    warmup_steps: int = 16
    layers: int = 2
    hidden: int = 64
    heads: int = 2
    #: torch CPU threads: toy_models[].threads' default (the schema's, read when a spec is made)
    threads: int = field(default_factory=lambda: _schema_default("toy_models[].threads"))
    corpus: CorpusSpec = field(default_factory=CorpusSpec)

    def check(self) -> None:
        """Raise :class:`VerbevalError` naming the first bad setting."""
        if self.steps < 1:
            raise VerbevalError(f"--steps must be at least 1, not {self.steps}")
        bad = [s for s in self.checkpoints if not 0 <= s <= self.steps]
        if bad:
            raise VerbevalError(f"--checkpoints: step(s) {bad} outside 0..{self.steps} (--steps)")
        if not self.checkpoints:
            raise VerbevalError("--checkpoints: no step given")
        if self.hidden % self.heads:
            raise VerbevalError(f"--hidden {self.hidden} must be a multiple of --heads {self.heads}")
        for name in ("batch_size", "layers", "hidden", "heads", "threads"):
            if getattr(self, name) < 1:
                raise VerbevalError(f"--{name.replace('_', '-')} must be at least 1, not {getattr(self, name)}")


def parse_checkpoints(text: str) -> tuple[int, ...]:
    """``"8,16,32"`` -> (8, 16, 32), sorted and de-duplicated; a bad item raises VerbevalError."""
    steps: set[int] = set()
    for item in text.split(","):
        item = item.strip()
        if not item.isdigit():
            raise VerbevalError(f"--checkpoints {text!r}: {item!r} is not a step (a whole number >= 0)")
        steps.add(int(item))
    return tuple(sorted(steps))


def _encode(tokenizer: Any, sentences: Sequence[str]) -> dict[str, Any]:
    """input_ids, attention_mask and labels of every sentence + EOS, right-padded with EOS."""
    import torch

    ids = tokenizer(list(sentences), add_special_tokens=False)["input_ids"]
    eos = tokenizer.eos_token_id
    width = max(len(x) for x in ids) + 1
    input_ids = torch.full((len(ids), width), eos, dtype=torch.long)
    labels = torch.full((len(ids), width), -100, dtype=torch.long)
    mask = torch.zeros((len(ids), width), dtype=torch.long)
    for i, x in enumerate(ids):
        row = torch.tensor([*x, eos], dtype=torch.long)
        input_ids[i, : len(row)] = row
        labels[i, : len(row)] = row
        mask[i, : len(row)] = 1
    return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


class _Sentences:
    """A map-style dataset of the encoded sentences (what the Trainer's data loader reads)."""

    def __init__(self, tensors: dict[str, Any]) -> None:
        self.tensors = tensors

    def __len__(self) -> int:
        return int(self.tensors["input_ids"].shape[0])

    def __getitem__(self, i: int) -> dict[str, Any]:
        return {k: v[i] for k, v in self.tensors.items()}


def _versions() -> dict[str, str]:
    import numpy
    import pandas as pd
    import tokenizers
    import torch
    import transformers

    from verbeval import __version__

    return {
        "python": platform.python_version(),
        "verbeval": __version__,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": numpy.__version__,
        "pandas": pd.__version__,
    }


def train_toy(
    templates: pd.DataFrame, lexicon: pd.DataFrame, out: str | Path, spec: TrainSpec, *, progress: bool = True
) -> Path:
    """Generate the corpus, train the toy model and write ``out`` (see the module docstring)."""
    import torch

    from verbeval.acquisition.toy.corpus import generate_corpus
    from verbeval.core.io import temporary_folder
    from verbeval.core.outfolders import check_replaceable, replace_folder

    spec.check()
    out = Path(out)
    check_replaceable(out, "train-toy")  # before any training
    corpus = generate_corpus(lexicon, templates, spec.corpus)

    old_threads = torch.get_num_threads()
    old_deterministic = torch.are_deterministic_algorithms_enabled()
    try:
        torch.set_num_threads(spec.threads)
        torch.use_deterministic_algorithms(True)
        with temporary_folder(out.parent, f".{out.name}.tmp-", "an interrupted train-toy") as tmp:
            built = tmp / "out"
            _train(corpus, lexicon, built, tmp / "trainer", spec, progress)
            replace_folder(built, out, "train-toy")
    finally:
        torch.set_num_threads(old_threads)
        torch.use_deterministic_algorithms(old_deterministic)
    return out


def _train(
    corpus: ToyCorpus, lexicon: pd.DataFrame, built: Path, scratch: Path, spec: TrainSpec, progress: bool
) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainerCallback, TrainingArguments, set_seed

    from verbeval.acquisition.toy.corpus import corpus_frequencies
    from verbeval.core.io import write_csv, write_json, write_text
    from verbeval.core.wordtok import build_word_tokenizer

    built.mkdir(parents=True)
    write_text(built / "corpus.txt", "".join(s + "\n" for s in corpus.sentences))
    tokenizer = build_word_tokenizer([built / "corpus.txt"], "causal")
    set_seed(spec.seed)
    data = _encode(tokenizer, corpus.sentences)
    model = GPT2LMHeadModel(
        GPT2Config(
            vocab_size=len(tokenizer),
            n_embd=spec.hidden,
            n_layer=spec.layers,
            n_head=spec.heads,
            n_positions=max(64, int(data["input_ids"].shape[1])),
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id,
        )
    )
    wanted = set(spec.checkpoints)

    def save(step: int) -> None:
        folder = built / f"step-{step}"
        model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        record = {"toy_model": True, "seed": spec.seed, "step": step, "note": TOY_NOTE}
        write_json(folder / TOY_RECORD, record)

    class SaveAtSteps(TrainerCallback):  # type: ignore[misc]
        def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            if state.global_step in wanted:
                save(state.global_step)

    if 0 in wanted:
        save(0)
    args = TrainingArguments(
        output_dir=str(scratch),
        max_steps=spec.steps,
        per_device_train_batch_size=spec.batch_size,
        learning_rate=spec.learning_rate,
        warmup_steps=spec.warmup_steps,
        lr_scheduler_type="constant_with_warmup",
        weight_decay=0.0,
        logging_steps=max(1, spec.steps // 8),
        save_strategy="no",
        report_to=[],
        use_cpu=True,
        seed=spec.seed,
        data_seed=spec.seed,
        dataloader_num_workers=0,
        disable_tqdm=not progress,
    )
    trainer = Trainer(model=model, args=args, train_dataset=_Sentences(data), callbacks=[SaveAtSteps()])
    trainer.train()
    losses = [round(float(e["loss"]), 6) for e in trainer.state.log_history if "loss" in e]
    lemmas = corpus.lemmas
    write_csv(lemmas, built / "corpus_lemmas.csv")
    write_csv(corpus_frequencies(corpus, lexicon), built / "corpus_frequencies.csv")
    write_json(
        built / "training.json",
        {
            "note": TOY_NOTE,
            "seed": spec.seed,
            "steps": spec.steps,
            "checkpoints": sorted(wanted),
            "train": {k: v for k, v in asdict(spec).items() if k not in ("corpus", "seed", "checkpoints")},
            "corpus": {
                **{k: (dict(v) if k == "weights" else v) for k, v in asdict(spec.corpus).items() if k != "seed"},
                "sentences": len(corpus.sentences),
                "words": int(sum(len(s.split()) for s in corpus.sentences)),
                "lemmas": len(lemmas),
                "vocabulary": len(tokenizer),
                "groups": {g: int(n) for g, n in corpus.slots["group"].value_counts().sort_index().items()},
            },
            "model": {"arch": "gpt2", "parameters": int(sum(p.numel() for p in model.parameters()))},
            "losses": losses,
            "versions": _versions(),
            "torch_threads": torch.get_num_threads(),
        },
    )


def read_inputs(templates_path: str | Path, lexicon_path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The template table and lexicon as the workflow writes them (Parquet)."""
    import pandas as pd

    from verbeval.core.errors import InputError

    frames = []
    for path in (templates_path, lexicon_path):
        try:
            frames.append(pd.read_parquet(path))
        except FileNotFoundError:
            raise InputError(path, "file not found") from None
        except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
            raise InputError(path, f"not a Parquet table ({type(exc).__name__}: {str(exc).splitlines()[0]})") from None
    templates, lexicon = frames
    need = {"group", "left", "right", "correct", "incorrect", "plural"}
    missing = sorted(need - set(templates.columns))
    if missing:
        raise InputError(templates_path, f"not a template table: no column(s) {', '.join(missing)}")
    missing = sorted({"lemma", "sing", "plur"} - set(lexicon.columns))
    if missing:
        raise InputError(lexicon_path, f"not a lexicon: no column(s) {', '.join(missing)}")
    return templates, lexicon
