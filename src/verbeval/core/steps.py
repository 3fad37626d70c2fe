"""A workflow step's settings, declared once (:class:`Step`).

A step is one ``verbeval`` sub-command that a rule runs. Its settings are configuration keys
(:class:`Setting`: the key, the option that carries it, the option's type and help); the schema
holds each key's default and description, once. From one :class:`Step` come:

- the command's options (:meth:`Step.add_options`, defaults read from the schema when used);
- the rule's command-line words for a configuration (:meth:`Step.argv`), which the rule and the
  queue jobs both run (:mod:`verbeval.workflow.model_steps`);
- the DVC params of its rules (:meth:`Step.config_keys`: ``verbeval dvc-yaml``);
- the in-process API's defaults (:meth:`Step.default`).

``tests/test_steps.py`` fails when a declared setting's option, default or configuration key is
written a second time elsewhere.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any


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

    def add_options(self, parser: argparse.ArgumentParser) -> None:
        """Every setting's option, its default the schema's."""
        for s in self.settings:
            s.add_to(parser)

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
        from verbeval.core.config import schema_default

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


def bootstrap_settings(prefix: str) -> tuple[Setting, ...]:
    """The bootstrap settings under configuration key ``prefix`` (``agreement.bootstrap``, ``simverb.bootstrap``)."""
    return (
        Setting(f"{prefix}.resamples", "--resamples", int, "bootstrap resamples"),
        Setting(f"{prefix}.seed", "--seed", int, "bootstrap seed (numpy.random.default_rng)"),
        Setting(f"{prefix}.confidence", "--confidence", float, "confidence level of the bootstrap CIs"),
    )
