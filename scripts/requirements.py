"""Prints the Python requirements for development: runtime, extras and build tool.

pyproject.toml is the one list; the Makefile feeds this output to pip so that the extension is
built once by `maturin develop` instead of again by pip. With `--build`, only the build tool.
"""

import sys
import tomllib
from pathlib import Path

project = tomllib.loads((Path(__file__).parent.parent / "pyproject.toml").read_text())
build = project["build-system"]["requires"]
meta = project["project"]
extras = meta.get("optional-dependencies", {})
groups = [build, meta["dependencies"], extras.get("dev", []), extras.get("spark", [])]
if sys.argv[1:] == ["--build"]:  # the build tool alone: the Makefile installs it first
    groups = [build]
for requirement in [r for group in groups for r in group]:
    print(requirement)
