"""Run specs and scenario packs: YAML -> attrs classes through one strict cattrs converter.

Every problem is reported as ``file: path.inside: what was expected``; unknown
keys are errors with a did-you-mean; ``type:`` names are checked against the
registry (and a component's own parameters against its factory or spec_cls).
No traceback reaches the user for bad input: everything raises SpecError.

The package, by concept (each module imports only those above it):

- :mod:`.schema`: the records (``ComponentSpec``, ``Task``, ``Pack``, ``Budget``, ``RunSpec``);
- :mod:`.hints`: what a factory parameter's annotation allows (``Bounds``);
- :mod:`.structuring`: the strict converter, ``structure`` and ``unstructure``;
- :mod:`.loader`: YAML files with limits, ``${VAR}`` expansion, ``content_hash``;
- :mod:`.params`: a component's parameters against its factory (``check_component``);
- :mod:`.building`: a component from its spec (``build``);
- :mod:`.packs`: packs and run specs loaded and checked (``load_pack``, ``load_run_spec``);
- :mod:`.commandline`: ``--policy NAME,key=value`` (``parse_component``).
"""

from __future__ import annotations

from .building import build
from .commandline import parse_component
from .hints import Bounds
from .loader import (
    MAX_DEPTH,
    MAX_FILE_BYTES,
    MAX_VALUES,
    check_shape,
    content_hash,
    expand_variables,
    read_spec_yaml,
    read_yaml,
)
from .packs import (
    MAX_CONCURRENCY,
    MAX_STEPS,
    MAX_TIMEOUT,
    MAX_TRIALS,
    check_pack,
    load_pack,
    load_run_spec,
    located,
    resolve_pack,
    resolve_run,
    run_settings_problems,
    select_tasks,
)
from .params import CONTEXT_PARAMS, absolute_code_refs, check_component
from .schema import _ID_RE as _ID_RE  # task and pack ids (the pack commands check new ones)
from .schema import SPLITS, Budget, ComponentSpec, Pack, RunSpec, Task, UserSpec
from .structuring import InvalidValue, converter, structure, unstructure

__all__ = [
    "CONTEXT_PARAMS", "MAX_CONCURRENCY", "MAX_DEPTH", "MAX_FILE_BYTES", "MAX_STEPS", "MAX_TIMEOUT", "MAX_TRIALS",
    "MAX_VALUES", "SPLITS", "Bounds", "Budget", "ComponentSpec", "InvalidValue", "Pack", "RunSpec", "Task", "UserSpec",
    "absolute_code_refs", "build", "check_component", "check_pack", "check_shape", "content_hash", "converter",
    "expand_variables", "load_pack", "load_run_spec", "located", "parse_component", "read_spec_yaml", "read_yaml",
    "resolve_pack", "resolve_run", "run_settings_problems", "select_tasks", "structure", "unstructure",
]
