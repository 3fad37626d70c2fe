"""verbeval.core.omp_wait: the command limits libgomp's spinning, unless told otherwise."""

import os
import subprocess
import sys

from verbeval.core.omp_wait import POLICY_ENV, SPIN_ENV, SPINS, limit_spinning


def test_sets_the_spin_count_when_unset_and_torch_not_loaded():
    env: dict[str, str] = {}
    assert limit_spinning(env, {}) is True
    assert env == {SPIN_ENV: SPINS}


def test_keeps_a_set_spin_count_or_wait_policy():
    for given in ({SPIN_ENV: "300000"}, {POLICY_ENV: "ACTIVE"}, {POLICY_ENV: ""}):
        env = dict(given)
        assert limit_spinning(env, {}) is False
        assert env == given


def test_too_late_once_torch_is_loaded():
    env: dict[str, str] = {}
    assert limit_spinning(env, {"torch": object()}) is False
    assert env == {}


def test_the_command_sets_it_before_torch():
    env = {k: v for k, v in os.environ.items() if k not in (SPIN_ENV, POLICY_ENV)}
    code = "import sys, os; import verbeval.cli; print(os.environ.get('GOMP_SPINCOUNT'), 'torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == [SPINS, "False"]
