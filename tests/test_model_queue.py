"""`verbeval run-queue`: a queue of steps in one process writes what the steps write alone, byte for
byte; the tokenizer's work is done once per tokenizer (by file content); the next model loads while
the current one computes; a bad step stops the queue naming it."""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pandas as pd
import pytest

from verbeval.cli import main
from verbeval.commands import build_parser
from verbeval.core import prefetch
from verbeval.core.errors import VerbevalError
from verbeval.model_queue import run_queue
from verbeval.queue_cli import parse_jobs

LEXICON = pd.DataFrame(
    {
        "lemma": ["walk", "run", "swim", "eat", "write"],
        "sing": ["walks", "runs", "swims", "eats", "writes"],
        "plur": ["walk", "run", "swim", "eat", "write"],
    }
)


def _templates() -> pd.DataFrame:
    rows = [
        ("g1", "the dog", "", "walks", "walk", "sing"),
        ("g1", "the dogs", "", "walk", "walks", "plur"),
        ("g1", "the author that the guards like", "", "writes", "write", "sing"),
        ("g2", "the cats near the door", "", "eat", "eats", "plur"),
        ("g2", "the cat near the doors", "", "swims", "swim", "sing"),
    ]
    t = pd.DataFrame(rows, columns=["group", "left", "right", "correct", "incorrect", "label"])
    t.insert(1, "source", "test")
    t.insert(2, "line", range(1, len(t) + 1))
    t["plural"] = t["label"] == "plur"
    return t


@pytest.fixture()
def sweep(tmp_path: Path) -> dict[str, Path]:
    """Three "revisions" of one tiny GPT-2 (word-level tokenizer of the test's own words: no
    ../shared), different weights, identical tokenizer files; the templates and lexicon."""
    tpl, lex = tmp_path / "templates.parquet", tmp_path / "lexicon.parquet"
    _templates().to_parquet(tpl)
    LEXICON.to_parquet(lex)
    files = {"templates": tpl, "lexicon": lex}
    for seed in (1, 2, 3):
        out = tmp_path / f"step-{seed}"
        args = ["-q", "tiny-model", "--word-corpus", str(tpl), str(lex), "--arch", "gpt2", "--seed", str(seed)]
        assert main([*args, "--layers", "1", "--hidden", "16", "--out", str(out)]) == 0
        files[f"step-{seed}"] = out
    return files


def _steps(f: dict[str, Path], name: str, out: Path) -> list[list[str]]:
    """One revision's steps, as the workflow's queue job lists them."""
    model, res = f[name], out / name
    lemmas, manifest = res / "lemmas.parquet", res / "shards" / "manifest.json"
    return [
        ["lemmas", "--model", str(model), "--lexicon", str(f["lexicon"]), "--out", str(lemmas)],
        ["run-model", "--model", str(model), "--kind", "causal", "--device", "cpu", "--threads", "1",
         "--batch-size", "2", "--random-init", "true", "--templates", str(f["templates"]), "--lemmas", str(lemmas),
         "--groups", "g1,g2", "--n-chunks", "2", "--no-progress", "--manifest", str(manifest)],
        ["aggregate", "--templates", str(f["templates"]), "--groups", "g1,g2", "--model-name", name,
         "--manifest", str(manifest), "--top-cutoffs", "0.5,1", "--bottom-cutoffs", "0.5", "--resamples", "20",
         "--out-dir", str(res)],
        ["lemma-stats", "--lemmas", str(lemmas), "--shards", str(manifest), "--model-name", name,
         "--out", str(res / "lemma_stats.csv")],
    ]  # fmt: skip


def _digests(root: Path) -> dict[str, str]:
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.startswith(".journal")
    }


