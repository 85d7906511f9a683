"""Strength: does a passing check depend on the data it claims to check?

The harness runs the model's checks, so the model cannot *print* its score — but it can
write checks that cannot fail: ``echo True``, ``test -f qc.mtx``,
``python3 -c "print(1==1)"``. Peers scored those as verification. Here a check that
passed is re-run against **mutants** of the workspace files it names (``mutants``:
lines dropped, numbers moved, rows shuffled, header removed, gz re-packed). A check
that passes on every mutant does not discriminate right data from wrong and earns
nothing; one that says ``False`` on some mutant discriminates, and ``killed_by`` names
those mutants. This goes beyond the seeds, which could only ask for strong checks.

Which files a check names is decided from its text (``vera_env.verification.check_inputs``): the
workspace paths it mentions or globs, the node's artifact, and for a script it runs
the files the script names; a file of bare ``True`` lines is the model's own verdict,
not data. A check that names no data file reads no data as far as the harness can
tell (``ls | wc -l``, ``find``, a name spelled in pieces) and earns nothing: the
harness cannot test what it cannot see, and obfuscation should not pay.

Rules that make a kill evidence, each closing a way to look discriminating:

* **A kill is a clean ``False``**: exit 0 and a False verdict. A check that crashes or
  prints nothing on a mutant (``cat flag.txt`` with the flag file mutated, a parser
  that chokes) has shown only that it reads the file.
* **Controls.** ``strength_controls`` runs show the file's *unchanged* bytes through
  the same mechanism as the mutants (a read-only bind of a copy with a random name),
  so a run cannot tell a control from a mutant except by content. A check that does
  not pass on its controls is flaky — time, randomness, or detecting the overlay
  (``/proc/self/mountinfo``) — and earns nothing.
* **Confirmation.** The first killing mutant is run once more and must say False
  again. With controls this bounds what a check that reads the clock or a random
  source can earn by luck (see README: redteam).

Order and cost. Files are tried in order of mention (at most ``strength_max_files``).
For each, the first mutant runs alone — most real checks die on it — then the others
in parallel; testing stops at the first file with a confirmed kill, so ``killed_by``
lists that file's kills. Controls and the confirmation run only after a kill (a check
no mutant kills earns nothing whatever its controls say), in parallel. So a typical
discriminating check costs four extra runs (one mutant, two controls, one
confirmation) and a vacuous one ``strength_mutants`` per file it names. Mutants are
built on demand, once per file version, and reused across the checks and nodes of an
episode; unchanged files are never copied (the sandbox binds the mutant over the one
name, ``Workspace.run_check(overlay=...)``). A check that failed on the original is
not strength-tested (``discriminating`` None).
"""

from __future__ import annotations

import os
import secrets
import stat
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from vera_env.verification.check_inputs import named_files, read_regular
from vera_env.verification.checks import CheckResult
from vera_env.errors import SandboxError
from vera_env.verification.mutants import MutantSource
from vera_env.wire.protocol import verdict_from_output

if TYPE_CHECKING:
    from vera_env.verification.rewards import RewardConfig
    from vera_env.sandbox import ExecResult, SandboxLimits, Workspace

__all__ = ["assess", "named_files"]

_MIN_MUTANT_TIMEOUT_S = 10.0
_SCRATCH_BUDGET_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class _Layer:
    label: str          # "" for a control
    path: Path          # host file shown in place of the named file


