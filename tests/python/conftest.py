"""Shared set-up of the Python tests: the `gpu` marker skips (visibly, "no CUDA device") where no GPU is seen, and
the session's runtimes use a fresh tuning cache (unless JITUNE_CACHE_DIR chooses one), so tests never write into
the user's own cache."""
import os

import pytest

import jitune


def _has_gpu() -> bool:
    try:
        return jitune.device_count() > 0
    except jitune.JituneError:
        return False


HAS_GPU = _has_gpu()


def pytest_collection_modifyitems(config, items):
    if HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _session_cache(tmp_path_factory):
    if not os.environ.get("JITUNE_CACHE_DIR"):
        jitune.configure(cache_dir=tmp_path_factory.mktemp("jitune-cache"), quiet=True)
    yield
