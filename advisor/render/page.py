"""`advisor recommend --format html FILE`: the advice as one self-contained page to hand to a
colleague. Everything is inside the file (CSS, the sorting script, the plot as inline SVG drawn by
svgplot.py) and its Content-Security-Policy lets it fetch nothing at all, so it opens the same
offline, from a mail attachment or a file share.

The figures come from the `--format json` document (report.json_document), which the page also
carries whole (<script type="application/json" id="advice">): each table cell holds its figure's
JSON field and value (data-key, data-v), the text beside it is that value for people.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
from datetime import datetime
from html import escape
from pathlib import Path
from typing import Any

from safeio import check_writable, write_atomic

from ..errors import AdvisorError
from ..recommend.planner import Plan
from ..recommend.probeplan.commands import ProbeCommand
from ..recommend.rows import Rows
from . import report
from .svgplot import drawable, svg

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1280px;padding:0 16px;
color:#1a1a1a}
h1{font-size:22px;margin:0 0 8px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.summary{font-size:15px;background:#f4f6f8;padding:10px 12px;border-radius:6px}
.warn{background:#fff6e0;border-left:4px solid #e0a000;padding:6px 10px;margin:6px 0}
table{border-collapse:collapse;margin:6px 0;font-variant-numeric:tabular-nums}
th,td{border-bottom:1px solid #e4e4e4;padding:4px 8px;text-align:left;vertical-align:top}
td.n{text-align:right;white-space:nowrap}
table.sortable th{cursor:pointer;user-select:none;background:#f4f6f8;position:sticky;top:0}
table.sortable th:hover{background:#e6ebf0}
th[aria-sort=ascending]::after{content:" \\25B2"}th[aria-sort=descending]::after{content:" \\25BC"}
tr.hl td{background:#fff3c4}.band{color:#666;font-size:12px}.notes{font-size:12px;max-width:360px}
dt{font-weight:600}dd{margin:0 0 6px 18px}details summary{cursor:pointer}dl.basis{margin:4px 0;font-size:12px}
dl.basis dt{font-weight:600}
dl.basis dd{margin:0 0 4px 10px;max-width:420px}
pre{background:#f4f6f8;padding:8px 10px;border-radius:6px;overflow-x:auto;white-space:pre-wrap}
#plot{width:100%;max-width:960px;height:auto;display:block}
#plot .frame{fill:none;stroke:#888}#plot .grid path{stroke:#000;stroke-opacity:.08}
#plot text{font-size:12px;fill:#333}#plot .axis{font-size:13px}
#plot .frontier path,#plot .frontier-key{fill:none;stroke:#000;stroke-width:1.6}
#plot .ignoring-limits path,#plot .frontier-key.ignoring-limits{stroke-dasharray:3 3}
#plot .frontier circle{fill:none;stroke:#000;stroke-width:1.2}
#plot .limits path,#plot .legend path.budget,
#plot .legend path.deadline{stroke-dasharray:6 4;stroke-width:1.2;shape-rendering:crispEdges}
#plot .cloud{opacity:.55}#plot .bars path{fill:none;stroke-width:1;opacity:.8}
#plot .row-point circle{stroke:#000;stroke-width:1}#plot .row-point .leader{stroke:#777;stroke-width:.7}
#plot .row-point text{font-weight:700;font-size:12px}#plot .row-point.hl circle{stroke-width:3;r:9}
#plot .legend text{font-size:12px}#plot .note{fill:#666}
""".strip()

