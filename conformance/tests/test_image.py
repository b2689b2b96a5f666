"""The suite as a third party gets it: the `udt-conformance` image (docker/Dockerfile.conformance,
`make conformance-image`) runs a stack mounted from outside the repository and hands its results
back to the caller, and the GitHub Actions template (ci/github/udt-conformance.yml) runs only
commands that exist, over as many shards as its matrix names.

The image is built once per session (`make conformance-image`: about 5 minutes without a layer
cache on 2 cores, seconds with one); the image tests skip, saying why, where Docker is unusable.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from udtharness.stacks import REPO_ROOT

WORKFLOW = REPO_ROOT / "ci" / "github" / "udt-conformance.yml"
CONTAINER_PREFIX = "udtc-image-test-"


def _image_name() -> str:
    m = re.search(r"^CONFORMANCE_IMAGE \?= (\S+)$", (REPO_ROOT / "Makefile").read_text(), re.M)
    assert m, "Makefile: no `CONFORMANCE_IMAGE ?= ...` line"
    return m.group(1)


def _docker_unusable() -> str | None:
    if shutil.which("docker") is None:
        return "the docker CLI is not installed"
    r = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True)
    if r.returncode != 0:
        return f"the Docker daemon is not reachable ({r.stderr.strip()[-200:]})"
    return None


# --- the image ---------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def image() -> str:
    """The conformance image, (re)built from this tree: unchanged layers come from the cache."""
    if why := _docker_unusable():
        pytest.skip(f"needs Docker: {why}")
    r = subprocess.run(
        ["make", "-C", str(REPO_ROOT), "--no-print-directory", "conformance-image"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert r.returncode == 0, f"make conformance-image failed:\n{r.stdout[-3000:]}{r.stderr[-3000:]}"
    return _image_name()


@pytest.fixture
def caller() -> int:
    """The uid of the "third party" that owns the mounted directories: someone other than root
    where the test can arrange it, so that handing results back is visible."""
    return 4242 if os.geteuid() == 0 else os.getuid()


def _chown_tree(path: Path, uid: int) -> None:
    for p in [path, *path.rglob("*")]:
        os.chown(p, uid, uid, follow_symlinks=False)


def third_party_stack(root: Path, uid: int) -> Path:
    """A copy of the shipped udt-rs adapter as a stranger would keep it: its own directory outside
    the repository, its own name, its binary in its own bin/ put there by its `build` command
    (which runs in the container), `requires` relative to itself."""
    shipped = REPO_ROOT / "stacks" / "udt-rs"
    testcases = ", ".join(f'"{t}"' for t in tomllib.loads((shipped / "meta.toml").read_text())["testcases"])
    stack = root / "udt-thirdparty"
    stack.mkdir(parents=True)
    (stack / "meta.toml").write_text(
        'name = "udt-thirdparty"\n'
        'version = "0.1.0"\n'
        'description = "udt-rs, adapted from outside the repository"\n'
        f"testcases = [{testcases}]\n"
        'requires = ["bin/udt"]\n'
        'build = "mkdir -p bin && cp \\"$REPO_ROOT/impl/target/release/udt\\" bin/udt"\n'
    )
    entry = (shipped / "entrypoint").read_text()
    old = 'bin="${UDT_BIN:-$REPO_ROOT/impl/target/release/udt}"'
    assert old in entry, "the udt-rs entrypoint changed: update third_party_stack()"
    (stack / "entrypoint").write_text(entry.replace(old, 'bin="$here/bin/udt"'))
    (stack / "entrypoint").chmod(0o755)
    _chown_tree(root, uid)
    return stack


@pytest.fixture
def container() -> Iterator[str]:
    """A name for one `docker run --rm`; the container is removed even when the test fails."""
    name = f"{CONTAINER_PREFIX}{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        yield name
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
        left = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"name={name}"], capture_output=True, text=True
        ).stdout.strip()
        assert not left, f"container {name} left behind"


def docker_run(
    image: str, name: str, mounts: dict[Path, str], *args: str, timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    argv = ["docker", "run", "--rm", "--name", name]
    for host, inside in mounts.items():
        argv += ["-v", f"{host}:{inside}"]
    return subprocess.run([*argv, image, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.needs_docker
def test_image_runs_a_mounted_third_party_stack_and_hands_back_its_results(
    tmp_path: Path, image: str, container: str, caller: int
) -> None:
    stack = third_party_stack(tmp_path / "theirs", caller)
    out = tmp_path / "out"
    out.mkdir()
    os.chown(out, caller, caller)

    r = docker_run(
        image,
        container,
        {stack: f"/stacks/{stack.name}", out: "/out"},
        *("run", "--stack", f"/stacks/{stack.name}", "--against", "libudt", "--cases", "handshake", "--out", "/out"),
    )

    log = f"exit {r.returncode}\n--- stdout\n{r.stdout[-4000:]}\n--- stderr\n{r.stderr[-4000:]}"
    assert r.returncode == 0, log
    for name in ("junit.xml", "results.json", "matrix.html"):
        assert (out / name).is_file(), f"no {name} in the mounted out directory\n{log}"
    results = (out / "results.json").read_text()
    for cell in ("interop/udt-thirdparty/libudt/handshake", "interop/libudt/udt-thirdparty/handshake"):
        assert cell in results, f"results.json has no {cell}\n{log}"
    assert (stack / "bin" / "udt").is_file(), "the stack's build command did not run in the container"
    foreign = [str(p) for p in [*out.rglob("*"), *stack.rglob("*")] if p.stat().st_uid != caller]
    assert not foreign, f"not handed back to uid {caller}: {foreign[:5]}"
    unreadable = [str(p) for p in out.rglob("*") if p.is_file() and not os.access(p, os.R_OK)]
    assert not unreadable, unreadable


@pytest.mark.slow
@pytest.mark.long
@pytest.mark.needs_docker
def test_image_exits_2_and_says_what_to_do_for_an_unknown_reference_stack(
    tmp_path: Path, image: str, container: str, caller: int
) -> None:
    stack = third_party_stack(tmp_path / "theirs", caller)
    inside = f"/stacks/{stack.name}"
    r = docker_run(
        image, container, {stack: inside}, "run", "--stack", inside, "--against", "no-such-stack", timeout=300
    )
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
    assert "no-such-stack" in r.stdout + r.stderr


# --- the GitHub Actions template ---------------------------------------------------------------


@pytest.fixture(scope="module")
def workflow() -> dict[Any, Any]:
    doc = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(doc, dict), f"{WORKFLOW} is not a YAML mapping"
    return doc


def _steps(workflow: dict[Any, Any]) -> list[dict[str, Any]]:
    (job,) = workflow["jobs"].values()
    steps = job["steps"]
    assert isinstance(steps, list)
    return steps


def _suite_step(workflow: dict[Any, Any]) -> dict[str, Any]:
    (step,) = [s for s in _steps(workflow) if "udt-conformance run " in s.get("run", "")]
    return step


def _suite_argv(workflow: dict[Any, Any]) -> list[str]:
    """The `run` subcommand's arguments, as the runner's shell would split them (GitHub substitutes
    each `${{ expression }}` before the shell sees it; here it becomes one word, `${{expression}}`)."""
    script = _suite_step(workflow)["run"].replace("\\\n", " ")
    script = re.sub(r"\$\{\{\s*(.*?)\s*\}\}", lambda m: "${{" + m.group(1) + "}}", script)
    (line,) = [ln for ln in script.splitlines() if "udt-conformance run " in ln]
    argv = shlex.split(line)
    return argv[argv.index("udt-conformance") + 1 :]


def test_workflow_is_triggered_on_push_and_pull_request(workflow: dict[Any, Any]) -> None:
    on = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` key as True
    assert isinstance(on, dict) and {"push", "pull_request"} <= set(on), on
    assert workflow["jobs"], "no jobs"


def test_workflow_shards_the_matrix_over_as_many_runners_as_it_names(workflow: dict[Any, Any]) -> None:
    (job,) = workflow["jobs"].values()
    shards = job["strategy"]["matrix"]["shard"]
    assert shards == list(range(1, len(shards) + 1)), f"shards must be 1..N, not {shards}"
    assert job["strategy"]["fail-fast"] is False, "one failing shard must not cancel the others' results"
    argv = _suite_argv(workflow)
    shard = argv[argv.index("--shard") + 1]
    assert shard == f"${{{{matrix.shard}}}}/{len(shards)}", f"--shard {shard} for a matrix of {len(shards)}"


def test_workflow_runs_only_make_targets_and_flags_that_exist(workflow: dict[Any, Any]) -> None:
    targets = {t for s in _steps(workflow) for t in re.findall(r"\bmake -C \S+ ([\w-]+)", s.get("run", ""))}
    assert targets == {"conformance-image"}, targets
    for target in targets:
        r = subprocess.run(["make", "-n", "-C", str(REPO_ROOT), target], capture_output=True, text=True)
        assert r.returncode == 0, f"make {target}: {r.stderr}"

    argv = _suite_argv(workflow)
    assert argv[0] == "run" and _image_name() in _suite_step(workflow)["run"]
    help_text = subprocess.run(
        [sys.executable, "-m", "udtconf", "run", "--help"], capture_output=True, text=True, check=True
    ).stdout
    flags = {a.split("=")[0] for a in argv if a.startswith("--")}
    assert flags >= {"--stack", "--against", "--fail-on", "--shard", "--out"}, flags
    unknown = [f for f in flags if not re.search(rf"(^|\s){re.escape(f)}\b", help_text)]
    assert not unknown, f"`python -m udtconf run` has no {unknown}"
    assert argv[argv.index("--fail-on") + 1] == "$FAIL_ON"
    assert workflow["env"]["FAIL_ON"] in ("must", "required", "all")


def test_workflow_fails_the_job_on_the_gate_and_still_uploads_the_results(workflow: dict[Any, Any]) -> None:
    step = _suite_step(workflow)
    assert not step.get("continue-on-error"), "the gate's exit status must fail the job"
    assert "|| true" not in step["run"] and "set +e" not in step["run"]

    argv = _suite_argv(workflow)
    out_inside = argv[argv.index("--out") + 1]
    mount = re.search(rf'-v "\$GITHUB_WORKSPACE/(\S+):{re.escape(out_inside)}"', step["run"])
    assert mount, f"--out {out_inside} is not a mounted directory"
    out_host = mount.group(1)

    (upload,) = [s for s in _steps(workflow) if s.get("uses", "").startswith("actions/upload-artifact@")]
    assert upload.get("if") == "always()", "a failing gate must still upload its results"
    paths = set(upload["with"]["path"].split())
    assert paths >= {f"{out_host}/{f}" for f in ("junit.xml", "results.json", "matrix.html", "runs/")}, paths
    assert "${{ matrix.shard }}" in upload["with"]["name"], "the shards' artefacts need distinct names"


def test_image_copies_every_member_of_the_rust_workspace() -> None:
    # cargo build needs every workspace member; a crate added to impl/Cargo.toml must also be
    # copied by docker/Dockerfile.conformance and let through by .dockerignore.
    with open(REPO_ROOT / "impl/Cargo.toml", "rb") as f:
        members = tomllib.load(f)["workspace"]["members"]
    dockerfile = (REPO_ROOT / "docker/Dockerfile.conformance").read_text()
    ignore = (REPO_ROOT / ".dockerignore").read_text().splitlines()
    missing = [m for m in members if f"COPY impl/{m} impl/{m}" not in dockerfile or f"!impl/{m}" not in ignore]
    assert not missing, (
        f"add COPY impl/<m> impl/<m> to docker/Dockerfile.conformance and !impl/<m> to .dockerignore for {missing}"
    )