def test_queue_writes_what_the_steps_write_alone(
    sweep: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each step run as its own command, and the same steps as one queue (post steps in this
    process, then in a worker process; the commands alone run once for both): every output file
    identical, the third revision's included, whose weights went into the first one's module (issue 54)."""
    from verbeval.core import weight_swap

    swapped: list[str] = []
    swap = weight_swap.swap_weights

    def recorded_swap(built, request):  # type: ignore[no-untyped-def]
        lm = swap(built, request)
        if lm is not None:
            swapped.append(Path(request.source.id).name)
        return lm

    monkeypatch.setattr(weight_swap, "swap_weights", recorded_swap)
    names = ["step-1", "step-2", "step-3"]
    alone = tmp_path / "alone"
    for name in names:
        for step in _steps(sweep, name, alone):
            assert main(["-q", *step]) == 0
    assert swapped == []  # one command, one model: nothing to swap
    a = _digests(alone)
    assert len(a) == 3 * 17  # lemmas, manifest, 4 shards and their 4 score files, 2 groups x 3 files, lemma_stats
    for post_workers in (0, 1):
        queued = tmp_path / f"queued-{post_workers}"
        jobs = [f"--job={shlex.join(s)}" for n in names for s in _steps(sweep, n, queued)]
        assert main(["-q", "run-queue", "--post-workers", str(post_workers), *jobs]) == 0
        assert swapped == ["step-3"], post_workers
        swapped.clear()
        assert _digests(queued) == a, post_workers
    # the revisions differ (different weights): the comparison is not of one file with itself
    s1 = pd.read_csv(alone / "step-1" / "g1" / "summary.csv")
    s2 = pd.read_csv(alone / "step-2" / "g1" / "summary.csv")
    assert not s1.equals(s2)


def test_tokenizer_work_is_done_once_per_tokenizer(
    sweep: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Lemmas, tokenizer fingerprint and each group's preparation: once for the three revisions that
    share their tokenizer files; again for a revision whose tokenizer file changed."""
    from verbeval.agreement.data import eligibility
    from verbeval.agreement.engine import inference

    calls = {"lemmas": 0, "fingerprint": 0, "group": 0}

    def counting(name: str, fn):  # type: ignore[no-untyped-def]
        def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
            calls[name] += 1
            return fn(*args, **kwargs)

        return wrapped

    monkeypatch.setattr(eligibility, "eligible_lemmas", counting("lemmas", eligibility.eligible_lemmas))
    monkeypatch.setattr(inference, "tokenizer_fingerprint", counting("fingerprint", inference.tokenizer_fingerprint))
    monkeypatch.setattr(inference, "_prepare_group", counting("group", inference._prepare_group))
    names = ["step-1", "step-2", "step-3"]
    jobs = [shlex.join(s) for n in names for s in _steps(sweep, n, tmp_path / "q")]
    run_queue(parse_jobs(jobs, build_parser), post_workers=0)
    assert calls == {"lemmas": 1, "fingerprint": 1, "group": 2}  # two groups, once each
    # a tokenizer is compared by content: one changed file is another tokenizer
    cfg = sweep["step-3"] / "tokenizer_config.json"
    cfg.write_text(cfg.read_text().replace("{", '{"model_max_length": 512, ', 1))
    run_queue(
        parse_jobs([shlex.join(s) for s in _steps(sweep, "step-3", tmp_path / "r")], build_parser), post_workers=0
    )
    assert calls == {"lemmas": 2, "fingerprint": 2, "group": 4}


def test_the_next_model_loads_while_the_current_one_computes(
    sweep: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Of a queue of two models, the second's load runs on the prefetch thread and starts before the
    first model's run-model step has finished."""
    from verbeval import model_run

    events: list[tuple[str, str, float]] = []
    load = prefetch.LoadRequest.load

    def recorded_load(self: prefetch.LoadRequest):  # type: ignore[no-untyped-def]
        events.append(("load", Path(self.source.id).name, time.perf_counter()))
        events.append(("thread", threading.current_thread().name, 0.0))
        return load(self)

    run_model = model_run.run_model

    def slow_run_model(job, session):  # type: ignore[no-untyped-def]
        run_model(job, session)
        time.sleep(0.5)  # the first model's work outlasts the second's load
        events.append(("done", Path(job.run.source.id).name, time.perf_counter()))

    monkeypatch.setattr(prefetch.LoadRequest, "load", recorded_load)
    jobs = [shlex.join(s) for n in ("step-1", "step-2") for s in _steps(sweep, n, tmp_path / "q")]
    parsed = [
        dataclasses.replace(s, func=slow_run_model) if s.command == "run-model" else s
        for s in parse_jobs(jobs, build_parser)
    ]
    with caplog.at_level(logging.INFO, logger="verbeval"):
        run_queue(parsed, post_workers=0)
    loads = {name: t for kind, name, t in events if kind == "load"}
    done = {name: t for kind, name, t in events if kind == "done"}
    threads = [name for kind, name, _ in events if kind == "thread"]
    assert threads[0] == "MainThread" and threads[1].startswith("verbeval-prefetch")
    assert loads["step-2"] < done["step-1"]
    assert "loaded ahead" in caplog.text


def test_a_bad_step_stops_the_queue_naming_it(sweep: dict[str, Path], tmp_path: Path) -> None:
    with pytest.raises(VerbevalError, match=r"--job 2: 'infer-forms' is not a queue step"):
        parse_jobs(["lemmas --model x --lexicon y --out z", "infer-forms --model x"], build_parser)
    steps = _steps(sweep, "step-1", tmp_path / "q")
    steps[2][steps[2].index("--manifest") + 1] = str(tmp_path / "missing.json")
    with pytest.raises(VerbevalError, match=r"^step 3 of 4 \(aggregate step-1\): "):
        run_queue(parse_jobs([shlex.join(s) for s in steps], build_parser), post_workers=0)
    # the steps before it kept their outputs
    assert (tmp_path / "q" / "step-1" / "shards" / "manifest.json").is_file()
    assert main(["-q", "run-queue", "--post-workers", "-1", "--job", shlex.join(steps[0])]) == 1


def test_a_revision_whose_shards_are_all_kept_is_not_loaded(
    sweep: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A queue job rerun after Snakemake removed its outputs (a failed or interrupted job, a changed
    cutoff): each revision whose shards are all in its store gets its manifest back without a model
    load, byte-identical; a revision missing one shard is loaded and computes only that one."""
    names = ["step-1", "step-2"]
    out = tmp_path / "q"
    jobs = [shlex.join(s) for n in names for s in _steps(sweep, n, out)]
    run_queue(parse_jobs(jobs, build_parser), post_workers=0)
    before = _digests(out)
    for name in names:  # what Snakemake removes: the job's declared outputs
        for p in [p for p in (out / name).rglob("*") if p.is_file()]:
            rel = p.relative_to(out / name)
            if rel.parts[0] != "shards" or rel.name == "manifest.json":  # the shards and their journal stay
                p.unlink()
    shards = sorted((out / "step-2" / "shards").rglob("*-of-*.parquet"))
    shards[0].unlink()
    loads: list[str] = []
    load = prefetch.LoadRequest.load
    monkeypatch.setattr(
        prefetch.LoadRequest, "load", lambda self: loads.append(Path(self.source.id).name) or load(self)
    )
    run_queue(parse_jobs(jobs, build_parser), post_workers=0)
    assert loads == ["step-2"]
    assert _digests(out) == before


# --------------------------------------------------------------------------- the post-workers' processes (issue 51)

_SRC = str(Path(__file__).resolve().parents[1] / "src")


def _environ() -> dict[str, str]:
    """This checkout's verbeval first on a child's path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([_SRC, *filter(None, [env.get("PYTHONPATH")])])
    return env


def _children(parent: int) -> dict[int, str]:
    """The child processes of ``parent`` (Linux /proc), each with its kind: a pool worker
    (``spawn_main``) or the resource tracker."""
    found = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            ppid = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (stat.parent / "cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError, ValueError):  # ended meanwhile
            continue
        if ppid == parent:
            found[int(stat.parent.name)] = next(
                (k for k in ("spawn_main", "resource_tracker") if k in cmdline), cmdline
            )
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie, ended but not yet reaped by its new parent, is not)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the processes from Linux's /proc")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["kill -9", "kill -TERM"])
def test_the_post_workers_end_with_the_queue_process(sig: signal.Signals) -> None:
    """A queue process that dies on its own (kill -9, kill -TERM, the OOM killer) takes its two
    post-workers and the pool's resource tracker with it: none of them is left running."""
    code = (
        "import time\n"
        "from verbeval.model_queue import _post_pool\n"
        "pool = _post_pool(2)\n"
        "for f in [pool.submit(time.sleep, 0.5) for _ in range(2)]:\n"  # two at once: two workers
        "    f.result()\n"
        "print('ready', flush=True)\n"
        "time.sleep(120)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=_environ())
    children: dict[int, str] = {}
    try:
        assert parent.stdout is not None and parent.stdout.readline() == "ready\n"
        children = _children(parent.pid)
        assert sorted(children.values()) == ["resource_tracker", "spawn_main", "spawn_main"]
        parent.send_signal(sig)
        assert parent.wait(timeout=10) == -sig
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert {pid: kind for pid, kind in children.items() if _alive(pid)} == {}
    finally:
        parent.kill()
        parent.wait()
        for pid in children:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the processes from Linux's /proc")
@pytest.mark.parametrize("kernel", [True, False], ids=["PR_SET_PDEATHSIG", "polling thread"])
def test_a_queue_process_and_its_workers_end_when_the_jobs_shell_is_killed(kernel: bool) -> None:
    """A queue process bound to its parent (verbeval.core.parent_death: what ``verbeval`` does for
    the workflow's jobs) ends, with its post worker, when its job's shell is killed with SIGKILL: the
    shell's stdout pipe, held by the shell, the queue process, its worker and the pool's resource
    tracker, reaches its end. Without ``PR_SET_PDEATHSIG`` (other systems) the polling thread does it."""
    code = (
        "import os, time\n"
        "from verbeval.core.parent_death import end_with_parent\n"
        f"end_with_parent(kernel={kernel})\n"
        "from verbeval.model_queue import _post_pool\n"
        "pool = _post_pool(1)\n"
        "print(os.getpid(), pool.submit(os.getpid).result(), flush=True)\n"
        "time.sleep(60)\n"
    )
    shell = subprocess.Popen(
        ["sh", "-c", f"{shlex.quote(sys.executable)} -c {shlex.quote(code)} & wait"],
        stdout=subprocess.PIPE,
        text=True,
        env=_environ(),
    )
    pids: list[int] = []
    try:
        assert shell.stdout is not None
        pids = [int(w) for w in shell.stdout.readline().split()]
        assert len(pids) == 2 and all(_alive(pid) for pid in pids)
        shell.send_signal(signal.SIGKILL)
        assert shell.wait(timeout=10) == -signal.SIGKILL
        done = threading.Thread(target=shell.stdout.read, daemon=True)  # returns at the pipe's end
        done.start()
        done.join(timeout=15)
        assert not done.is_alive(), "a process of the queue still holds the job's stdout"
        assert [pid for pid in pids if _alive(pid)] == []
    finally:
        for pid in pids:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_cli_binds_a_workflow_job_to_its_parent(monkeypatch: pytest.MonkeyPatch) -> None:
    """``verbeval`` ends with its parent when the workflow asks (``VERBEVAL_END_WITH_PARENT=1``), and
    not when run by hand (``verbeval ... &`` outlives its shell)."""
    from verbeval.core import parent_death

    calls: list[int] = []
    monkeypatch.setattr(parent_death, "end_with_parent", lambda: calls.append(1))
    for value, expected in ((None, []), ("1", [1])):
        calls.clear()
        if value is None:
            monkeypatch.delenv(parent_death.ENV, raising=False)
        else:
            monkeypatch.setenv(parent_death.ENV, value)
        assert main(["-q", "run-queue", "--job", "no-such-step"]) == 1
        assert calls == expected


@pytest.mark.parametrize("start", ["script without a main guard", "python -m verbeval", "entry point"])
def test_the_post_workers_work_however_the_cli_was_started(tmp_path: Path, start: str) -> None:
    """A post step runs in a worker process (here: fails there, with its own one-line error) whether
    the queue was started by a script that calls ``verbeval.cli.main()`` without a main guard (a
    spawned worker does not run the parent's script again), by ``python -m verbeval`` or by the
    ``verbeval`` entry point."""
    script = tmp_path / "verbeval-wrapper"
    script.write_text(f"#!{sys.executable}\nimport sys\nfrom verbeval.cli import main\nsys.exit(main())\n")
    command = {
        "script without a main guard": [sys.executable, str(script)],
        "python -m verbeval": [sys.executable, "-m", "verbeval"],
        "entry point": [str(Path(sys.executable).parent / "verbeval")],
    }[start]
    manifest = tmp_path / "missing.json"
    step = ["aggregate", "--templates", str(tmp_path / "t.parquet"), "--groups", "g1", "--model-name", "m",
            "--manifest", str(manifest), "--out-dir", str(tmp_path / "out")]  # fmt: skip
    done = subprocess.run(
        [*command, "-q", "run-queue", "--post-workers", "1", "--job", shlex.join(step)],
        capture_output=True,
        text=True,
        env=_environ(),
        cwd=tmp_path,
        timeout=120,
    )
    assert (done.returncode, done.stderr) == (
        1,
        f"verbeval run-queue: error: step 1 of 1 (aggregate m): {manifest}: no shard manifest "
        "(run the model's inference job first)\n",
    )


# --------------------------------------------------------------------------- typed steps (issue 52)


def _typed_steps(f: dict[str, Path], name: str, out: Path) -> list:  # type: ignore[type-arg]
    """The steps of :func:`_steps` built as typed values with the API (no command line)."""
    from verbeval.agreement.runs import AggregateRun, LemmasRun, LemmaStatsRun, ShardRun, aggregate, lemma_stats, lemmas
    from verbeval.core.model_runs import ModelRun
    from verbeval.core.model_sources.source import ModelSource
    from verbeval.model_queue import QueueStep
    from verbeval.model_run import RunModel, run_model

    model, res = f[name], out / name
    lemmas_out, manifest = str(res / "lemmas.parquet"), str(res / "shards" / "manifest.json")
    run = ModelRun(ModelSource(str(model)), kind="causal", device="cpu", threads=1, batch_size="2", random_init=True)
    job = RunModel(run, ShardRun(str(f["templates"]), lemmas_out, ("g1", "g2"), manifest, n_chunks=2, progress=False))
    agg = AggregateRun(str(f["templates"]), ("g1", "g2"), name, manifest, str(res), top_cutoffs=(0.5, 1.0),
                       bottom_cutoffs=(0.5,), resamples=20)  # fmt: skip
    return [
        QueueStep("lemmas", lemmas, LemmasRun(ModelSource(str(model)), str(f["lexicon"]), lemmas_out), str(model)),
        QueueStep("run-model", run_model, job, str(model), load=run.load_request()),
        QueueStep("aggregate", aggregate, agg, name),
        QueueStep(
            "lemma-stats", lemma_stats, LemmaStatsRun(lemmas_out, (manifest,), name, str(res / "lemma_stats.csv")), name
        ),  # fmt: skip
    ]


def test_the_command_lines_parse_to_the_typed_steps_the_api_builds(sweep: dict[str, Path], tmp_path: Path) -> None:
    """Each --job string is parsed once into the same typed step value the API builds."""
    jobs = [shlex.join(s) for s in _steps(sweep, "step-1", tmp_path)]
    assert parse_jobs(jobs, build_parser) == _typed_steps(sweep, "step-1", tmp_path)


def test_a_queue_of_typed_steps_writes_what_the_command_lines_write(sweep: dict[str, Path], tmp_path: Path) -> None:
    """Typed steps run in process (no string anywhere) write the files of the same steps run as commands."""
    alone, typed = tmp_path / "alone", tmp_path / "typed"
    for name in ("step-1", "step-2"):
        for step in _steps(sweep, name, alone):
            assert main(["-q", *step]) == 0
    steps = [s for n in ("step-1", "step-2") for s in _typed_steps(sweep, n, typed)]
    assert run_queue(steps, post_workers=0)["models"] == 2
    assert _digests(alone) == _digests(typed) and len(_digests(typed)) == 2 * 17


def test_a_worker_is_sent_the_pickled_typed_step(
    sweep: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The post steps go to the worker pool as their typed values, pickled whole (here: a pool that
    pickles what it is sent and runs it in this process): no command line is sent or parsed."""
    import pickle
    from concurrent.futures import Future

    from verbeval import model_queue
    from verbeval.agreement.runs import AggregateRun, LemmaStatsRun

    sent: list[tuple[object, ...]] = []

    class PicklingPool:
        def submit(self, fn, *args):  # type: ignore[no-untyped-def]
            sent.append(args)
            fut: Future[object] = Future()
            fut.set_result(pickle.loads(pickle.dumps(fn))(*pickle.loads(pickle.dumps(args))))
            return fut

        def shutdown(self, wait: bool, cancel_futures: bool) -> None:
            pass

    monkeypatch.setattr(model_queue, "_post_pool", lambda workers: PicklingPool())
    out = tmp_path / "q"
    steps = parse_jobs([shlex.join(s) for s in _steps(sweep, "step-1", out)], build_parser)
    run_queue(steps, post_workers=1)
    assert [(type(s).__name__, type(s.args), i, n) for s, i, n in sent] == [
        ("QueueStep", AggregateRun, 3, 4),
        ("QueueStep", LemmaStatsRun, 4, 4),
    ]
    assert [s for s, _, _ in sent] == steps[2:]
    assert (out / "step-1" / "lemma_stats.csv").is_file() and (out / "step-1" / "g2" / "summary.csv").is_file()


def test_a_step_whose_options_its_step_rejects_stops_the_queue_before_any_work(tmp_path: Path) -> None:
    """A run-model item with half a branch is named as a failing step is, and nothing has run."""
    item = f"run-model --model m --templates t --lemmas l --groups g --manifest {tmp_path / 'm.json'} --simverb-out s"
    with pytest.raises(VerbevalError) as err:
        parse_jobs([f"lemmas --model m --lexicon x --out {tmp_path / 'l.parquet'}", item], build_parser)
    assert (
        str(err.value) == "step 2 of 2 (run-model m): the SimVerb branch needs --simverb-data, --simverb-verbs as well"
    )
    assert list(tmp_path.iterdir()) == []


def test_each_queue_has_its_own_session(sweep: dict[str, Path], tmp_path: Path) -> None:
    """The warm caches belong to a session: two sessions share nothing, work outside one is not kept."""
    from verbeval.core import warm
    from verbeval.core.session import Session

    calls: list[int] = []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    first, second = Session(), Session()
    with first.active():
        assert warm.memo("x", "k", compute) == warm.memo("x", "k", compute) == 1
    with second.active():
        assert warm.memo("x", "k", compute) == 2
    assert warm.memo("x", "k", compute) == 3 and warm.memo("x", "k", compute) == 4  # no session: computed
    assert first.prefetch is not second.prefetch