# Click (or Enter on) a header to sort by it, again to reverse; blanks stay last. A table row and
# its point in the plot light up together.
JS = """
for (const t of document.querySelectorAll("table.sortable")) {
  const heads = Array.from(t.tHead.rows[0].cells);
  heads.forEach((th, i) => {
    th.tabIndex = 0;
    const go = () => {
      const asc = th.getAttribute("aria-sort") !== "ascending";
      heads.forEach(h => h.removeAttribute("aria-sort"));
      th.setAttribute("aria-sort", asc ? "ascending" : "descending");
      const body = t.tBodies[0], rows = Array.from(body.rows);
      const key = r => { const c = r.cells[i]; return c.dataset.v !== undefined ? c.dataset.v : c.textContent.trim(); };
      const blank = rows.filter(r => key(r) === ""), full = rows.filter(r => key(r) !== "");
      const num = full.every(r => !isNaN(Number(key(r))));
      full.sort((a, b) => {
        const x = key(a), y = key(b), d = num ? Number(x) - Number(y) : x.localeCompare(y);
        return asc ? d : -d;
      });
      for (const r of full.concat(blank)) body.appendChild(r);
    };
    th.addEventListener("click", go);
    th.addEventListener("keydown", e => { if (e.key === "Enter" || e.key === " ") { e.preventDefault(); go(); } });
  });
}
const light = (i, on) => {
  for (const el of document.querySelectorAll('[data-i="' + i + '"]')) el.classList.toggle("hl", on);
};
for (const el of document.querySelectorAll("[data-i]")) {
  el.addEventListener("mouseenter", () => light(el.dataset.i, true));
  el.addEventListener("mouseleave", () => light(el.dataset.i, false));
}
""".strip()


def _sha256(text: str) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


# Nothing may be fetched: no default source; only this page's own style and script (by hash) run.
CSP = (f"default-src 'none'; style-src '{_sha256(CSS)}'; script-src '{_sha256(JS)}'; img-src data:; "
       "base-uri 'none'; form-action 'none'")


def check_target(path: str) -> Path:
    """The file --format html writes, refused in one line before anything is computed: a folder,
    a folder that does not exist, or one that cannot be written."""
    target = check_writable(path, "--format html: cannot write")
    if not target.parent.is_dir():
        raise AdvisorError(f"--format html: folder {target.parent} does not exist; create it or choose another place")
    return target


def write_page(path: str, text: str) -> None:
    """The whole page, made before this is called, to a temporary file then renamed: an error
    leaves no half-written page (and an older page at `path` as it was)."""
    write_atomic(check_target(path), text)


def _v(x: Any) -> str:
    """A figure as data-v: exactly the JSON's number (repr round-trips), Infinity for unbounded, empty for none."""
    if x is None or x == "":
        return ""
    if isinstance(x, bool):
        return str(x).lower()
    if isinstance(x, float):
        if math.isnan(x):
            return ""
        return repr(x) if math.isfinite(x) else ("Infinity" if x > 0 else "-Infinity")
    return str(x)


def _td(key: str, value: Any, text: str | None = None, num: bool = False, inner: str = "") -> str:
    shown = escape(text if text is not None else ("" if value is None else str(value)))
    return f'<td{" class=n" if num else ""} data-key="{key}" data-v="{escape(_v(value))}">{shown}{inner}</td>'


def _span(key: str, value: float, text: str) -> str:
    return f'<span data-key="{key}" data-v="{escape(_v(value))}">{escape(text)}</span>'


def _hours(h: float | None) -> str:
    return "" if h is None else report.duration(h)


def _usd(x: float | None) -> str:
    return "" if x is None else "$" + report.money(x)


def _basis(rec: dict[str, Any]) -> str:
    """Where the row's throughput comes from, every field the JSON has, folded."""
    facts = dict(rec["basis"]) | {k: rec[k] for k in ("precision", "scale_out_efficiency", "expected_interruptions",
                                                       "interruption_bucket", "obtainable", "obtainable_reason")
                                  if rec.get(k) is not None}
    body = "".join(f"<dt>{escape(str(k))}</dt><dd>{escape(_text(v))}</dd>" for k, v in facts.items())
    return f'<details><summary>basis</summary><dl class="basis">{body}</dl></details>' if body else ""


def _text(v: Any) -> str:
    return v if isinstance(v, str) else json.dumps(v, default=str)


