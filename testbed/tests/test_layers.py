"""udtbed's layers (udtbed/__init__.py) held by the import contract (ci/import_graph.py, in `make
check`): the package as it is passes, and an import planted in a copy of it that runs back up a
layer, across to a sibling or into the entry point fails with its file and line; the entry point
(``__main__``) imports the commands' table and no layer below it."""

import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]
CHECKER = REPO / "ci/import_graph.py"


def load_checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("import_graph", CHECKER)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # its dataclasses look their module up by name
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture
def copy(tmp_path: Path) -> Path:
    """A repository holding only a copy of testbed/udtbed."""
    shutil.copytree(REPO / "testbed/udtbed", tmp_path / "testbed/udtbed", ignore=shutil.ignore_patterns("__pycache__"))
    return tmp_path


def plant(repo: Path, module: str, line: str) -> int:
    """Append ``line`` to testbed/udtbed/``module``; the line number it got."""
    path = repo / "testbed/udtbed" / module
    text = path.read_text()
    path.write_text(text + line + "\n")
    return text.count("\n") + 1


def test_the_package_keeps_its_layers() -> None:
    graph = load_checker()
    assert [v for v in graph.violations(REPO) if v.startswith("testbed/")] == []
    assert graph.unlayered(REPO) == []


def test_the_contract_passes_an_untouched_copy(copy: Path) -> None:
    graph = load_checker()
    assert graph.violations(copy) == [] and graph.unlayered(copy) == []


@pytest.mark.parametrize(
    ("module", "line", "area", "target"),
    [
        # the network builder reaching up for an experiment's definitions: the back-arrow of issue 43
        ("emulation/network.py", "from ..experiments.experiment import Part", "emulation", "udtbed.experiments"),
        ("emulation/cores.py", "from udtbed.results import results", "emulation", "udtbed.results"),
        # a module of a package inside a layer (results/report/) is held by its layer's rules too
        ("results/report/plots.py", "from ...experiments import runner", "results", "udtbed.experiments"),
        ("simulation/sim.py", "from ..emulation.network import Network", "simulation", "udtbed.emulation"),
        ("emulation/topology.py", "from ..simulation import sim", "emulation", "udtbed.simulation"),
        ("experiments/runner.py", "from .. import __main__", "experiments", "udtbed.__main__"),
        ("experiments/runner.py", "from ..commands.shared import choose_scale", "experiments", "udtbed.commands"),
        ("commands/run.py", "from .. import __main__", "commands", "udtbed.__main__"),
    ],
)
def test_an_import_that_runs_back_up_a_layer_fails_with_its_file_and_line(
    copy: Path, module: str, line: str, area: str, target: str
) -> None:
    graph = load_checker()
    n = plant(copy, module, line)
    (v,) = graph.violations(copy)
    assert v.startswith(f"testbed/udtbed/{module}:{n}: udtbed's {area} layer imports {target}"), v


def test_the_entry_point_imports_only_the_commands_table(copy: Path) -> None:
    graph = load_checker()
    n = plant(copy, "__main__.py", "from .experiments.runner import plan")
    (v,) = graph.violations(copy)
    assert v.startswith(f"testbed/udtbed/__main__.py:{n}: udtbed's entry point imports udtbed.experiments"), v


def test_the_root_imports_no_layer_and_no_module_lives_outside_them(copy: Path) -> None:
    graph = load_checker()
    n = plant(copy, "__init__.py", "from .emulation import network")
    (v,) = graph.violations(copy)
    assert v.startswith(f"testbed/udtbed/__init__.py:{n}: udtbed's root imports udtbed.emulation"), v
    (copy / "testbed/udtbed/helpers.py").write_text("")
    (copy / "testbed/udtbed/plots").mkdir()
    (copy / "testbed/udtbed/plots/__init__.py").write_text("")
    assert [u.split(":")[0] for u in graph.unlayered(copy)] == ["testbed/udtbed/plots/", "testbed/udtbed/helpers.py"]


def test_the_checker_exits_1_on_a_planted_back_import(copy: Path) -> None:
    ok = subprocess.run([sys.executable, str(CHECKER), str(copy)], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    plant(copy, "emulation/cluster.py", "from ..experiments.seats import plan")
    bad = subprocess.run([sys.executable, str(CHECKER), str(copy)], capture_output=True, text=True)
    assert bad.returncode == 1 and "import contract: 1 forbidden import(s)" in bad.stderr, bad.stderr


def test_every_package_of_udtbed_is_in_the_install_list() -> None:
    # A subpackage left out of pyproject's `packages` is missing from an installed udtbed:
    # the package imports from a checkout and fails wherever it was installed.
    import tomllib

    listed = set(tomllib.loads((REPO / "testbed/pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    root = REPO / "testbed"
    found = {
        ".".join(p.parent.relative_to(root).parts)
        for p in (root / "udtbed").rglob("__init__.py")
        if "__pycache__" not in p.parts
    }
    assert found == listed, f"not listed: {sorted(found - listed)}; listed but absent: {sorted(listed - found)}"
