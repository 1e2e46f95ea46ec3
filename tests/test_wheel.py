"""The built wheel, installed into a fresh venv, works without the source checkout: the README's first example
runs, the shipped profiles (package data) load, the OpenAI vocabulary files are inside, the ``crayon`` command
runs. Offline: the fresh venv sees the test venv's dependencies through a .pth file, and nothing is downloaded."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ["crayon/cartridges/lite.crayon", "crayon/cartridges/standard.crayon",
           *(f"crayon/data/openai/{name}.tiktoken.gz" for name in ("cl100k_base", "o200k_base", "r50k_base", "p50k_base")),
           "crayon/data/openai/README.md"]


def first_python_block(markdown: str) -> str:
    return re.search(r"```python\n(.*?)```", markdown, re.S).group(1)


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv with the wheel built from this checkout installed (no dependencies: those come
    from this test's venv through a .pth file)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, source / name)
    shutil.copytree(ROOT / "crayon", source / "crayon", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    built = subprocess.run([*pip, "wheel", "--no-deps", "--no-build-isolation", "--no-index", str(source),
                            "-w", str(work / "dist")], capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    venv = work / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    wheel = next((work / "dist").glob("crayon_tokenizer-*.whl"))
    result = subprocess.run([*pip, "--python", str(python), "install", "--no-deps", "--no-index", str(wheel)],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   capture_output=True, text=True, check=True, env=clean_env()).stdout.strip()
    Path(site_packages, "test-venv-dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def clean_env() -> dict[str, str]:
    """This environment less PYTHONPATH and PYTHONHOME, so only the fresh venv decides what is imported."""
    return {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "PYTHONHOME")}


def run_in(python: Path, code: str, cwd: Path) -> str:
    result = subprocess.run([str(python), "-c", code], cwd=cwd, capture_output=True, text=True, timeout=600,
                            env=clean_env())
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


def test_the_wheel_holds_the_package_data(installed):
    wheel = next(installed.parents[2].glob("dist/crayon_tokenizer-*.whl"))
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert set(SHIPPED) <= names
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    import crayon

    assert "Name: crayon-tokenizer" in metadata and f"Version: {crayon.__version__}" in metadata
    assert "License-Expression: MIT" in metadata and "Requires-Python: >=3.10" in metadata


def test_readme_first_example_runs_from_the_installed_wheel(installed, tmp_path):
    example = first_python_block((ROOT / "README.md").read_text(encoding="utf-8"))
    probe = example + "\n" + textwrap.dedent("""
        import json, crayon
        from crayon.profiles import find_vocabulary_file, shipped_profiles_dir
        lite = crayon.load("lite")
        assert lite.decode(lite.encode("Hello, world!")) == "Hello, world!"
        gpt2 = crayon.get_encoding("gpt2")
        print(json.dumps({"crayon": crayon.__file__, "lite": str(shipped_profiles_dir()),
                          "vocab": [str(find_vocabulary_file(n)) for n in crayon.list_encoding_names()],
                          "gpt2": gpt2.encode("hello  world")}))
    """)
    found = json.loads(run_in(installed, probe, tmp_path).splitlines()[-1])
    venv = installed.parents[1]
    for path in (found["crayon"], found["lite"], *found["vocab"]):
        assert Path(path).is_relative_to(venv), path  # the installed package, not this checkout
    import crayon

    assert found["gpt2"] == crayon.get_encoding("gpt2").encode("hello  world")


def test_the_installed_command_runs(installed, tmp_path):
    command = installed.parent / "crayon"
    result = subprocess.run([str(command), "--version"], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                            env=clean_env())
    import crayon

    assert result.returncode == 0 and result.stdout.strip() == f"crayon-tokenizer {crayon.__version__}"