def candidate_table(doc: dict[str, Any], confidence: float) -> str:
    """The ranked (or closest) rows, sortable; every figure with its JSON field (data-key)."""
    feasible = doc["feasible"]
    recs = doc["recommendations"] if feasible else doc["closest"]
    at = f" @{confidence:.0%}"
    # A workload whose probe counted tokens: tokens/s, $ per million tokens and MFU (report.table_columns)
    tokens = doc["job"].get("tokens_per_sample") is not None
    heads = ["rank", "instance", "count", "region", "market", "samples/s (band)", "source",
             *(["tokens/s"] if tokens else []), "time", "cost",
             *([f"time{at}", f"cost{at}"] if confidence else []), "$/h each", "samples/$",
             *(["$/M tokens", "MFU"] if tokens else []), "notes", *([] if feasible else ["needs"])]
    out = ['<table class="sortable" id="candidates"><thead><tr>',
           "".join(f"<th>{escape(h)}</th>" for h in heads), "</tr></thead><tbody>"]
    for i, r in enumerate(recs):
        band = (f'<div class="band">{_span("throughput_low", r["throughput_low"], report.number(r["throughput_low"]))}-'
                f'{_span("throughput_high", r["throughput_high"], report.number(r["throughput_high"]))}</div>')
        spd = r["samples_per_dollar"]
        cells = [_td("rank", r["rank"], str(r["rank"]) if r["rank"] is not None else "-", num=True),
                 _td("instance_type", r["instance_type"], report.instance_label(r["instance_type"], r["variant"])),
                 _td("count", r["count"], num=True),
                 _td("region", r["region"]), _td("market", r["market"]),
                 _td("samples_per_sec", r["samples_per_sec"], report.number(r["samples_per_sec"]), num=True, inner=band),
                 _td("throughput_source", r["throughput_source"], inner=_basis(r)),
                 *([_td("tokens_per_sec", r["tokens_per_sec"], report.number(r["tokens_per_sec"]), num=True)]
                   if tokens else []),
                 _td("hours", r["hours"], _hours(r["hours"]), num=True),
                 _td("cost_usd", r["cost_usd"], _usd(r["cost_usd"]), num=True)]
        if confidence:
            cells += [_td("hours_at_confidence", r["hours_at_confidence"], _hours(r["hours_at_confidence"]), num=True),
                      _td("cost_usd_at_confidence", r["cost_usd_at_confidence"], _usd(r["cost_usd_at_confidence"]),
                          num=True)]
        notes = r["notes"] + ([r["reason"]] if r["reason"] else [])
        cells += [_td("usd_per_hour", r["usd_per_hour"], f"${r['usd_per_hour']:.4g}", num=True),
                  _td("samples_per_dollar", spd, "paid for" if spd is None else f"{spd:,.0f}", num=True)]
        if tokens:
            usd_m, mfu = r["usd_per_million_tokens"], r["mfu"]
            cells += [_td("usd_per_million_tokens", usd_m, "" if usd_m is None else f"${usd_m:,.3g}", num=True),
                      _td("mfu", mfu, "" if mfu is None else f"{mfu:.0%}", num=True)]
        cells += [f'<td class="notes">{"<br>".join(escape(n) for n in notes)}</td>']
        if not feasible:
            need = "".join(f"<div>{_span(k, r[k], t)}</div>" for k, t in (
                ("budget_needed_usd", report.needs(r["budget_needed_usd"], None)),
                ("deadline_needed_hours", report.needs(None, r["deadline_needed_hours"]))) if r[k])
            cells.append(f"<td>{need}</td>")
        out.append(f'<tr data-i="{i}">' + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def probe_table(doc: dict[str, Any]) -> str:
    heads = ["instance", "samples/s now", "source", "region", "market", "$/h", "probe $", "changes pick",
             "saves then $", "why"]
    out = ['<table class="sortable" id="probes"><thead><tr>', "".join(f"<th>{escape(h)}</th>" for h in heads),
           "</tr></thead><tbody>"]
    for p in doc["probe_next"]:
        band = (f'{_span("throughput_low", p["throughput_low"], report.number(p["throughput_low"]))}-'
                f'{_span("throughput_high", p["throughput_high"], report.number(p["throughput_high"]))}')
        why = p["reason"] + (f"; covers {', '.join(p['covers'])}" if p["covers"] else "")
        out.append("<tr>" + "".join([
            _td("instance_type", p["instance_type"]),
            _td("samples_per_sec", p["samples_per_sec"], "", num=True, inner=band),
            _td("throughput_source", p["throughput_source"]), _td("region", p["region"]), _td("market", p["market"]),
            _td("usd_per_hour", p["usd_per_hour"], f"${p['usd_per_hour']:.4g}", num=True),
            _td("probe_cost_usd", p["probe_cost_usd"], _usd(p["probe_cost_usd"]), num=True),
            _td("p_change", p["p_change"], f"{p['p_change']:.0%}", num=True),
            _td("saving_if_changed_usd", p["saving_if_changed_usd"], _usd(p["saving_if_changed_usd"]), num=True),
            f'<td class="notes">{escape(why)}</td>']) + "</tr>")
    return "".join(out) + "</tbody></table>"


def assumptions(doc: dict[str, Any], now: datetime) -> str:
    job, cat = doc["job"], doc["catalog"]
    fetched = datetime.fromisoformat(cat["fetched_at"].replace("Z", "+00:00"))  # 3.10 reads no Z
    age = (now - fetched).total_seconds() / 86400
    conf = job["confidence"]
    items = [
        ("confidence", f"{conf:.0%}: a candidate fits when it meets the deadline and the budget with probability >= "
                       f"{conf:.0%} over its throughput band and its spot interruptions; cheapest and fastest rank "
                       f"on the {conf:.0%} quantiles" if conf else
                       "0: ranked on the point estimates (the deadline checked at the spot interruption "
                       "bucket's upper rate)"),
        ("prices", doc["prices"] or f"list prices from the catalog ({cat['source']})"),
        ("catalog", (f"{cat['source']}, fetched {fetched:%Y-%m-%d %H:%M} UTC: {age:.0f} days before this page was "
                    "made ('advisor catalog refresh' fetches today's)")),
        ("spot", (f"checkpoint every {job['checkpoint_minutes']:g} min (half of it lost per interruption), "
                 f"{job['restart_minutes']:g} min to restart")),
        ("setup", f"{job['setup_minutes']:g} min billed per run on every instance before training"),
    ]
    out = ["<dl>"] + [f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items]
    if cat["provenance"]:
        out.append(f"<dt>where the catalog's figures come from</dt><dd><details><summary>provenance</summary>"
                   f"<pre>{escape(cat['provenance'])}</pre></details></dd>")
    out.append("<dt>the job</dt><dd><details><summary>every field, as the JSON has it</summary><table>" + "".join(
        f"<tr><th>{escape(k)}</th><td>{escape(_text(v))}</td></tr>" for k, v in job.items()) +
        "</table></details></dd></dl>")
    return "".join(out)


def page(plan: Plan, rows: Rows, probe_commands: list[ProbeCommand], *, command_line: str, now: datetime,
         version: str) -> str:
    """The page's text."""
    doc = report.json_document(plan, rows, probe_commands)
    data = report.json_text(plan, rows, probe_commands)
    for ch, esc in (("&", "\\u0026"), ("<", "\\u003c"), (">", "\\u003e")):  # cannot end the script element
        data = data.replace(ch, esc)
    job = plan.job
    title = f"instance-advisor: {plan.workload_id}"
    parts = [
        "<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{escape(CSP)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escape(title)}</title><style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>",
        f'<p class="summary" id="summary">{escape(report.summary_line(plan))}</p>',
        *(f'<p class="warn">{escape(w)}</p>' for w in plan.warnings),
        *(f"<p>{escape(line)}</p>" for line in report.head_lines(plan, rows)),
        f"<h2>{'Ranked candidates' if rows.feasible else 'Closest candidates' if rows.candidates else 'Candidates'}</h2>",
    ]
    if rows.candidates:
        parts += [("<p>Click a column's header to sort by it (again to reverse). Every figure's source is in the "
                  "source column (basis); the band is the throughput's.</p>"),
                  candidate_table(doc, job.confidence)]
        if any(report.short_run(r) for r in rows.candidates):
            parts.append(f"<p>{escape(report.SHORT_RUN_LINE)}</p>")
    else:
        parts.append(f"<p>{escape(report.NO_CANDIDATES)}</p>")
    if not rows.feasible and plan.alternatives:
        parts.append(f'<p id="alternatives">{escape(report.alternatives_line(plan))}</p>')
    if len(plan.candidates):
        left_out = [r for r in rows.candidates if not drawable(r, job.confidence)]
        parts += ["<h2>Cost against time</h2>", svg(plan, rows),
                  (f"<p>Every candidate evaluated is in the cloud (a sample where there are many); the rows of the "
                  f"table are the marked points, with their throughput band as bars.{_left_out(left_out)}</p>")]
    if rows.candidates:
        parts += ["<h2>Probe next</h2>", f"<p>{escape(report.probe_head(rows.probes))}</p>"]
        if rows.probes:
            parts.append(probe_table(doc))
        parts += [f"<p>{escape(line)}</p>" for line in report.probe_lines(rows.probe_plan, rows.probes)]
        if probe_commands:
            parts.append(f'<pre id="probe-commands">{escape(chr(10).join(c.line() for c in probe_commands))}</pre>')
    parts += ["<h2>Assumptions</h2>", assumptions(doc, now)]
    if plan.exclusions:
        parts.append(excluded_section("instance types left out, and why",
                                      [(e["instance_type"], e["reason"]) for e in doc["excluded"]]))
    parts += made_by(command_line, version, now, data)
    return "\n".join(parts)


def excluded_section(summary: str, excluded: list[tuple[str, str]]) -> str:
    """The folded table of left-out types and why, shared by both pages."""
    return (f"<h2>Excluded ({len(excluded)})</h2><details><summary>{summary}</summary><table>"
            + "".join(f"<tr><td>{escape(n)}</td><td>{escape(w)}</td></tr>" for n, w in excluded)
            + "</table></details>")


def made_by(command_line: str, version: str, now: datetime, data: str) -> list[str]:
    """The page's closing part: the command, the version and time, the embedded JSON document."""
    return ["<h2>Made by</h2>", f'<pre id="command-line">{escape(command_line)}</pre>',
            (f"<p>instance-advisor {escape(version)}, {now:%Y-%m-%d %H:%M} UTC. The page fetches nothing; the "
             "--format json document it was made from is inside it (the script element with id advice).</p>"),
            f'<script type="application/json" id="advice">{data}</script>', f"<script>{JS}</script>",
            "</body></html>", ""]


def _left_out(rs: list) -> str:
    if not rs:
        return ""
    drawn = ", ".join(f"{r.count} x {report.instance_label(r.instance_type, r.variant)}" for r in rs)
    return (f" Not drawn: {len(rs)} row{'s' if len(rs) > 1 else ''} ({drawn})"
            " whose time or cost a log axis cannot show (capacity already paid for costs $0; no throughput figure "
            "means no time).")


def render(result, context) -> None:
    """`--format html FILE` (advisor/render/__init__.py FORMATS): the page written to the context's
    target (render.check has checked it), and where it went said on its stream."""
    from datetime import timezone

    write_page(str(context.target), page(result.plan, result.rows, result.probe_commands,
                                         command_line=context.command_line,
                                         now=context.now or datetime.now(timezone.utc), version=context.version))
    print(f"page written to {context.target} (open it in a browser; it fetches nothing)", file=context.out)
