"""Start-up: a fresh ``python -c "import crayon; crayon.load('cl100k_base').encode('hello')"`` beside tiktoken's and
quicktok's (best of 3, caches warm), crayon with numba's dispatchers instead of the compiled kernels
(``CRAYON_AOT=0``), the one-time cost on empty caches, and where crayon's start-up goes (median of 5 fresh
interpreters: Python itself, ``import numpy``, ``import crayon``, ``crayon.load``, the first ``encode``).

    python -m bench.startup

Writes bench/results/startup.json.
"""

from __future__ import annotations

import json
import platform
import statistics
import subprocess
import time

from bench.peers import PYTHON, RESULTS, ROOT, cold_start

STAGES = """
import time
start = time.perf_counter()
import numpy
numpy_done = time.perf_counter()
import crayon
import_done = time.perf_counter()
tok = crayon.load("cl100k_base")
load_done = time.perf_counter()
tok.encode("hello")
encode_done = time.perf_counter()
import sys
print(numpy_done - start, import_done - numpy_done, load_done - import_done, encode_done - load_done,
      tok.engine.kernels_kind, "numba" in sys.modules)
"""


def stages(runs: int = 5) -> dict:
    """Median seconds of each start-up stage in fresh interpreters, and the whole process."""
    rows = []
    for _ in range(runs + 1):
        wall = _timed([PYTHON, "-c", STAGES])
        out = wall.pop("stdout").split()
        rows.append({"numpy": float(out[0]), "import crayon": float(out[1]), "load": float(out[2]),
                     "first encode": float(out[3]), "process": wall["seconds"], "kernels": out[4],
                     "numba imported": out[5] == "True"})
    rows = rows[1:]  # the first run may fill caches
    empty = _timed([PYTHON, "-c", "pass"])["seconds"]
    result = {stage: statistics.median(row[stage] for row in rows)
              for stage in ("numpy", "import crayon", "load", "first encode", "process")}
    result["python -c pass"] = empty
    result["kernels"] = rows[-1]["kernels"]
    result["numba imported"] = rows[-1]["numba imported"]
    return result


def _timed(command: list[str]) -> dict:
    start = time.perf_counter()
    done = subprocess.run(command, check=True, cwd=ROOT, capture_output=True, text=True)
    return {"seconds": time.perf_counter() - start, "stdout": done.stdout}


def main() -> None:
    report = {"machine": platform.platform(), "python": platform.python_version(), "cold_start": cold_start()}
    report["stages"] = stages()
    print("\ncrayon start-up by stage (median of 5 fresh interpreters, seconds):")
    for stage, value in report["stages"].items():
        print(f"  {stage:<16} {value:.3f}" if isinstance(value, float) else f"  {stage:<16} {value}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "startup.json").write_text(json.dumps(report, indent=2))
    print(f"wrote {RESULTS / 'startup.json'}")


if __name__ == "__main__":
    main()
