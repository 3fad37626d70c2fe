"""verbeval.core.omp_wait: the command lets torch's idle OpenMP threads sleep, unless told otherwise."""

import os
import subprocess
import sys

from verbeval.core.omp_wait import ENV, prefer_passive_wait


def test_sets_passive_when_unset_and_torch_not_loaded():
    env: dict[str, str] = {}
    assert prefer_passive_wait(env, {}) is True
    assert env == {ENV: "PASSIVE"}


def test_keeps_a_set_policy():
    env = {ENV: "ACTIVE"}
    assert prefer_passive_wait(env, {}) is False
    assert env == {ENV: "ACTIVE"}
    env = {ENV: ""}
    assert prefer_passive_wait(env, {}) is False
    assert env == {ENV: ""}


def test_too_late_once_torch_is_loaded():
    env: dict[str, str] = {}
    assert prefer_passive_wait(env, {"torch": object()}) is False
    assert env == {}


def test_the_command_sets_it_before_torch():
    env = {k: v for k, v in os.environ.items() if k != ENV}
    code = "import sys, os; import verbeval.cli; print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["PASSIVE", "False"]
