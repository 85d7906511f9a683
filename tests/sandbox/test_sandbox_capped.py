"""The capped area: shadow workspaces on one tmpfs whose size the kernel keeps (issue 19)."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import pytest
from sandbox_helpers import FAST, data_files, requires_bwrap, requires_root

from vera_env.sandbox import BwrapSandbox, CappedArea, ServerSandbox, make_sandbox
from vera_env.sandbox import capped as capped_module

BUDGET = 8 << 20


def _mounted(path: Path) -> bool:
    with open("/proc/self/mounts") as mounts:
        return any(line.split()[1] == str(path) for line in mounts)


@pytest.fixture(params=[BwrapSandbox, ServerSandbox], ids=["bwrap", "bwrap-server"])
def box(request):
    with BwrapSandbox(FAST) if request.param is BwrapSandbox else ServerSandbox(FAST) as made:
        yield made


@requires_bwrap
@requires_root
def test_area_write_past_budget_gets_enospc_on_the_tmpfs_not_host_disk(box, data_dir):
    with CappedArea(box, BUDGET, data_files(data_dir)) as area, \
            area.stage(data_files(data_dir)) as ws:
        assert area.enforced and _mounted(area.path)
        result = ws.run("head -c 64M /dev/zero > big")
        assert result.status == "disk_limit"
        assert "No space left on device" in result.stderr
        assert area.spent() and area.used_bytes() <= BUDGET
        assert os.stat(ws.path / "big").st_dev == os.stat(area.path).st_dev
        assert os.stat(area.path).st_dev != os.stat(box.root).st_dev
        assert ws.run("rm big").ok and not area.spent()  # freeing the area still runs


@requires_bwrap
@requires_root
def test_area_task_files_linked_from_its_cache_read_only_outside_the_budget(box, data_dir):
    with CappedArea(box, BUDGET, data_files(data_dir)) as area:
        used = area.used_bytes()
        a, b = area.stage(data_files(data_dir)), area.stage(data_files(data_dir))
        st_a, st_b = (os.stat(w.path / "table.tsv") for w in (a, b))
        assert st_a.st_ino == st_b.st_ino and st_a.st_uid == 0 and area.used_bytes() == used
        assert st_a.st_mtime_ns == os.stat(data_dir / "table.tsv").st_mtime_ns
        assert not a.run("echo x >> table.tsv").ok
        assert a.run("gunzip counts.txt.gz && cat counts.txt").stdout == "1\n2\n3\n"


@requires_bwrap
@requires_root
def test_area_file_only_one_workspace_holds_is_copied_and_goes_with_it(box, data_dir,
                                                                     tmp_path):
    variant = tmp_path / "variant.tsv"
    variant.write_text("gene\tcount\nA\t4\n")
    variant.chmod(0o444)
    with CappedArea(box, BUDGET, data_files(data_dir)) as area:
        ws = area.stage({**data_files(data_dir), "table.tsv": variant})
        staged = os.stat(ws.path / "table.tsv")
        assert staged.st_dev == os.stat(area.path).st_dev and staged.st_uid == 0
        assert (ws.path / "table.tsv").read_text() == "gene\tcount\nA\t4\n"
        assert area.used_bytes() > 0
        ws.close()
        assert area.used_bytes() == 0


@requires_bwrap
@requires_root
def test_area_close_and_sandbox_close_unmount(data_dir):
    box = BwrapSandbox(FAST)
    kept = CappedArea(box, BUDGET, data_files(data_dir))
    closed = CappedArea(box, BUDGET)
    ws = closed.stage({})
    closed.close()
    assert ws.closed and not _mounted(closed.path) and not closed.path.exists()
    box.close()
    assert kept.closed and not _mounted(kept.path) and not box.root.exists()


@requires_bwrap
def test_area_without_a_mount_warns_and_stages_as_before(monkeypatch, data_dir):
    monkeypatch.setattr(capped_module, "_mount_tmpfs", lambda path, size: "no mount here")
    with BwrapSandbox(FAST) as box:
        with pytest.warns(UserWarning, match="not enforced by the kernel here"):
            area = CappedArea(box, BUDGET, data_files(data_dir))
        with area, area.stage(data_files(data_dir)) as ws:
            assert not area.enforced and not area.spent() and area.used_bytes() == 0
            assert ws.run("head -c 12M /dev/zero > big").ok  # checked between commands


def test_area_on_the_local_backend_is_unenforced(data_dir):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = make_sandbox("local", FAST)
    with pytest.warns(UserWarning, match="stages only in its own directories"):
        area = CappedArea(local, BUDGET)
    with area, area.stage(data_files(data_dir)) as ws:
        assert not area.enforced and ws.run("cat table.tsv").stdout.startswith("gene")


def test_area_budget_must_be_positive():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        local = make_sandbox("local", FAST)
    with pytest.raises(ValueError, match="max_bytes must be > 0"):
        CappedArea(local, 0)


@requires_bwrap
@requires_root
def test_area_writes_charged_to_its_own_cgroups_never_to_the_episodes(data_dir):
    # tmpfs pages stay charged to the leaf that wrote them; in the sandbox's reused
    # leaves they would shrink the memory of the episode's next command or check.
    small = FAST.model_copy(update={"memory_mb": 64})
    with BwrapSandbox(small) as box:
        if box.memory is None:
            pytest.skip(f"no memory cgroups here ({box.memory_scope})")
        with CappedArea(box, 96 << 20) as area, area.stage({}) as shadow, \
                box.stage(data_files(data_dir)) as real:
            assert shadow.run("head -c 80M /dev/zero > f").status == "ok"  # over memory_mb
            for _ in range(3):
                assert real.run("head -c 40M /dev/zero > /tmp/x").status == "ok"
                assert real.run_check("head -c 40M /dev/zero > /tmp/x").ok
            cgroups = area._memory.root if area._memory is not None else None
        assert cgroups is None or not cgroups.exists()
