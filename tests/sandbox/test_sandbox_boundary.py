"""The bwrap boundary, proven from inside: no network, no writes out, nothing hidden seen."""

from __future__ import annotations

import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sandbox_helpers import FAST, data_files, requires_bwrap

import vera_env
from vera_env.sandbox import BwrapSandbox, BwrapWorkspace, SandboxConfig

pytestmark = requires_bwrap


@pytest.fixture
def ws(sandbox: BwrapSandbox, data_dir: Path) -> Iterator[BwrapWorkspace]:
    with sandbox.stage(data_files(data_dir)) as workspace:
        yield workspace


def test_bwrap_run_tcp_to_host_loopback_server_refused(ws: BwrapWorkspace) -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.5)
    port = server.getsockname()[1]
    try:
        code = f"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=2)"
        result = ws.run(f'python3 -c "{code}"')
        assert result.exit_code != 0
        assert "ConnectionRefusedError" in result.stderr or "unreachable" in result.stderr
        with pytest.raises(TimeoutError):
            server.accept()
    finally:
        server.close()


def test_bwrap_run_only_loopback_interface_visible(ws: BwrapWorkspace) -> None:
    result = ws.run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
    assert result.stdout.split() == ["lo"]


@pytest.mark.parametrize("target", ["/usr/vera-probe", "/etc/vera-probe", "/vera-probe",
                                    "/bin/vera-probe"])
def test_bwrap_run_write_outside_workspace_fails(ws: BwrapWorkspace, target: str) -> None:
    result = ws.run(f"touch {target}")
    assert result.exit_code != 0
    assert "Read-only file system" in result.stderr or "Permission denied" in result.stderr
    assert not Path(target).exists()


def test_bwrap_run_tmp_is_private_to_the_sandbox(ws: BwrapWorkspace) -> None:
    name = f"vera-private-{uuid.uuid4().hex}"
    result = ws.run(f"echo hi > /tmp/{name} && cat /tmp/{name}")
    assert result.stdout == "hi\n"
    assert not (Path("/tmp") / name).exists()
    assert ws.run(f"test -e /tmp/{name} && echo leaked || echo gone").stdout == "gone\n"


def test_bwrap_run_host_private_paths_invisible(ws: BwrapWorkspace, data_dir: Path,
                                                sandbox: BwrapSandbox) -> None:
    hidden = ["/root", "/home", "/work/main", str(data_dir), str(sandbox.root),
              "/etc/shadow", "/etc/hostname", "/var", "/srv", "/mnt"]
    script = "; ".join(f"test -e {path} && echo VISIBLE {path}" for path in hidden)
    result = ws.run(script + "; true")
    assert result.stdout == ""


def test_bwrap_run_etc_is_minimal_with_synthetic_user(ws: BwrapWorkspace) -> None:
    listing = set(ws.run("ls /etc").stdout.split())
    assert {"passwd", "group", "ld.so.cache", "alternatives"} <= listing
    assert "shadow" not in listing and "hosts" not in listing
    assert ws.run("id -un; echo $HOME; pwd").stdout == "vera\n/tmp\n/work\n"


def test_bwrap_run_environment_cleared_to_the_configured_set(ws: BwrapWorkspace) -> None:
    names = set(ws.run("env | cut -d= -f1").stdout.split())
    assert {"PATH", "HOME", "LANG", "TMPDIR"} <= names
    assert not names & {"PYTHONPATH", "VIRTUAL_ENV", "PYENV_ROOT", "PWD_HOST"}
    assert ws.run("echo $PATH").stdout == "/opt/vera/bin:/usr/local/bin:/usr/bin:/bin\n"


def test_bwrap_run_vera_env_import_fails_even_with_parent_bound(data_dir: Path) -> None:
    source_root = Path(vera_env.__file__).resolve().parent.parent
    config = SandboxConfig(ro_binds={str(source_root): "/opt/vera_src"})
    with BwrapSandbox(FAST, config) as box, box.stage(data_files(data_dir)) as ws:
        bound = ws.run("ls /opt/vera_src")
        assert "vera_env" in bound.stdout.split()  # the parent really is visible
        result = ws.run('cd /opt/vera_src && python3 -c "import vera_env.sandbox"')
        assert result.exit_code != 0
        assert "vera_env is not available inside the sandbox" in result.stderr
        assert ws.run("ls /opt/vera_src/vera_env").stdout.split() == ["__init__.py"]


def test_bwrap_run_tools_awk_gzip_python_numpy_work(ws: BwrapWorkspace) -> None:
    assert ws.run("echo '1 2' | awk '{print $1 + $2}'").stdout == "3\n"
    assert ws.run("zcat counts.txt.gz | wc -l").stdout.strip() == "3"
    assert ws.run("printf abc | gzip | gunzip").stdout == "abc"
    numpy = ws.run('python3 -c "import numpy as np; print(int(np.arange(4).sum()))"')
    assert numpy.stdout == "6\n", numpy.as_tool_output()


def test_bwrap_run_extra_env_and_bind_from_config() -> None:
    # Bind sources must be reachable by the sandbox's host uid: not under pytest's 0700 tmp.
    tools = Path(tempfile.mkdtemp(prefix="vera-tools-"))
    try:
        tools.chmod(0o755)
        (tools / "hello").write_text("#!/bin/sh\necho hello from $GREETING\n")
        (tools / "hello").chmod(0o755)
        config = SandboxConfig(ro_binds={str(tools): "/opt/tools"}, env={"GREETING": "config"},
                                   path="/opt/tools:/usr/bin:/bin")
        with BwrapSandbox(FAST, config) as box, box.stage({}) as ws:
            assert ws.run("hello").stdout == "hello from config\n"
    finally:
        shutil.rmtree(tools)
