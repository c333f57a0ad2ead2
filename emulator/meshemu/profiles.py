"""Radio profiles: complete radio settings in user syntax, one YAML file each
in `meshemu/profiles/`."""

from __future__ import annotations

import functools

from pydantic import ValidationError

from .errors import ConfigError
from .schema import PROFILE_DIR, Radio, StrictModel
from .source import Document, load_yaml, pydantic_problems

# Fields a profile may leave out: computed from the others when absent.
OPTIONAL_IN_PROFILE = {"interference_floor"}


@functools.lru_cache(maxsize=None)
def load(name: str) -> tuple[Document, Radio]:
    """The profile `name` (one of `schema.profile_names()`) and its document, to
    locate problems in it. Raises ConfigError for a broken profile."""
    path = PROFILE_DIR / f"{name}.yaml"
    document = load_yaml(path)
    if not isinstance(document.data, dict):
        raise document.error((), "a profile must be a mapping of radio settings")
    try:
        radio = Radio.model_validate(document.data)
    except ValidationError as exc:
        raise ConfigError(pydantic_problems(document, exc.errors(), known_keys=StrictModel.known_keys())) from None
    missing = [key for key in Radio.model_fields if key not in radio.model_fields_set and key not in OPTIONAL_IN_PROFILE]
    if missing:
        raise document.error((), f"incomplete profile: missing {', '.join(missing)}")
    return document, radio
