"""instance-advisor: which cloud instance type to train on, from measurements of your workload.

The declared Python API (the `advisor` command is a thin shell over it)::

    import advisor

    job = advisor.JobSpec(samples=1e8, budget_usd=500, deadline_hours=48)
    advice = advisor.advise(job)                  # the shipped catalog, no measurements
    best = advice.recommendations[0]              # what `advisor recommend` ranks first
    advice.to_dict()                              # what `advisor recommend --format json` prints

Names are imported on first use, so `import advisor` stays light; torch is imported only when a
probe runs. Errors are the library's own types (AdvisorError and the catalog's, the probe
result's); only the CLI turns them into exit codes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> (module, attribute): each imported on first use.
_LAZY = {
    "advise": ("advisor.advice", "advise"),
    "Advice": ("advisor.advice", "Advice"),
    "JobSpec": ("advisor.recommend.jobspec", "JobSpec"),
    "parse_deadline": ("advisor.recommend.jobspec", "parse_deadline"),
    "load_catalog": ("advisor.paths", "load_catalog"),
    "ResultStore": ("advisor.store", "ResultStore"),
    "ProbeOptions": ("lightning_module.contract.options", "ProbeOptions"),
    "ProbeResult": ("lightning_module.contract.result", "ProbeResult"),
    "AdvisorError": ("advisor.errors", "AdvisorError"),
}
__all__ = [
    "Advice",
    "AdvisorError",
    "JobSpec",
    "ProbeOptions",
    "ProbeResult",
    "ResultStore",
    "__version__",
    "advise",
    "load_catalog",
    "parse_deadline",
    "run_probe",
]


def run_probe(opts, **kwargs):
    """Run the probe (the optimisation ladder, timed and confirmed) with `opts` (ProbeOptions) on
    this machine and return its ProbeResult; imports torch and Lightning (the `probe` extra)."""
    from lightning_module.run.probe import run_probe as run

    return run(opts, **kwargs)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value  # once: later look-ups do not come here
        return value
    raise AttributeError(f"module 'advisor' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


if TYPE_CHECKING:  # for type checkers and IDEs; at run time the names come lazily
    from lightning_module.contract.options import ProbeOptions
    from lightning_module.contract.result import ProbeResult

    from .advice import Advice, advise
    from .errors import AdvisorError
    from .paths import load_catalog
    from .recommend.jobspec import JobSpec, parse_deadline
    from .store import ResultStore
