"""A workflow step's settings, declared once (:class:`Step`).

A step is one ``verbeval`` sub-command that a rule runs. Its settings are configuration keys
(:class:`Setting`: the key, the option that carries it, the option's type and help); the schema
holds each key's default and description, once. From one :class:`Step` come:

- the command's options (:meth:`Step.add_options`, defaults read from the schema when used);
- the rule's command-line words for a configuration (:meth:`Step.argv`), which the rule and the
  queue jobs both run (:mod:`verbeval.workflow.model_steps`);
- the DVC params of its rules (:meth:`Step.config_keys`: ``verbeval dvc-yaml``);
- the in-process API's defaults (:meth:`Step.default`).

Its files are declared beside its settings (:class:`Input`, :class:`Output` in :attr:`Step.inputs` and
:attr:`Step.outputs`: option, help, and what argparse needs), and so is every other option of a
command (:class:`Option`, for the tools too): :func:`add_options` is the one place an option is added
to a parser, and ``tests/test_steps.py`` checks that a rule binds each declared file of its step to
its own ``input``/``output``/``params``.

``tests/test_steps.py`` fails when a declared setting's option, default or configuration key is
written a second time elsewhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

#: the choices of ``agreement.bootstrap.cluster`` (docs/metrics.md, "Clustered intervals"; also
#: :data:`verbeval.core.bootstrap.CLUSTERINGS`): here, so that the command line's parser needs no numpy
CLUSTERINGS = ("context", "template", "template_and_lemma", "subject", "verb", "subject_and_verb")


def option_text(value: Any) -> str:
    """A configuration value as an option takes it: a list comma-separated, floats as ``%g``."""
    if isinstance(value, (list, tuple)):
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return str(value)


def config_value(config: Mapping[str, Any], key: str) -> Any:
    """The value of dotted ``key`` in a validated configuration (the schema filled in its defaults)."""
    value: Any = config
    for part in key.split("."):
        value = value[part]
    return value


@dataclass(frozen=True)
class Setting:
    """One configuration key that a step's command takes as an option."""

    key: str  #: dotted configuration key, e.g. ``agreement.bootstrap.resamples``
    option: str  #: the command's option, e.g. ``--resamples``
    #: the option's parser; ``bool``: a flag (the bare option when true, nothing when false)
    type: Callable[[str], Any] = str
    help: str = ""
    #: the values the option accepts (the key's ``enum`` in the schema), None: any its type takes
    choices: tuple[str, ...] | None = None

    def default(self) -> Any:
        """The schema's default of :attr:`key` (the in-process API's)."""
        from verbeval.core.schema import schema_default

        return schema_default(self.key)

    @property
    def dest(self) -> str:
        """The option's attribute name (``--top-cutoffs`` -> ``top_cutoffs``)."""
        return self.option.lstrip("-").replace("-", "_")

    def with_option(self, option: str) -> Setting:
        """The same setting under another command's option name (``infer-forms --batch-size``)."""
        return replace(self, option=option)

    def add_to(self, parser: Any) -> None:
        from verbeval.core.cliutil import ConfigDefault

        if self.type is bool:
            # a flag: store_true whose default is the schema's; its type reads the default's text
            # (``False``), as the help shows it, and is never given a value
            action = parser.add_argument(
                self.option, action="store_true", default=ConfigDefault(self.key), help=self.help
            )
            action.type = flag_text
            return
        # a list default takes the option's own form (its parse of the comma-separated text)
        default = ConfigDefault(self.key, lambda v: self.type(option_text(v)) if isinstance(v, (list, tuple)) else v)
        parser.add_argument(self.option, type=self.type, default=default, choices=self.choices, help=self.help)

    def argv(self, value: Any) -> list[str]:
        """The option for configuration value ``value``: ``--option=value`` (one word: a value that
        starts with ``-`` is not read as an option); a flag's bare option when true; none for a
        flag that is false, or a value that is null (the command's default, the schema's, holds)."""
        if self.type is bool:
            return [self.option] if value else []
        if value is None:
            return []
        return [f"{self.option}={option_text(value)}"]


