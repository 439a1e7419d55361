"""The one rule of dependencies: a role never imports another role."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("memoryd", "loopd", "brokerd", "mattermostd")
ROLE_PACKAGES = (*ROLES, "bxctl")


def imported_top_levels(source: str) -> set[str]:
    """The top-level package of every import statement in `source`."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_the_checker_sees_every_import_form() -> None:
    source = "import loopd\nimport x.y as z\nfrom brokerd._x import y\nfrom . import local\n"
    assert imported_top_levels(source) == {"loopd", "x", "brokerd"}


@pytest.mark.parametrize("role", ROLE_PACKAGES)
def test_no_role_imports_another_role(role: str) -> None:
    base = ROOT / ("tools" if role == "bxctl" else "services") / role / "src" / role
    modules = sorted(base.rglob("*.py"))
    assert modules, f"no modules found under {base}"
    others = set(ROLE_PACKAGES) - {role}
    offenders = {
        str(module.relative_to(ROOT)): sorted(imported_top_levels(module.read_text()) & others)
        for module in modules
    }
    assert {m: o for m, o in offenders.items() if o} == {}


@pytest.mark.parametrize("lib", ["proto", "entries"])
def test_libraries_import_no_role(lib: str) -> None:
    for module in (ROOT / "libs" / lib / "src" / lib).rglob("*.py"):
        assert imported_top_levels(module.read_text()) & set(ROLE_PACKAGES) == set(), module


@pytest.mark.parametrize(
    "member", [*(f"services/{r}" for r in ROLES), "tools/bxctl", "libs/entries"]
)
def test_members_declare_no_role_dependency(member: str) -> None:
    project = tomllib.loads((ROOT / member / "pyproject.toml").read_text())["project"]
    deps = {d.split(">")[0].split("=")[0].strip() for d in project["dependencies"]}
    assert deps & {f"boxmaker-{r}" for r in ROLE_PACKAGES} == set()
