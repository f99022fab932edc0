"""One home per table of values: a set of two or more words written out as a literal (a tuple or list
constant, a `Literal[...]`, an argparse `choices=`) stands in one place; everywhere else names it
(`get_args(Market)`, an import). Read from the source, as tests/test_layout.py reads imports.

advisor/schemas/ is read too: a document's field names its table's home (`Market`, `LaunchState`,
`Literal[STRATEGIES]`), and the generated schema files are JSON, not read. ALLOWED lists value sets
that are alike by chance, each with why.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("advisor", "catalog", "lightning_module", "safeio")
ALLOWED = {
    # estimate/calibrate's kinds of probed device vs a GPU + CPU run's rank device: two concepts
    frozenset({"cpu", "gpu"}),
}


def words(node: ast.AST) -> tuple[str, ...] | None:
    if (isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) >= 2
            and all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)):
        return tuple(e.value for e in node.elts)
    return None


def tables(root: Path, packages=PACKAGES) -> dict[frozenset, list[str]]:
    """Every literal set of words -> where it is written (path:line)."""
    found: dict[frozenset, list[str]] = {}
    for pkg in packages:
        for path in sorted((root / pkg).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id == "Literal":
                    values = words(node.slice)
                elif (isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None
                      or isinstance(node, ast.keyword) and node.arg == "choices"):  # a constant, an option's choices
                    values = words(node.value)
                else:
                    continue
                if values:
                    found.setdefault(frozenset(values), []).append(f"{rel}:{node.lineno}")
    return found


def twice(found: dict[frozenset, list[str]]) -> dict[frozenset, list[str]]:
    return {k: v for k, v in found.items() if len(v) > 1 and k not in ALLOWED}


def test_no_table_of_values_is_written_twice():
    assert twice(tables(ROOT)) == {}


def test_the_scan_finds_a_retyped_table(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text('from typing import Literal\nMarket = Literal["on-demand", "spot"]\n')
    (tmp_path / "pkg" / "b.py").write_text('def f(p):\n    p.add_argument("--m", choices=("spot", "on-demand"))\n')
    (tmp_path / "pkg" / "c.py").write_text('KINDS = ("cpu", "gpu", "tpu")\n')
    assert twice(tables(tmp_path, ("pkg",))) == {frozenset({"on-demand", "spot"}): ["pkg/a.py:2", "pkg/b.py:2"]}
