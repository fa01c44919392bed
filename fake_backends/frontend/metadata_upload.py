"""``nvext.metadata_upload``: what the frontend of each Dynamo release accepts and refuses.

Dynamo 1.6.1 knows one form, ``{"url": ...}`` (``deny_unknown_fields``). Dynamo 1.7 knows two:
the legacy ``{"url", "fallback_url"}`` and the generation artifact ``{"kind":
"generation_artifact", "contents", "mode", "destination"}``, and refuses the rest with its own
messages; a generation artifact asked of a request with stop strings, several prompts or
``n``/``best_of`` above 1 is refused after the body deserialized. Messages as the real
1.7.0.dev20261026 frontend answered them
(``fixtures/dynamo-1.7.0.dev20261026/metadata_upload_shapes.json``). A well-formed artifact
request was answered 500 there (the worker made no artifact), and is here.

Faults: ``metadata_upload_refusals_reworded`` refuses with serde's generic wording instead;
``generation_artifact_limits_unchecked`` lets stop strings and several choices through.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from fake_backends.faults.catalogue import ActiveFaults
from fake_backends.faults.deployment import active_faults
from fake_backends.frontend.error_bodies import FrontendError, flat_error_body, shape_error

NOT_AN_OBJECT = "metadata_upload must be an object"
UNKNOWN_LEGACY_FIELD = "unknown legacy metadata_upload field"
MISSING_URL = "missing legacy metadata_upload url"
EMPTY_URL = "metadata_upload URL must not be empty"
UNKNOWN_KIND = "unsupported metadata_upload kind"
BAD_ARTIFACT = "invalid generation_artifact metadata_upload shape"
BAD_DESTINATION = "artifact destination is incompatible with the delivery mode"
BAD_CONTENTS = "artifact contents must contain at most 64 unique nonempty names"
STOP_STRINGS = "generation_artifact metadata_upload does not support stop strings"
SINGLE_CHOICE = "generation_artifact metadata_upload requires a single prompt and n = best_of = 1"
REWORDED = "invalid value: expected struct MetadataUpload"

LEGACY_FIELDS = ("url", "fallback_url")
ARTIFACT_FIELDS = ("kind", "contents", "mode", "destination")
MODES_WITH_DESTINATION = {"inline_base64": False, "object_store": True}

NO_FAULTS = active_faults()
"""The parsers' default: no fault switched on (a deployment passes its ``state.faults``)."""


def _refuse(message: str, faults: ActiveFaults) -> FrontendError:
    return shape_error(REWORDED if faults.active("metadata_upload_refusals_reworded") else message)


def parse_1_6(upload: Any, invalid: Callable[[str], FrontendError]) -> None:
    """Dynamo 1.6.1: `url` only, required and not blank (unknown keys are refused before)."""
    url = upload.get("url")
    if not isinstance(url, str):
        raise invalid("metadata_upload.url is required")
    if not url.strip():
        raise invalid("metadata_upload.url must not be empty")


def parse_1_7(upload: Any, faults: ActiveFaults) -> bool:
    """Dynamo 1.7: either form; True for a generation artifact."""
    if not isinstance(upload, Mapping):
        raise _refuse(NOT_AN_OBJECT, faults)
    if "kind" in upload:
        _artifact(upload, faults)
        return True
    if any(key not in LEGACY_FIELDS for key in upload):
        raise _refuse(UNKNOWN_LEGACY_FIELD, faults)
    if "url" not in upload:
        raise _refuse(MISSING_URL, faults)
    for key in LEGACY_FIELDS:
        if key in upload and not (isinstance(upload[key], str) and upload[key].strip()):
            raise _refuse(EMPTY_URL, faults)
    return False


def _artifact(upload: Mapping[str, Any], faults: ActiveFaults) -> None:
    if upload["kind"] != "generation_artifact":
        raise _refuse(UNKNOWN_KIND, faults)
    mode, contents = upload.get("mode"), upload.get("contents")
    if any(key not in ARTIFACT_FIELDS for key in upload) or mode not in MODES_WITH_DESTINATION:
        raise _refuse(BAD_ARTIFACT, faults)
    names = contents if isinstance(contents, list) else []
    if not names or len(names) > 64 or not all(isinstance(n, str) and n for n in names):
        raise _refuse(BAD_CONTENTS, faults)
    if MODES_WITH_DESTINATION[mode] != isinstance(upload.get("destination"), Mapping):
        raise _refuse(BAD_DESTINATION, faults)


def check_artifact_request(stops: tuple[Any, ...], choices: int, faults: ActiveFaults) -> None:
    """A generation artifact of a request it cannot describe is refused; the others are
    answered as the real frontend answered them with a worker that makes no artifact."""
    if not faults.active("generation_artifact_limits_unchecked"):
        if stops:
            raise FrontendError(400, STOP_STRINGS)
        if choices != 1:
            raise FrontendError(400, SINGLE_CHOICE)
    raise FrontendError(
        500, "Internal server error", body=flat_error_body(500, "Internal server error")
    )
