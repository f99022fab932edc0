"""The import graph the layout promises (docs/layout.md): read from the source, lazy
and TYPE_CHECKING imports included, so a loop cannot hide behind a function-level import.

- safeio/ (safe reading and writing of files) imports none of advisor/, catalog/, lightning_module/:
  everything builds on it, so it can build on nothing of ours.
- catalog/ imports neither advisor/ nor lightning_module/; lightning_module/ does not import advisor/.
- Inside advisor/ the flow is commands -> advice -> render -> {recommend, schemas} -> {estimate, ec2}
  -> plumbing, no arrow back.
- No module imports itself back through others.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("advisor", "catalog", "lightning_module", "safeio")
# advisor/'s layers, lowest first: a module may import its own layer's package or a lower layer.
LAYERS = (
    # plumbing; advisor.records: how an output record's fields are declared (its JSON, CSV, schema model)
    {"advisor.errors", "advisor.output", "advisor.paths", "advisor.options", "advisor.store", "advisor.records"},
    {"advisor.estimate", "advisor.ec2"},
    {"advisor.recommend", "advisor.schemas"},  # schemas: the JSON documents (recommend's reads the JobSpec)
    {"advisor.render"},  # every way a result is shown: reads the rows and the documents, computes nothing
    {"advisor.advice"},  # the facade: recommend's answer, shown by render's formats
    {"advisor.commands", "advisor.cli", "advisor.__main__"},
)
API = "advisor"  # advisor/__init__.py re-exports the declared API from every layer


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_module(name: str) -> bool:
    p = ROOT.joinpath(*name.split("."))
    return p.with_suffix(".py").exists() or (p / "__init__.py").exists()


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            mod = module_name(path)
            here = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
            out = edges.setdefault(mod, set())
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    out |= {a.name for a in node.names if a.name.split(".")[0] in PACKAGES}
                elif isinstance(node, ast.ImportFrom):
                    base = here.split(".")[: len(here.split(".")) - node.level + 1] if node.level else []
                    target = ".".join(base + ([node.module] if node.module else []))
                    if target.split(".")[0] not in PACKAGES:
                        continue
                    subs = [f"{target}.{a.name}" for a in node.names if is_module(f"{target}.{a.name}")]
                    out |= set(subs) if subs else {target}
            out.discard(mod)
    return edges


def layer(mod: str) -> int | None:
    for i, members in enumerate(LAYERS):
        if any(mod == m or mod.startswith(m + ".") for m in members):
            return i
    return None


def test_catalog_and_the_probe_import_nothing_above_them():
    bad = [(m, t) for m, ts in graph().items() for t in ts
           if (m.startswith("safeio") and not t.startswith("safeio"))
           or (m.startswith("catalog") and not t.startswith(("catalog", "safeio")))
           or (m.startswith("lightning_module") and t.startswith("advisor"))]
    assert bad == []


def test_advisor_imports_flow_down_its_layers():
    bad = []
    for m, ts in graph().items():
        if not m.startswith("advisor") or m == API:
            continue
        lm = layer(m)
        assert lm is not None, f"{m} is in no layer: add it to LAYERS"
        for t in ts:
            lt = layer(t) if t != API else None
            if t == API and m not in ("advisor.cli",):
                bad.append((m, t))  # only the CLI reads the package root (its version)
            elif lt is not None and lt > lm:
                bad.append((m, t))
            elif lt == lm and lm == 1 and t.split(".")[1] != m.split(".")[1]:
                bad.append((m, t))  # estimate and ec2 stand side by side
    assert bad == []


def test_no_import_loops():
    edges = graph()
    # Tarjan's strongly connected components
    index, low, stack, on, comps, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            comps.append(comp)

    for v in sorted(edges):
        if v not in index:
            visit(v)
    loops = [sorted(c) for c in comps if len(c) > 1 and API not in c]
    assert loops == []
