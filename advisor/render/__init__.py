"""Every way a result is shown, behind one registry of formats.

FORMATS names each `--format` of `advisor recommend` and where it is rendered: the module (imported
only when the format is asked for: pydantic for json, matplotlib never unless --plot) and its
function, called as `function(result, context)`. A new format is one module with that function and
one line here; the CLI's --format choices and help, the dispatch and `Advice.show` all read this
table. The modules: report (text, markdown, csv and json), page (the html page, with svgplot's
SVG), plot (--plot's PNG/SVG/PDF, matplotlib), skypilot (the SkyPilot task) and probe (a probe
result's text: the ladder table and the summary lines `probe` and `results show` print).

This package is light on purpose: the CLI imports it at start-up to list the formats.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TextIO

if TYPE_CHECKING:
    from ..recommend.planner import Plan
    from ..recommend.probeplan.commands import ProbeCommand
    from ..recommend.rows import Rows


class Result(Protocol):
    """What a format shows (advisor.advice.Advice is one): the plan, its rows and the probe commands."""

    plan: Plan
    rows: Rows
    probe_commands: list[ProbeCommand]


@dataclass(frozen=True)
class Context:
    """What a format may need besides the result. stream: where it prints (None: stdout at the
    time of the call); target: the file a to_file format writes (checked first by Format.check);
    command_line, now, version: what the page says it was made by and when."""

    stream: TextIO | None = None
    show_excluded: bool = False
    target: Path | None = None
    command_line: str = ""
    now: datetime | None = None
    version: str = ""

    @property
    def out(self) -> TextIO:
        return self.stream or sys.stdout


@dataclass(frozen=True)
class Format:
    module: str  # under advisor.render
    function: str  # function(result, context)
    help: str = ""  # what --help says of it ("" for the formats every command has: advisor.output.FORMATS)
    to_file: str = ""  # what it writes to the file named after it ("a page"); "" when it prints to stdout
    example: str = ""  # such a file's name, for the error that asks for one
    for_people: bool = False  # its stdout is words for a person: where --plot wrote is said there too
    # its function(advice, context) for a token workload's answer (recommend --model-shape), in
    # advisor/render/tokens.py; "" where the format is not offered for token workloads
    tokens: str = ""

    def renderer(self) -> Callable[[Result, Context], None]:
        return getattr(importlib.import_module(f"{__name__}.{self.module}"), self.function)


FORMATS: dict[str, Format] = {
    "table": Format("report", "render_table", for_people=True, tokens="render_table"),
    "json": Format("report", "render_json"),  # a token workload's json is its own document (recommend-tokens)
    "csv": Format("report", "render_csv", tokens="render_csv"),
    "markdown": Format("report", "render_markdown", tokens="render_markdown"),
    "skypilot": Format("skypilot", "render",
                       help="skypilot: a SkyPilot task file for the ranked candidates (sky launch / sky jobs launch)",
                       tokens="render_skypilot"),
    "html": Format("page", "render", to_file="a page", example="advice.html", for_people=True,
                   help="html FILE: the advice as one self-contained page written to FILE (table, plot, probe "
                        "plan, sources; it fetches nothing), to open in a browser or send", tokens="render_html"),
}


def token_formats() -> tuple[str, ...]:
    """The formats a token workload's answer is offered in: json (its own document) and those with a
    tokens renderer."""
    return ("json",) + tuple(name for name, f in FORMATS.items() if f.tokens)


def show_tokens(advice: Any, name: str, context: Context | None = None, **given: Any) -> None:
    """Render a token workload's answer (advisor.recommend.llm.LlmAdvice) in format `name`."""
    fn = getattr(importlib.import_module(f"{__name__}.tokens"), FORMATS[name].tokens)
    fn(advice, context or Context(**given))


def extra_formats(common: tuple[str, ...]) -> tuple[str, ...]:
    """The formats besides `common` (every command's: advisor.output.FORMATS), in registry order."""
    return tuple(name for name in FORMATS if name not in common)


def check(name: str, file: str | None) -> Path | None:
    """The file format `name` is to write, refused in one line before anything is computed or
    printed (advisor.errors.AdvisorError): none given to a format that writes one, one given to a
    format that prints, or (the format's own check_target) one that cannot be written."""
    from ..errors import AdvisorError

    fmt = FORMATS[name]
    if fmt.to_file:
        if not file:
            raise AdvisorError(f"--format {name} writes {fmt.to_file} to a file: give its name after {name} "
                               f"(--format {name} {fmt.example})")
        return importlib.import_module(f"{__name__}.{fmt.module}").check_target(file)
    if file:
        takers = " or ".join(f"--format {n}" for n, f in FORMATS.items() if f.to_file)
        raise AdvisorError(f"unexpected argument {file!r}: only {takers} takes a file name "
                           "(the other formats print to stdout)")
    return None


def show(result: Result, name: str, context: Context | None = None, **given: Any) -> None:
    """Render `result` in format `name` (a key of FORMATS); `given` are Context's fields."""
    FORMATS[name].renderer()(result, context or Context(**given))