def assess(results: Sequence[CheckResult], workspace: "Workspace", config: "RewardConfig",
           limits: "SandboxLimits", *, artifact: str = "",
           workers: int | None = None) -> tuple[CheckResult, ...]:
    """Strength-test every passing check of one node.

    Args:
        results: The node's executed checks.
        workspace: The episode's workspace (its ``run_check`` must accept ``overlay``).
        config: ``strength_mutants``, ``strength_seed``, ``strength_controls``,
            ``strength_max_files``, ``strength_max_mb``.
        limits: ``check_timeout_s`` caps each mutant run.
        artifact: The node's artifact; mutated too when it is a workspace file.
        workers: Runs in flight at once (default: CPUs, 2 to 8). Verdicts do not
            depend on it.

    Returns:
        ``results`` with ``discriminating`` and ``killed_by`` set on passing checks
        (and ``detail`` saying why one earns nothing).

    Raises:
        SandboxError: The sandbox or the harness's scratch space failed (an
            infrastructure fault: the episode is unscorable, not the check failed).
    """
    if not any(r.passed for r in results):
        return tuple(results)
    listing = workspace.listing()
    cache = _cache_for(workspace)
    workers = workers or min(8, max(2, os.cpu_count() or 2))
    out = []
    with ThreadPoolExecutor(max_workers=workers) as pool:
        for result in results:
            if not result.passed:
                out.append(result)
                continue
            names = named_files(result.command, listing, workspace.path, artifact=artifact,
                                limit=config.strength_max_files)
            cache.trim()
            out.append(_probe(result, names, workspace, cache, config, limits, pool))
    return tuple(out)


def _probe(result: CheckResult, names: list[str], workspace: "Workspace",
           cache: "_MutantCache", config: "RewardConfig", limits: "SandboxLimits",
           pool: ThreadPoolExecutor) -> CheckResult:
    if not names:
        return _weak(result, "names no data file of the workspace (scripts and files "
                             "holding only True/False are not data), so it checks no data")
    # Generous against a loaded machine (a timeout is not a kill), but a check that
    # stalls only on mutants must not hold the step for the full check timeout.
    timeout_s = min(limits.check_timeout_s,
                    max(_MIN_MUTANT_TIMEOUT_S, 5 * result.duration_s + 5))

    def run(name: str, layer: _Layer) -> bool | None:
        res = workspace.run_check(result.command, timeout_s=timeout_s,
                                  overlay={name: layer.path})
        return _clean_verdict(res)

    tried = 0
    for name in names:
        layers = cache.layers(workspace, name, config)
        first = layers.mutant(0) if layers else None
        if layers is None or first is None:
            continue
        # The first mutant alone, then the rest: most real checks die on the first.
        kills = [first] if run(name, first) is False else []
        tried += 1
        if not kills:
            rest = [m for m in map(layers.mutant, range(1, config.strength_mutants)) if m]
            tried += len(rest)
            kills = [m for m, v in zip(rest, pool.map(partial(run, name), rest), strict=True)
                     if v is False]
        if not kills:
            continue
        # Evidence only if the unchanged file passes (controls) and the kill repeats.
        checks = [*layers.controls(config.strength_controls), kills[0]]
        verdicts = list(pool.map(partial(run, name), checks))
        if any(v is not True for v in verdicts[:-1]):
            if layers.windowed:
                return _weak(result, f"its verdict depends on {name} past the first "
                                     f"{config.strength_max_mb} MiB that strength tests")
            return _weak(result, f"flaky: its verdict changed on unchanged {name} (a "
                                 "check must give the same answer on the same data)")
        if verdicts[-1] is not False:
            return _weak(result, f"flaky: {kills[0].label} did not fail it twice")
        return replace(result, discriminating=True, killed_by=tuple(m.label for m in kills))
    if not tried:
        return _weak(result, f"no mutant of {', '.join(names)} could be built (empty "
                             "files), so it checks no data")
    return _weak(result, f"passed on all {tried} mutants of {', '.join(names)}: it does "
                         "not depend on that data")


def _weak(result: CheckResult, why: str) -> CheckResult:
    return replace(result, discriminating=False, killed_by=(),
                   detail=f"not discriminating: {why}"[:200])


def _clean_verdict(res: "ExecResult") -> bool | None:
    if res.status != "ok" or res.exit_code != 0 or res.timed_out:
        return None
    return verdict_from_output(res.stdout)


# ----- mutants on disk, built once per file version -----

