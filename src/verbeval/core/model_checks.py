"""Whether the models of a validated configuration can be loaded here: local folders that exist
and hold a model, ids that are hub ids, the local revisions of one sweep checkpoints of one model
(:func:`sweep_problems`), and hub models that are cached or downloadable (the hub is probed only
when asked: :func:`hub_problems`).
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from verbeval.core.config import Layer, config_origin
from verbeval.core.errors import VerbevalError
from verbeval.core.model_entries import built_model_folders, entries_with_keys, keypath_text, normalise_model_path
from verbeval.core.model_ids import ModelRef
from verbeval.core.model_sources.source import ModelSource
from verbeval.core.warm import TOKENIZER_FILES

#: a Hugging Face hub id: NAME or ORG/NAME of letters, digits, '.', '_' and '-'
HUB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?")


def model_id_problem(source: ModelSource) -> str | None:
    """Why the id of ``source`` can be neither loaded from a local folder nor looked up on the hub, or None."""
    model_id, ref = source.id, source.ref
    problem = source.local_problem()
    if problem is None and not ref.meant_as_path and not HUB_ID.fullmatch(model_id):
        problem = (
            f"{model_id!r} is neither a local folder nor a hub id (NAME or ORG/NAME of letters, digits, "
            "'.', '_' and '-'); write a local folder as a path (./NAME)"
        )
    return problem


def model_path_problems(config: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(key path, reason) of every local model of a validated config that cannot be loaded.

    A path that does not exist or is not a directory, or a directory without ``config.json``,
    among ``models``, ``veridicality.models`` and ``simverb.models`` (see
    :attr:`verbeval.core.model_ids.ModelRef.meant_as_path` for when an id is a path). Relative paths are
    relative to the working directory (the workflow's directory).
    """
    problems: list[tuple[list[str | int], str]] = []
    built = built_model_folders(config)
    for keypath, m in entries_with_keys(dict(config)):
        if normalise_model_path(str(m["id"])) in built:
            continue
        problem = model_id_problem(ModelSource.from_entry(m))
        if problem:
            problems.append((keypath, f"model {m['name']}: {problem}"))
    for section in ("veridicality", "simverb"):
        ids = (config.get(section) or {}).get("models") or []
        for j, mid in enumerate(ids):
            if section == "veridicality" and mid == "ross-pavlick-2019-bert":  # veridicality.PSEUDO_MODEL
                continue
            if normalise_model_path(str(mid)) in built:
                continue
            problem = model_id_problem(ModelSource(str(mid)))
            if problem:
                problems.append(([section, "models", j], f"{section} model {mid}: {problem}"))
    return problems


#: config.json keys that every local revision of one sweep shares (an entry's ``revisions``)
SWEEP_CONFIG_KEYS = ("model_type", "architectures", "vocab_size")
#: the tokenizer files that hold its vocabulary: two revisions that both have one have it with the same content
VOCAB_FILES = tuple(
    f for f in TOKENIZER_FILES if f not in ("tokenizer_config.json", "special_tokens_map.json", "added_tokens.json")
)


def _sweep_facts(folder: str) -> dict[str, Any] | None:
    """:data:`SWEEP_CONFIG_KEYS` of a local model folder's config.json (read once, no weights), None
    when it has none or it cannot be read (the load names a damaged config.json)."""
    from verbeval.core.model_sources.config_sizes import MAX_CONFIG_BYTES

    path = Path(ModelRef(folder).location) / "config.json"
    try:
        if path.stat().st_size > MAX_CONFIG_BYTES:
            return None
        cfg = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        return None
    return {k: cfg[k] for k in SWEEP_CONFIG_KEYS if k in cfg} if isinstance(cfg, dict) else None


def _vocab_difference(a: str, b: str) -> str | None:
    """The first of :data:`VOCAB_FILES` that both folders hold with different content, or None. One
    file under two names (a hard link, a symbolic link to one blob of the Hugging Face cache) is
    not read; other files are compared by their cached content hashes
    (:func:`verbeval.core.model_sources.fingerprint.file_sha256`: read once per change)."""
    from verbeval.core.model_sources.fingerprint import file_sha256

    fa, fb = Path(ModelRef(a).location), Path(ModelRef(b).location)
    for name in VOCAB_FILES:
        pa, pb = fa / name, fb / name
        if pa.is_file() and pb.is_file():
            sa, sb = pa.stat(), pb.stat()
            if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
                continue
            if sa.st_size != sb.st_size or file_sha256(pa) != file_sha256(pb):
                return name
    return None


