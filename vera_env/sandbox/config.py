"""The agent's toolbox and the sandbox's identity on the host, as one frozen model.

What the agent can see is configuration, not code: a site that ships its tools under
``/opt/conda`` adds a read-only bind and a PATH entry instead of patching the backend.
The defaults expose the system's tools (coreutils, gawk/mawk, gzip, ``/usr/bin/python3``
with numpy) and nothing else of the host.

The thread-count variables default to 1 because threads count against the process
limit (``ulimit -u``) and glibc reserves up to 64 MB of address space per thread arena
against ``ulimit -v``: a BLAS that starts one thread per core would spend both on a
many-core host. (Debian's python3-numpy uses the reference BLAS, which is not
threaded; an OpenBLAS install is.) Override them in ``env`` where the limits allow.
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = ["DEFAULT_ETC_FILES", "SandboxConfig"]

# The /etc the tools need: the dynamic loader's cache, awk's alternatives symlink,
# name-service switch, time zone. The host's passwd/group are replaced by synthetic
# ones naming the sandbox user; everything else of the host's /etc stays hidden.
DEFAULT_ETC_FILES: tuple[str, ...] = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/nsswitch.conf",
    "/etc/localtime",
    "/etc/timezone",
)

# Mount points the backend owns; a bind on or under one would shadow or escape it.
_RESERVED = ("/work", "/tmp", "/proc", "/dev", "/etc")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class SandboxConfig(BaseModel):
    """What the sandbox exposes and who it runs as."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    bwrap_path: str = "bwrap"
    """The bubblewrap executable (looked up on the harness's PATH)."""
    path: str = "/usr/local/bin:/usr/bin:/bin"
    """PATH inside the sandbox (the bwrap backend puts its shim dir in front)."""
    env: dict[str, str] = Field(
        default_factory=lambda: {
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
        }
    )
    """Extra environment variables inside the sandbox (on top of PATH, HOME, LANG, TMPDIR)."""
    ro_binds: dict[str, str] = Field(default_factory=dict)
    """Extra read-only binds: host path -> absolute path inside the sandbox. A root
    harness starts bwrap as ``host_uid``, so every source must be readable by it."""
    etc_files: tuple[str, ...] = DEFAULT_ETC_FILES
    """Host /etc entries bound read-only when they exist."""
    host_uid: int = Field(default=61000, ge=1)
    """Host uid the sandbox runs as when the harness is root (must own nothing else)."""
    host_gid: int = Field(default=61000, ge=1)
    """Host gid the sandbox runs as when the harness is root."""
    sandbox_uid: int = Field(default=1000, ge=1)
    """The uid (and gid) commands see inside the sandbox."""
    compressor_shims: bool = True
    """Put the gzip/bzip2/xz shims first on PATH so in-place decompression of staged
    (hard-linked) files works; see ``vera_env.sandbox.shims``."""
    tmp_mb: int = Field(default=1024, ge=1)
    """Size of the private /tmp (a tmpfs, so it is host memory)."""
    shm_mb: int = Field(default=64, ge=1)
    """Size of the private /dev/shm (a tmpfs; Docker's default size). The rest of
    /dev is read-only: an uncapped /dev held 2.7 GB parked by one command."""
    memory_cgroup: bool = True
    """Limit each command's whole process tree to ``memory_mb`` with a memory cgroup
    where the harness can make one (see ``vera_env.sandbox.cgroup``). False, or no
    cgroup available: per-process limits only, with a warning."""
    cgroup_parent: Path | None = None
    """A cgroup directory to make the memory cgroups under (cgroup v2: a delegated
    cgroup with the memory controller and no processes of its own). None: the
    harness's own memory cgroup (cgroup v1) or, in the root cgroup, the v2 root."""
    workspace_root: Path | None = None
    """Where workspaces are created (default: the system temp dir). Put it on the task
    data's filesystem so data is hard-linked, not copied; ``host_uid`` must be able to
    traverse it."""

    @field_validator("env")
    @classmethod
    def _check_env(cls, value: dict[str, str]) -> dict[str, str]:
        for name, val in value.items():
            if not _ENV_NAME.match(name) or "\0" in val:
                raise ValueError(f"invalid environment entry {name!r}={val!r}")
        return value

    @field_validator("ro_binds")
    @classmethod
    def _check_binds(cls, value: dict[str, str]) -> dict[str, str]:
        for source, dest in value.items():
            inside = PurePosixPath(dest)
            if not Path(source).is_absolute() or not inside.is_absolute() or ".." in inside.parts:
                raise ValueError(
                    f"ro_binds needs absolute paths without '..', got {source!r}: {dest!r}")
            if inside == PurePosixPath("/") or any(
                inside == PurePosixPath(r) or PurePosixPath(r) in inside.parents for r in _RESERVED
            ):
                raise ValueError(f"ro_binds may not bind over {dest!r} (reserved: {_RESERVED})")
        return value