def flag_text(text: str) -> bool:
    """A flag setting's value as text (``True``, ``false``): its default as the help shows it."""
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


@dataclass(frozen=True)
class Option:
    """One option of a command that is not a configuration key (a name, a count, a flag): what
    argparse needs, declared once and added by :func:`add_options`."""

    option: str  #: the option, e.g. ``--model-name`` (or a positional's name)
    help: str = ""
    required: bool = False
    nargs: int | str | None = None
    metavar: str | None = None
    default: Any = None
    type: Callable[[str], Any] | None = None
    choices: Sequence[Any] | None = None
    #: argparse's action (``store_true``); None: store a value
    action: str | None = None
    #: the attribute name, when it is not the option's own (:attr:`dest`)
    dest_name: str | None = None

    @property
    def dest(self) -> str:
        """The option's attribute name (``--summary-out`` -> ``summary_out``)."""
        return self.dest_name or self.option.lstrip("-").replace("-", "_")

    def but(self, **changes: Any) -> Option:
        """The same option as another command declares it (its own help, default, ...)."""
        return replace(self, **changes)

    def add_to(self, parser: Any) -> Any:
        kwargs: dict[str, Any] = {
            "required": self.required or None,
            "nargs": self.nargs,
            "metavar": self.metavar,
            # a list default: a new one per parser (argparse hands it to the command as it is)
            "default": list(self.default) if isinstance(self.default, list) else self.default,
            "type": self.type,
            "choices": self.choices,
            "action": self.action,
            "dest": self.dest_name,
        }
        kwargs = {k: v for k, v in kwargs.items() if v is not None}
        return parser.add_argument(self.option, help=self.help, **kwargs)


@dataclass(frozen=True)
class Input(Option):
    """A file (or folder) a step reads: required unless declared otherwise."""

    required: bool = True


@dataclass(frozen=True)
class Output(Option):
    """A file (or folder) a step writes: required unless declared otherwise. Its argparse action is
    marked (:data:`verbeval.core.cliutil.OUTPUT_MARK`): a command interrupted by Ctrl-C says which
    of its outputs were written (:func:`verbeval.core.cliutil.interrupted_line`)."""

    required: bool = True

    def add_to(self, parser: Any) -> Any:
        from verbeval.core.cliutil import OUTPUT_MARK

        action = super().add_to(parser)
        setattr(action, OUTPUT_MARK, True)
        return action


#: options that several commands take (each command may give its own help: :meth:`Option.but`)
MODEL_NAME = Option("--model-name", "model name written into the outputs", required=True)
GROUPS = Option("--groups", "comma-separated groups", required=True)
NO_PROGRESS = Option("--no-progress", "no progress bar", action="store_true")
THREADS = Option("--threads", "CPU threads", type=int)


def add_options(parser: Any, *options: Setting | Option) -> None:
    """``options`` added to ``parser`` in order: the one place a declared option becomes argparse's."""
    for o in options:
        o.add_to(parser)


