"""Build hook: a wheel carries the top-level ``datasets/``, ``warehouse/`` and ``experiments/`` folders inside
the package, as ``eventatlas/_resources/<name>/`` (read through :func:`eventatlas.resources.resource_dir`).

The folders stay at the top of the repository, the one copy that is edited; an editable install reads
them there, so it gets no copy. Everything else about the project is in pyproject.toml.
"""
from __future__ import annotations

import fnmatch
import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
RESOURCES = ("datasets", "warehouse", "experiments")  # eventatlas.resources.RESOURCES
# a local warehouse, its write-ahead log and bytecode are never shipped
EXCLUDE = ("*.duckdb", "*.duckdb.wal", "*.pyc", "__pycache__", ".*")


class BuildPyWithResources(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in RESOURCES:
            src = HERE / name
            if not src.is_dir():  # building from an sdist made without MANIFEST.in's grafts
                raise FileNotFoundError(f"{src}: the wheel needs the {name}/ folder")
            dest = Path(self.build_lib) / "eventatlas" / "_resources" / name
            if dest.exists():  # a reused build dir: no file removed from the tree may linger
                shutil.rmtree(dest)
            shutil.copytree(src, dest, ignore=shutil.ignore_patterns(*EXCLUDE))

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        for name in RESOURCES:
            for root, dirs, files in os.walk(HERE / name):
                dirs[:] = [d for d in dirs if not any(fnmatch.fnmatch(d, p) for p in EXCLUDE)]
                for f in files:
                    if not any(fnmatch.fnmatch(f, p) for p in EXCLUDE):
                        rel = Path(root, f).relative_to(HERE)
                        outputs.append(str(Path(self.build_lib) / "eventatlas" / "_resources" / rel))
        return outputs


setup(cmdclass={"build_py": BuildPyWithResources})