class _FileLayers:
    """Controls and mutants of one version of one file, written on first use."""

    def __init__(self, cache: "_MutantCache", workspace: "Workspace", name: str,
                 config: "RewardConfig") -> None:
        window = config.strength_max_mb * 2**20
        raw = read_regular(workspace.path, name, window + 1) or b""
        self._source = MutantSource(name, raw, complete=len(raw) <= window,
                                    n=config.strength_mutants, seed=config.strength_seed,
                                    max_bytes=window)
        self._write = lambda content: cache.write(workspace, content)
        self._mutants: list[_Layer] = []
        self._controls: list[_Layer] = []
        self.windowed = self._source.windowed

    def mutant(self, i: int) -> _Layer | None:
        """Mutant ``i`` on disk, or None when the file allows no more."""
        while len(self._mutants) <= i:
            built = self._source.get(len(self._mutants))
            if built is None:
                return None
            self._mutants.append(_Layer(built.label, self._write(built.content)))
        return self._mutants[i]

    def discard(self) -> None:
        """Delete this version's files (the file changed, or the cache is trimmed)."""
        for layer in (*self._mutants, *self._controls):
            layer.path.unlink(missing_ok=True)
        self._mutants, self._controls = [], []

    def controls(self, n: int) -> list[_Layer]:
        """``n`` copies of the unchanged file, each its own inode."""
        if len(self._controls) < n:
            content = self._source.control
            self._controls += [_Layer("", self._write(content))
                               for _ in range(n - len(self._controls))]
        return self._controls[:n]


class _MutantCache:
    """Mutant and control files of one workspace, keyed by the file's version, so the
    checks and nodes of an episode that read the same file share them.

    Only a name's current version is kept, and the whole cache is dropped before a
    check once it holds more than ``_SCRATCH_BUDGET_BYTES``: a model that rewrites a
    large file every step, or names many, must not turn strength's copies into a
    disk filler on the host. One check's own files stay bounded by
    ``strength_max_files`` x (mutants + controls) x the window.
    """

    def __init__(self) -> None:
        self._dir: Path | None = None
        self._files: dict[str, tuple[tuple, _FileLayers]] = {}
        self.bytes = 0

    def trim(self) -> None:
        """Drop every cached file if the cache is over its budget."""
        if self.bytes > _SCRATCH_BUDGET_BYTES:
            for _, layers in self._files.values():
                layers.discard()
            self._files.clear()
            self.bytes = 0

    def layers(self, workspace: "Workspace", name: str, config: "RewardConfig"
               ) -> _FileLayers | None:
        """The layers of ``name`` as it is now; None when it is not a regular file."""
        try:
            st = os.lstat(os.path.join(workspace.path, name))
        except OSError:
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, config.strength_seed,
               config.strength_mutants, config.strength_max_mb)
        cached = self._files.get(name)
        if cached is None or cached[0] != key:
            if cached is not None:
                cached[1].discard()  # the file changed: its old mutants are dead weight
            cached = self._files[name] = (key, _FileLayers(self, workspace, name, config))
        return cached[1]

    def write(self, workspace: "Workspace", content: bytes) -> Path:
        """Put ``content`` in a new read-only file of the scratch directory."""
        try:
            if self._dir is None:
                self._dir = workspace.scratch_dir("strength-")
            # A fresh inode under a random name: the path shows in /proc/self/mountinfo
            # and the inode in stat, and neither may tell a control from a mutant.
            path = self._dir / secrets.token_hex(8)
            path.write_bytes(content)
            path.chmod(0o444)
            self.bytes += len(content)
        except OSError as exc:
            raise SandboxError(f"strength: cannot write a mutant: {exc}") from exc
        return path


_CACHES: "weakref.WeakKeyDictionary[object, _MutantCache]" = weakref.WeakKeyDictionary()


def _cache_for(workspace: "Workspace") -> _MutantCache:
    cache = _CACHES.get(workspace)
    if cache is None:
        cache = _CACHES[workspace] = _MutantCache()
    return cache
