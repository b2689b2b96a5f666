import os
import shutil

import pytest

from udtbed import network


def pytest_collection_modifyitems(config, items):
    if os.geteuid() != 0:
        skip = pytest.mark.skip(reason="needs root (network namespaces)")
        for item in items:
            if "needs_root" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def no_leftover_namespaces(request):
    """Every root test must leave none of its namespaces behind."""
    yield
    if "needs_root" in request.keywords and os.geteuid() == 0:
        mine = network.list_namespaces(f"{network.PREFIX}{os.getpid()}-")
        network.cleanup(f"{network.PREFIX}{os.getpid()}-")
        assert not mine, f"namespaces left behind: {mine}"


def have_linkem() -> bool:
    return network.LINKEM.exists() and shutil.which("ip") is not None