def sweep_problems(config: Mapping[str, Any]) -> Iterator[tuple[list[str | int], str]]:
    """(key path, reason) of every local revision of a sweep (a ``models[]`` entry's ``revisions``)
    that is not a checkpoint of the same model as the entry's first local revision: another
    config.json ``model_type``, ``architectures`` or ``vocab_size`` (:data:`SWEEP_CONFIG_KEYS`, each
    compared where both state it; the kind follows from the architectures), or a vocabulary file
    (:data:`VOCAB_FILES`) with other content. Only local folders that exist are compared, each
    config.json read once and no weights: a hub revision, a GGUF file and a folder the workflow
    builds (toy checkpoints) are not inspected."""
    built = built_model_folders(config)
    sweeps: dict[int, list[tuple[list[str | int], dict[str, Any]]]] = {}
    for keypath, m in entries_with_keys(dict(config)):
        if keypath[-1] != "path" or ModelSource.from_entry(m).file or normalise_model_path(str(m["id"])) in built:
            continue
        sweeps.setdefault(int(keypath[1]), []).append((keypath, m))
    for revisions in sweeps.values():
        first: tuple[dict[str, Any], dict[str, Any]] | None = None
        for keypath, m in revisions:
            facts = _sweep_facts(str(m["id"]))
            if facts is None:
                continue
            if first is None:
                first = (m, facts)
                continue
            ref, ref_facts = first
            why = next(
                (
                    f"config.json {k} is {facts[k]!r}, not {ref_facts[k]!r}"
                    for k in SWEEP_CONFIG_KEYS
                    if k in facts and k in ref_facts and facts[k] != ref_facts[k]
                ),
                None,
            )
            if why is None:
                name = _vocab_difference(str(ref["id"]), str(m["id"]))
                why = None if name is None else f"its tokenizer's {name} differs"
            if why is not None:
                yield (
                    keypath,
                    f"sweep {m['checkpoint_of']}: revision {m['name']} is not a checkpoint of the same model as "
                    f"{ref['name']}: {why}; one entry's revisions share architecture and tokenizer "
                    "(list another model as an entry of its own)",
                )


def check_model_paths(config: Mapping[str, Any], source: str = "config", layers: Sequence[Layer] | None = None) -> None:
    """Raise :class:`VerbevalError` for the first of :func:`model_path_problems`, then of
    :func:`sweep_problems`, naming its key."""
    for keypath, reason in itertools.chain(model_path_problems(config), sweep_problems(config)):
        where = config_origin(keypath, layers) if layers else source
        raise VerbevalError(f"{where}: {keypath_text(keypath)}: {reason}")


def hub_models(config: Mapping[str, Any]) -> list[tuple[list[str | int], ModelSource]]:
    """(key path, source) of every model of a validated config that is a hub id: not a local path
    (:attr:`verbeval.core.model_ids.ModelRef.meant_as_path`), not built by the workflow."""
    built = built_model_folders(config)
    out: list[tuple[list[str | int], ModelSource]] = []
    for keypath, m in entries_with_keys(dict(config)):
        mid = str(m["id"])
        if not ModelRef(mid).meant_as_path and normalise_model_path(mid) not in built:
            out.append((keypath, ModelSource.from_entry(m)))
    for section in ("veridicality", "simverb"):
        for j, mid in enumerate((config.get(section) or {}).get("models") or []):
            if section == "veridicality" and mid == "ross-pavlick-2019-bert":  # veridicality.PSEUDO_MODEL
                continue
            if not ModelRef(str(mid)).meant_as_path and normalise_model_path(str(mid)) not in built:
                out.append(([section, "models", j], ModelSource(str(mid))))
    return out


def hub_problems(config: Mapping[str, Any], ids: set[str] | None = None) -> list[tuple[list[str | int], str]]:
    """(key path, reason) of every hub model (of those with an id in ``ids``, when given) that is
    neither cached nor downloadable here (:func:`verbeval.core.model_sources.hub.hub_problem`; the
    hub is probed at most once)."""
    from verbeval.core.model_sources.hub import hub_problem

    out = []
    for keypath, source in hub_models(config):
        if ids is not None and source.id not in ids:
            continue
        problem = hub_problem(source)
        if problem:
            out.append((keypath, problem))
    return out


def hub_id_warnings(config: Mapping[str, Any]) -> list[tuple[list[str | int], str]]:
    """(key path, warning) of every ``A/B`` id read as a hub id although it looks like a folder."""
    from verbeval.core.model_sources.hub import read_as_hub_id

    return [(keypath, w) for keypath, source in hub_models(config) for w in [read_as_hub_id(source.id)] if w]
