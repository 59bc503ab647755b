"""NeMo Gym's sandbox helpers (`nemo_gym.sandbox.utils`): thread-count variables from a CPU
limit, and image-prefix rewrites."""

from __future__ import annotations

CPU_CAP_ENV_VARS: tuple[str, ...] = (
    "OMP_NUM_THREADS", "OMP_THREAD_LIMIT", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS", "PYTHON_CPU_COUNT", "NUMBA_NUM_THREADS", "LOKY_MAX_CPU_COUNT",
    "POLARS_MAX_THREADS", "PYTEST_XDIST_AUTO_NUM_WORKERS", "DJANGO_TEST_PROCESSES", "GOMAXPROCS", "CARGO_BUILD_JOBS",
    "RAYON_NUM_THREADS", "RUST_TEST_THREADS", "UV_THREADPOOL_SIZE", "CMAKE_BUILD_PARALLEL_LEVEL",
)  # fmt: skip
"""What libraries and build tools read for how many threads to use."""


def cpu_cap_env(cpu: float | int | None) -> dict[str, str]:
    """Each of CPU_CAP_ENV_VARS set to the whole cores of `cpu` (at least 1); none when unset."""
    if cpu is None:
        return {}
    return dict.fromkeys(CPU_CAP_ENV_VARS, str(max(1, int(cpu))))


def rewrite_image(image: str | None, rewrites: list[dict[str, str]]) -> str | None:
    """`image` with the first matching `from` prefix replaced by its `to`."""
    if image is None:
        return None
    for rewrite in rewrites:
        if image.startswith(rewrite["from"]):
            return rewrite["to"] + image[len(rewrite["from"]):]
    return image
