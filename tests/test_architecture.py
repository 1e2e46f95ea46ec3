"""The package's shape: layers point one way with no import cycles (import-linter's contracts in pyproject.toml),
and no module uses another module's private names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "crayon"


def test_import_contracts_are_kept(monkeypatch):
    """``lint-imports`` (from the repository root) keeps every contract of ``[tool.importlinter]``."""
    cli = pytest.importorskip("importlinter.cli")
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    assert cli.lint_imports(config_filename=str(ROOT / "pyproject.toml"), no_cache=True, no_logo=True) == 0


def _private_uses(path: Path) -> list[str]:
    """Private names this module takes from another module: ``from crayon... import _x``, and ``obj._x`` where no
    code of this module defines ``_x`` (as a function, a class attribute or ``self._x = ...``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    defined = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            defined.add(node.attr)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("crayon"):
            found += [f"{path.relative_to(PACKAGE)}:{node.lineno} imports {alias.name}" for alias in node.names
                      if alias.name.startswith("_") and not alias.name.startswith("__")]
        elif (isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__")
              and node.attr not in defined):
            found.append(f"{path.relative_to(PACKAGE)}:{node.lineno} uses .{node.attr} of {ast.unparse(node.value)}")
    return found


def test_no_module_uses_another_modules_private_names():
    assert [use for path in sorted(PACKAGE.rglob("*.py")) for use in _private_uses(path)] == []


def test_contributing_layout_names_every_module():
    """CONTRIBUTING.md's layout tables stay true to the tree: every module of the package is named there."""
    layout = (ROOT / "CONTRIBUTING.md").read_text(encoding="utf-8")
    missing = [str(path.relative_to(ROOT)) for path in sorted(PACKAGE.rglob("*.py")) if f"{path.name}`" not in layout]
    assert missing == []