@dataclass(frozen=True, eq=False)
class Step:
    """A ``verbeval`` sub-command as the workflow runs it: its settings and the other configuration
    keys its jobs depend on (``keys``: what selects its inputs, groups and models)."""

    command: str
    settings: tuple[Setting, ...] = ()
    keys: tuple[str, ...] = ()
    #: the rules that run it (their DVC params are :meth:`config_keys`)
    rules: tuple[str, ...] = ()
    #: keys of one of its rules only (a branch that rule's jobs run), after the step's own
    rule_keys: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: rules among :attr:`rules` that run the command without its settings (veridicality's released
    #: pseudo-model: no model runs): their keys are ``keys`` and their :attr:`rule_keys` only
    bare_rules: tuple[str, ...] = ()
    #: the files it reads and writes, as its command's options
    inputs: tuple[Input, ...] = ()
    outputs: tuple[Output, ...] = ()

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """Its inputs' options, every setting's (its default the schema's), then its outputs'."""
        add_options(parser, *self.inputs, *self.settings, *self.outputs)

    @property
    def files(self) -> tuple[Input | Output, ...]:
        return (*self.inputs, *self.outputs)

    def file(self, option: str) -> Input | Output:
        """The declared file of option ``option``."""
        for f in self.files:
            if f.option == option:
                return f
        raise KeyError(f"step {self.command!r} has no file {option!r}")

    def argv(self, config: Mapping[str, Any]) -> list[str]:
        """The settings' options for ``config`` (:func:`settings_argv`)."""
        return settings_argv(self.settings, config)

    def config_keys(self, rule: str | None = None) -> tuple[str, ...]:
        """The configuration keys of the step's rules (of ``rule``: with its :attr:`rule_keys`): ``keys``,
        each setting's, then the rule's own (the DVC params); a key inside another listed one (a
        setting's ``inference.top_k`` beside ``inference``) is left out; a :attr:`bare_rules` rule has
        no settings' keys."""
        settings = () if rule in self.bare_rules else self.settings
        return distinct_keys([*self.keys, *(s.key for s in settings), *self.rule_keys.get(rule or "", ())])

    def setting(self, dest: str) -> Setting:
        for s in self.settings:
            if s.dest == dest:
                return s
        raise KeyError(f"step {self.command!r} has no setting {dest!r}")

    def default(self, dest: str) -> Any:
        """The schema's default of setting ``dest`` (the in-process API's default)."""
        from verbeval.core.schema import schema_default

        return schema_default(self.setting(dest).key)


def settings_argv(settings: Iterable[Setting], config: Mapping[str, Any]) -> list[str]:
    """The options of ``settings`` for ``config`` (a validated configuration), in declaration order
    (:meth:`Setting.argv`: one word each, ``--option=value`` or a flag)."""
    return [word for s in settings for word in s.argv(config_value(config, s.key))]


def distinct_keys(keys: Iterable[str]) -> tuple[str, ...]:
    """``keys`` once each, in order, without a key inside another of them (``inference.top_k`` beside
    ``inference``)."""
    found = dict.fromkeys(keys)
    return tuple(k for k in found if not any(k.startswith(f"{parent}.") for parent in found))


#: the device of the commands that run a model (``run-model``, ``simverb-score``, ``veridicality-predict``)
INFERENCE_DEVICE = Setting(
    "inference.device", "--device", str, "auto (CUDA if available, else CPU), cpu, cuda or cuda:N"
)

#: ``inference.batch_size: auto``: contexts per forward pass on CUDA (large batches keep the GPU
#: busy), and on any other device
AUTO_BATCH_SIZE = {"cuda": 512, "other": 64}


def batch_arg(text: str) -> str:
    """``--batch-size``'s value: a positive integer or ``auto`` (as text: ``auto`` is resolved on the
    loaded model's device, :func:`batch_size_on`)."""
    if text == "auto" or (text.isdigit() and int(text) > 0):
        return text
    raise argparse.ArgumentTypeError(f"expected a positive integer or auto, got {text!r}")


def batch_size_on(value: int | str | None, device_type: str) -> int:
    """Contexts per forward pass on a device of ``device_type`` (``cuda``, ``cpu``) for batch size
    ``value``: a number, ``auto`` (:data:`AUTO_BATCH_SIZE`), or None (``inference.batch_size``'s
    default: the in-process API's)."""
    if value is None:
        value = INFERENCE_BATCH_SIZE.default()
    if value != "auto":
        return int(value)
    return AUTO_BATCH_SIZE["cuda" if device_type == "cuda" else "other"]


@dataclass(frozen=True)
class ModelSetting(Setting):
    """A per-model setting: a key of a ``models`` entry (:attr:`entry`) that the model's job
    (``run-model``, ``infer``) takes as an option. :attr:`key` holds its default: the entry's own
    (``models[].dtype``) or the key the entry falls back to (``inference.batch_size``). On the job's
    command line it is two words, ``--option value`` (:meth:`model_argv`)."""

    entry: str = ""  #: the key in a ``models`` entry, e.g. ``dtype``
    #: the option's value for a null entry (``auto``: the command decides); None: the option is left out
    null: str | None = None

    def model_argv(self, value: Any) -> list[str]:
        """The option for the entry's ``value``: a bool as ``true``/``false``, a mapping as JSON, null
        as :attr:`null` (or nothing)."""
        import json

        if value is None:
            return [] if self.null is None else [self.option, self.null]
        if isinstance(value, bool):
            text = str(value).lower()
        elif isinstance(value, Mapping):
            text = json.dumps(value)
        else:
            text = str(value)
        return [self.option, text]


def _device_map_arg(text: str) -> Any:
    from verbeval.core.devices import parse_device_map
    from verbeval.core.errors import VerbevalError

    try:
        return parse_device_map(text)
    except VerbevalError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--device-map: ")) from None


def _optional_bool(text: str) -> bool | None:
    from verbeval.core.cliutil import optional_bool

    return optional_bool(text)


MODEL_KIND = ModelSetting(
    "models[].kind",
    "--kind",
    str,
    "masked or causal LM; auto reads config.architectures",
    choices=("auto", "masked", "causal"),
    entry="kind",
)
MODEL_DTYPE = ModelSetting(
    "models[].dtype",
    "--dtype",
    str,
    "dtype of the weights; tf32: float32 weights, TF32 matrix products on a CUDA GPU (float32 on a CPU) "
    "(the softmax and all metric arithmetic are float64)",
    choices=("float32", "float16", "bfloat16", "tf32"),
    entry="dtype",
)
MODEL_DEVICE_MAP = ModelSetting(
    "models[].device_map",
    "--device-map",
    _device_map_arg,
    "split the model across devices with accelerate (replaces --device): auto, balanced, "
    "balanced_low_0, sequential, or a JSON object {module: GPU index, cpu, cuda:N or disk}; "
    "default: none (the whole model on --device)",
    entry="device_map",
)
INFERENCE_BATCH_SIZE = ModelSetting(
    "inference.batch_size",
    "--batch-size",
    batch_arg,
    f"contexts per forward pass, or auto ({AUTO_BATCH_SIZE['cuda']} on CUDA, {AUTO_BATCH_SIZE['other']} on CPU); "
    "halved on out-of-memory",
    entry="batch_size",
)
MODEL_PREPEND_BOS = ModelSetting(
    "models[].prepend_bos",
    "--prepend-bos",
    _optional_bool,
    "causal LMs: true, false or auto (follow the tokenizer: BOS only if it adds one itself) (default: auto)",
    entry="prepend_bos",
    null="auto",
)
#: the CPU threads of the commands that run a model (``run-model``, ``infer``, ``simverb-score``,
#: ``veridicality-predict``): no ``models`` key; a model's job gets what Snakemake gives it (its ``threads``)
INFERENCE_THREADS = ModelSetting(
    "inference.threads", "--threads", int, "CPU threads (torch.set_num_threads)", entry="threads"
)
#: the per-model settings of a model's job, in the order of its command line (:func:`model_argv`)
MODEL_SETTINGS = (MODEL_KIND, MODEL_DTYPE, MODEL_DEVICE_MAP, INFERENCE_BATCH_SIZE, INFERENCE_THREADS, MODEL_PREPEND_BOS)


def model_argv(entry: Mapping[str, Any]) -> list[str]:
    """The per-model options of a model's job for its ``models`` entry (with ``threads``: the job's),
    in :data:`MODEL_SETTINGS`' order; a key the entry lacks takes the setting's default."""
    return [word for s in MODEL_SETTINGS for word in s.model_argv(entry[s.entry] if s.entry in entry else s.default())]


def bootstrap_settings(prefix: str) -> tuple[Setting, ...]:
    """The bootstrap settings under configuration key ``prefix`` (``agreement.bootstrap``, ``simverb.bootstrap``)."""
    return (
        Setting(f"{prefix}.resamples", "--resamples", int, "bootstrap resamples"),
        Setting(f"{prefix}.seed", "--seed", int, "bootstrap seed (numpy.random.default_rng)"),
        Setting(f"{prefix}.confidence", "--confidence", float, "confidence level of the bootstrap CIs"),
    )
