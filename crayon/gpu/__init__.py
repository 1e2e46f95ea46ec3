"""The CUDA engine (numba-cuda). Importing this package needs no GPU and does not import numba:
``crayon.gpu.engine`` holds the engine, ``crayon.gpu.kernels`` the kernels, ``crayon.gpu.capacity`` the
memory planning and the ``backend="auto"`` policy re-exported here."""

from crayon.gpu.capacity import cuda_status, should_use_gpu

__all__ = ["cuda_status", "should_use_gpu"]
