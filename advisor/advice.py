"""The recommend pipeline's entry point, the one the CLI and a notebook both call: a job in, the
advice out (ranked candidates, the probe plan and the command lines that run it)."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from catalog.models import Catalog

from . import render
from .options import DEFAULT_TOP
from .recommend.jobspec import JobSpec
from .recommend.obtainable import with_account_facts
from .recommend.planner import Plan, build_plan, workload_spec
from .recommend.prices import Prices, load_prices
from .recommend.probeplan.commands import ProbeCommand, probe_commands
from .recommend.rows import CandidateRow, Rows, build

if TYPE_CHECKING:  # the store's module is imported only when a store is read (sqlite3 is not free)
    from .store import ResultStore

# --obtainable-only ranks this many times `top` candidates before dropping those not obtainable
OBTAINABLE_POOL = 5


@dataclass(frozen=True)
class Advice:
    plan: Plan  # the arrays behind the rows (every candidate evaluated), for plots and analysis
    rows: Rows  # what is shown: the ranked (or closest) candidates and the probe plan
    probe_commands: list[ProbeCommand]  # what measures the probe plan's rows
    warnings: list[str]  # what was said on the way, in order: skipped store rows, stale probes, the account

    @property
    def recommendations(self) -> list[CandidateRow]:
        """The ranked candidates; empty when nothing meets the budget and the deadline."""
        return self.rows.candidates if self.rows.feasible else []

    @property
    def closest(self) -> list[CandidateRow]:
        """When nothing fits: the candidates nearest to fitting, each with what it needs."""
        return [] if self.rows.feasible else self.rows.candidates

    def to_dict(self) -> dict[str, Any]:
        """The document `advisor recommend --format json` prints."""
        from .render.report import json_text

        return json.loads(json_text(self.plan, self.rows, self.probe_commands))

    def show(self, fmt: str = "table", **context: Any) -> None:
        """Print (or, for html, write) the advice in format `fmt`, any of advisor.render.FORMATS, as
        `advisor recommend --format fmt` does; `context` are advisor.render.Context's fields
        (stream, show_excluded, target: the file html writes, checked by advisor.render.check)."""
        if fmt not in render.FORMATS:
            from .errors import AdvisorError

            raise AdvisorError(f"unknown format {fmt!r}: one of {', '.join(render.FORMATS)}")
        context["target"] = render.check(fmt, context.get("target"))  # html needs a file; the others take none
        render.show(self, fmt, **context)


def advise(job: JobSpec, *, catalog: Catalog | None = None, store: ResultStore | str | Path | None = None,
           references: str | Path = "builtin", check_account: bool = False, obtainable_only: bool = False,
           top: int = DEFAULT_TOP, program: str = "advisor", say: Callable[[str], None] | None = None,
           prices: Prices | str | Path | None = None) -> Advice:
    """Rank every (instance type, count, region, market) for `job`.

    catalog: default the refreshed cache, else the shipped snapshot (advisor.paths.load_catalog).
    store: the results store whose probes of this workload are used (a path is opened read-only);
    None uses no measurements. references: builtin, none or a reference file (docs/estimates.md).
    check_account / obtainable_only: ask AWS whether the account can get each candidate (needs
    credentials). program: how the printed command lines call the advisor. say: called with each
    warning as it arises (the CLI prints them; Advice.warnings keeps them all either way).
    prices: the team's own prices (a price file or its path: advisor.recommend.prices), else list prices."""
    if isinstance(prices, (str, Path)):
        prices = load_prices(prices)
    if catalog is None:
        from .paths import load_catalog

        catalog = load_catalog()
    spec = workload_spec(job)  # its id picks the measurements; build_plan checks the filters
    warnings: list[str] = []

    def said(lines: list[str]) -> None:
        warnings.extend(lines)
        for w in lines if say else ():
            say(w)

    measurements = []
    if store is not None:
        if isinstance(store, (str, Path)):
            from .store import ResultStore

            opened = ResultStore(Path(store), readonly=True)
        else:
            opened = store
        try:
            # every result of the class: build_plan resolves the arguments against their defaults
            measurements = [r for r in opened.results() if r.workload.model == spec.model]
            said(opened.invalid_warnings())
        finally:
            if opened is not store:
                opened.close()
    plan = build_plan(catalog, job, measurements, top=top * OBTAINABLE_POOL if obtainable_only else top,
                      references=references, prices=prices, spec=spec)
    said(plan.warnings)
    rows, account_warnings = with_account_facts(build(plan), catalog, check=check_account or obtainable_only,
                                                only=obtainable_only, top=top)
    said(account_warnings)
    return Advice(plan, rows, probe_commands(plan.job, rows.probes, program), warnings)
