"""The first run on a fresh machine: the kernel build says what it does, runs once per machine under a file lock
(a second process waits for it), a failed build is remembered, the cache folder follows XDG_CACHE_HOME, and
``crayon warmup`` builds ahead of time."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from crayon.jit import aot

ROOT = Path(__file__).resolve().parents[1]
ENCODE = """
import crayon
from crayon.jit import aot
tok = crayon.load("cl100k_base")
assert tok.encode("hello world") == [15339, 1917]
print("kernels:", tok.engine.kernels_kind)
"""
FAILING_BUILD = """
from crayon.jit import aot
def no_compiler(name, path):
    raise OSError("no C compiler")
aot.build_kernels = no_compiler
"""


def _start(code: str, **env) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **env})


def _finish(process: subprocess.Popen) -> tuple[str, str]:
    out, err = process.communicate(timeout=600)
    assert process.returncode == 0, err[-3000:]
    return out, err


def test_two_processes_on_an_empty_kernel_folder_compile_once(tmp_path):
    """The first says it compiles (one line with an estimate); the second, started while the first compiles,
    says it waits and then loads the first one's module instead of compiling again."""
    env = {"CRAYON_KERNEL_DIR": str(tmp_path), "CRAYON_AOT": "1"}
    first = _start(ENCODE, **env)
    lock = tmp_path / f"{aot.module_name()}.lock"
    deadline = time.monotonic() + 120
    while not lock.exists() and time.monotonic() < deadline and first.poll() is None:
        time.sleep(0.05)
    assert lock.exists(), "the first process never took the build lock"
    second = _start(ENCODE, **env)
    (out1, err1), (out2, err2) = _finish(first), _finish(second)
    compiling = "crayon: compiling the encoding kernels for this machine, once (about"
    assert err1.count(compiling) == 1 and len([line for line in err1.splitlines() if line.strip()]) == 1, err1
    assert compiling not in err2 and "waiting for another process to finish compiling" in err2, err2
    assert out1.strip() == out2.strip() == "kernels: aot"
    assert aot.module_path().name in os.listdir(tmp_path)


def test_a_failed_build_warns_in_one_process_only_and_warmup_retries(tmp_path):
    env = {"CRAYON_KERNEL_DIR": str(tmp_path), "CRAYON_AOT": "1"}
    _, err = _finish(_start(FAILING_BUILD + ENCODE, **env))
    assert "could not build its ahead-of-time kernels (OSError: no C compiler)" in err
    assert "`crayon warmup` retries" in err
    failed = tmp_path / f"{aot.module_name()}.failed"
    assert "no C compiler" in failed.read_text()
    out, err = _finish(_start(FAILING_BUILD + ENCODE, **env))
    assert err.strip() == "" and out.strip() == "kernels: numba"
    retried = _start(FAILING_BUILD + "aot.warmup()", **env)
    _, err = retried.communicate(timeout=600)
    assert retried.returncode != 0 and "OSError: no C compiler" in err


def test_the_kernel_folder_follows_xdg_cache_home(monkeypatch, tmp_path):
    monkeypatch.delenv("CRAYON_KERNEL_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert aot.kernel_dir() == tmp_path / "crayon" / "kernels"
    from crayon.profiles import cache_dirs

    monkeypatch.delenv("CRAYON_PROFILE_DIR", raising=False)
    assert cache_dirs() == [tmp_path / "crayon" / "profiles"]
    monkeypatch.setenv("CRAYON_KERNEL_DIR", str(tmp_path / "mine"))
    assert aot.kernel_dir() == tmp_path / "mine"


def test_warmup_command_builds_the_kernels_once(tmp_path):
    """``crayon warmup`` (for Docker and Ray images) reports the module it built or found."""
    env = {**os.environ, "CRAYON_KERNEL_DIR": str(tmp_path / "k"), "CRAYON_PROFILE_DIR": str(tmp_path / "p"),
           "XDG_CACHE_HOME": str(tmp_path / "xdg")}  # no r50k_base cached by an earlier run in the user's cache
    shared = aot.module_path()
    built = [aot.module_path(kernel_set) for kernel_set in aot.KERNEL_SETS]
    if not all(path.is_file() for path in built):
        pytest.skip("the kernels are not built in the default folder")
    # built modules copied in (with their recorded digests) are what warmup finds: no second build in the tests
    (tmp_path / "k").mkdir()
    for source in (*built, *(Path(f"{path}.sha256") for path in built)):
        (tmp_path / "k" / source.name).write_bytes(source.read_bytes())
    result = subprocess.run([sys.executable, "-m", "crayon", "warmup", "r50k_base"], cwd=ROOT, capture_output=True,
                            text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "kernels: " + str(tmp_path / "k" / shared.name) in result.stdout
    assert "training kernels: " + str(tmp_path / "k" / built[1].name) in result.stdout
    assert "r50k_base: compiled" in result.stdout or "r50k_base: ready" in result.stdout
    assert (tmp_path / "p" / "r50k_base.crayon").is_file()


def test_default_threads_follow_affinity_and_the_container_cpu_quota(tmp_path, monkeypatch):
    from crayon.jit import cores

    v2, v1_quota, v1_period = tmp_path / "cpu.max", tmp_path / "cfs_quota_us", tmp_path / "cfs_period_us"
    quota = lambda: cores.cgroup_cpu_quota(v2, v1_quota, v1_period)
    assert quota() is None  # no cgroup files: no limit
    v2.write_text("max 100000\n")
    assert quota() is None
    v2.write_text("150000 100000\n")
    assert quota() == 1.5
    v2.unlink()
    v1_quota.write_text("-1\n"), v1_period.write_text("100000\n")
    assert quota() is None
    v1_quota.write_text("300000\n")
    assert quota() == 3.0

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: None)
    assert cores.available_cores() == 4
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 1.5)
    assert cores.available_cores() == 2  # a quota of 1.5 cores rounds up
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 0.2)
    assert cores.available_cores() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0})
    monkeypatch.setattr(cores, "cgroup_cpu_quota", lambda: 8.0)
    assert cores.available_cores() == 1


def test_the_engines_default_thread_count_is_available_cores(monkeypatch):
    """No module decides a thread count from os.cpu_count(): the machine's count ignores affinity and quotas."""
    offenders = [str(path.relative_to(ROOT)) for path in (ROOT / "crayon").rglob("*.py")
                 if "cpu_count()" in path.read_text(encoding="utf-8") and path.name != "cores.py"]
    assert offenders == []
    from crayon.jit import engine

    monkeypatch.setattr(engine, "available_cores", lambda: 3)
    assert engine._threads(None, 10) == 3 and engine._threads(None, 2) == 2 and engine._threads(5, 10) == 5
