"""The JSON schemas of Every Eval Ever (PyPI ``every-eval-ever`` 0.3.0), read and applied without
importing the package.

every-eval-ever 0.3.0 needs Python >= 3.12 and pulls duckdb, pandas 2.3+ and
datamodel-code-generator; verbeval supports 3.11. Its schemas are plain JSON files
(``every_eval_ever/schemas/eval.schema.json``, ``instance_level_eval.schema.json``, draft-07, whose
``$ref`` point only inside their own file), so verbeval reads them as data and validates with
``jsonschema``, which it already depends on:

* from an installed distribution (``pip install 'verbeval[export]'`` on Python >= 3.12): the files
  are located through :func:`importlib.metadata.distribution`, never imported;
* or from the wheel itself (``--schemas every_eval_ever-0.3.0-py3-none-any.whl``, any Python), whose
  sha256 must be :data:`WHEEL_SHA256`: the schemas verbeval's export was written for, nothing else.

:func:`load_schemas` finds them (one line saying how to get them when it cannot), :func:`check`
validates a document against one of them (the validator's first error, naming the field).
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verbeval.core.errors import VerbevalError

#: the release whose schemas the export follows
VERSION = "0.3.0"
DISTRIBUTION = "every-eval-ever"
WHEEL_NAME = f"every_eval_ever-{VERSION}-py3-none-any.whl"
#: sha256 of :data:`WHEEL_NAME` as PyPI serves it
WHEEL_SHA256 = "564b8bc624c1f822f749a769dc69dc058a736e83d920cbeb147c3a30d3152317"
#: the schema files in the distribution: aggregate (one JSON per evaluation) and instance (JSONL rows)
SCHEMA_FILES = {
    "aggregate": "every_eval_ever/schemas/eval.schema.json",
    "instance": "every_eval_ever/schemas/instance_level_eval.schema.json",
}
#: where the error below (and docs/export.md) downloads the wheel: verbeval's cache, where the tests
#: look for it too (tests/test_export.py), not the working directory (a checkout)
WHEEL_FOLDER = "~/.cache/verbeval/every-eval-ever"

#: how to get the schemas (the end of the error when none is found)
HOW_TO_GET = (
    f"install them with pip install 'verbeval[export]' (Python >= 3.12), or download the wheel with "
    f"pip download {DISTRIBUTION}=={VERSION} --no-deps --python-version 3.12 --only-binary=:all: -d {WHEEL_FOLDER} "
    f"and pass --schemas {WHEEL_FOLDER}/{WHEEL_NAME}"
)


@dataclass(frozen=True)
class Schemas:
    """The two schemas of :data:`VERSION` and where they were read (for messages)."""

    aggregate: dict[str, Any]
    instance: dict[str, Any]
    source: str


def _parsed(texts: Mapping[str, str], source: str) -> Schemas:
    schemas = {}
    for kind, text in texts.items():
        try:
            schema = json.loads(text)
        except ValueError as exc:
            raise VerbevalError(f"{source}: {SCHEMA_FILES[kind]} is not JSON ({exc})") from None
        if not isinstance(schema, dict) or schema.get("version") != VERSION:
            got = schema.get("version") if isinstance(schema, dict) else None
            raise VerbevalError(f"{source}: {SCHEMA_FILES[kind]} is version {got!r}, not {VERSION}")
        schemas[kind] = schema
    return Schemas(schemas["aggregate"], schemas["instance"], source)


def _from_wheel(wheel: Path) -> Schemas:
    from verbeval.core.io import sha256_file

    if not wheel.is_file():
        raise VerbevalError(f"--schemas {wheel}: no such file; {HOW_TO_GET}")
    digest = sha256_file(wheel)
    if digest != WHEEL_SHA256:
        raise VerbevalError(f"--schemas {wheel}: sha256 {digest} is not that of {WHEEL_NAME} ({WHEEL_SHA256})")
    with zipfile.ZipFile(wheel) as zf:
        texts = {kind: zf.read(member).decode("utf-8") for kind, member in SCHEMA_FILES.items()}
    return _parsed(texts, str(wheel))


def _from_distribution() -> Schemas | None:
    from importlib import metadata

    try:
        dist = metadata.distribution(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    source = f"{DISTRIBUTION} {dist.version} (installed)"
    if dist.version != VERSION:
        raise VerbevalError(f"{source}: the export follows the schemas of {VERSION}; {HOW_TO_GET}")
    texts = {}
    for kind, member in SCHEMA_FILES.items():
        path = Path(str(dist.locate_file(member)))
        try:
            texts[kind] = path.read_text(encoding="utf-8")
        except OSError:
            raise VerbevalError(f"{source}: {path} is missing; reinstall it, or {HOW_TO_GET}") from None
    return _parsed(texts, source)


def load_schemas(wheel: str | Path | None = None) -> Schemas:
    """The schemas of :data:`VERSION`: from ``wheel`` (its sha256 checked) when given, else from the
    installed distribution; neither: an error saying how to get them."""
    if wheel is not None:
        return _from_wheel(Path(wheel))
    found = _from_distribution()
    if found is None:
        raise VerbevalError(f"no Every Eval Ever {VERSION} schemas: {DISTRIBUTION} is not installed; {HOW_TO_GET}")
    return found


def field_path(path: Any) -> str:
    """A validator error's location as a field path (``evaluation_results[0].score_details.score``;
    the document itself: ``(document)``)."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(document)"


def check(schema: Mapping[str, Any], document: Any, what: str) -> None:
    """Validate ``document`` (``what``: how messages name it) against ``schema`` (draft-07); the
    first error (:func:`jsonschema.exceptions.best_match`) as one line naming its field."""
    import jsonschema

    validator = jsonschema.Draft7Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(document))
    if error is not None:
        raise VerbevalError(
            f"{what}: not valid Every Eval Ever {VERSION}: {field_path(error.absolute_path)}: {error.message}"
        )
