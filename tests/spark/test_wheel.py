"""The shipped wheel on executors: built as the README says (``maturin build --release
--compatibility manylinux_2_28``: the one zig build, for glibc 2.28), its platform tag checked
by ``auditwheel``, installed with binary packages only into a fresh environment that has no
compiler and does not contain the source tree, packed with ``venv-pack`` and shipped to a
``local-cluster`` job with ``spark.archives`` exactly as ``docs/spark.md`` describes. The
executors must import verstore from that environment, and the job's result must match the
oracle.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.register_assert_rewrite("streams")
from streams import (  # noqa: E402 (imported once marked for rewriting)
    OUT_COLUMNS,
    gen_oracle,
    gen_schemas,
    generate,
    normalized,
    write_batches,
)

SOURCE = Path(__file__).resolve().parents[2]
JOB = Path(__file__).with_name("local_cluster_job.py")


def run(*command: Any, cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        [str(c) for c in command], capture_output=True, text=True, cwd=cwd, env=env, timeout=1200
    )
    assert done.returncode == 0, f"{command} failed:\n{done.stdout[-3000:]}\n{done.stderr[-6000:]}"
    return done.stdout


#: The newest glibc the wheel may need (manylinux_2_28: RHEL 8, Amazon Linux 2023, Debian 10).
MANYLINUX = (2, 28)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built as the README says (on a warm tree cargo finds the build fresh)."""
    work = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ)
    env.setdefault("CARGO_TARGET_DIR", str(Path.home() / ".cache" / "verstore" / "target"))
    env["PATH"] = f"{SOURCE / 'scripts' / 'zig'}{os.pathsep}{env.get('PATH', '')}"  # as make does
    maturin = Path(sys.executable).with_name("maturin")
    compatibility = f"manylinux_{MANYLINUX[0]}_{MANYLINUX[1]}"
    run(maturin, "build", "--release", "--quiet", "--compatibility", compatibility,
        "--out", work / "dist", cwd=SOURCE, env=env)  # fmt: skip
    (built,) = (work / "dist").glob("verstore-*.whl")
    return built


@pytest.fixture(scope="module")
def packed_environment(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv-pack archive of a fresh environment with the wheel and its dependencies,
    installed from binary packages only, with no compiler to be found."""
    work = tmp_path_factory.mktemp("packed")
    env = {**os.environ, "CC": "/bin/false", "CXX": "/bin/false", "PATH": "/usr/bin:/bin"}
    venv = work / "env"
    run(sys.executable, "-m", "venv", venv)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--only-binary", ":all:"]
    run(*pip, wheel, "pandas<3", "venv-pack", env=env)
    run(venv / "bin" / "venv-pack", "-q", "-p", venv, "-o", work / "env.tar.gz")
    return work / "env.tar.gz"


def test_the_wheel_needs_no_newer_glibc_than_manylinux_2_28(wheel: Path) -> None:
    """auditwheel reads the symbol versions the extension needs: the wheel installs on every
    Linux with glibc 2.28 or newer, and needs no libstdc++ (zig's libc++ is linked in)."""
    shown = " ".join(run(Path(sys.executable).with_name("auditwheel"), "show", wheel).split())
    tag = re.search(r'the following platform tag: "manylinux_(\d+)_(\d+)_x86_64"', shown)
    assert tag and (int(tag[1]), int(tag[2])) <= MANYLINUX, shown
    assert f"manylinux_{tag[1]}_{tag[2]}_x86_64.whl" in wheel.name, (wheel.name, shown)
    needs = re.search(r'constrains the platform tag to "manylinux_(\d+)_(\d+)_x86_64"', shown)
    assert needs is None or (int(needs[1]), int(needs[2])) <= MANYLINUX, shown
    assert "libstdc++" not in shown, shown


@pytest.mark.usefixtures("local_cluster_work")
def test_executors_run_the_wheel_from_a_packed_environment(
    packed_environment: Path, tmp_path: Path
) -> None:
    batches = generate(43, batches=3)
    _, stream_pa, _, table_pa = gen_schemas(False)
    write_batches(tmp_path / "orders", tmp_path / "prices", batches, stream_pa, table_pa)
    env = dict(os.environ)
    env.pop("PYSPARK_PYTHON", None)
    out = run(sys.executable, JOB, tmp_path, packed_environment, cwd=tmp_path, env=env)
    (line,) = [line for line in out.splitlines() if line.startswith("RESULT ")]
    result: dict[str, Any] = json.loads(line.removeprefix("RESULT "))

    assert result["executors"] == 2
    for module, python in result["executor_verstore"]:
        assert "/environment/" in module and "/environment/" in python, (module, python)
        assert not module.startswith(str(SOURCE / "python")), module  # never the source tree
    rows = [row for b in sorted(result["batches"], key=int) for row in result["batches"][b]]
    expected = gen_oracle(batches, how="left", tie_breaker="seq")
    assert normalized(rows, OUT_COLUMNS) == normalized(expected, OUT_COLUMNS)
