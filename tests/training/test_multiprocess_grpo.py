"""Step-wise GRPO in two CPU processes for real: ``accelerate launch``, gloo, the real env.

Each process plays its own groups, with a different number of turns, so the trainer's
padding to equal row counts is exercised (before it, TRL's gathered loss statistics
failed with a gloo "Received data size doesn't match expected size"); DDP must then
leave both processes with the same, changed weights.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "distributed_grpo.py"
ROOT = Path(__file__).resolve().parents[2]


def test_stepwise_grpo_two_processes_gloo_same_changed_weights(tmp_path):
    launcher = shutil.which("accelerate")
    assert launcher, "accelerate (the training extra) provides the launcher"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "",
           "HF_HUB_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [launcher, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
         "--mixed_precision", "no", "--dynamo_backend", "no", "--main_process_port", "0",
         str(SCRIPT), str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"rank{k}.json").read_text()) for k in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2] and ranks[0]["backend"] == "gloo"
    # Each process played its own task start; together, both starts.
    assert {ranks[0]["episodes"][0], ranks[1]["episodes"][0]} == {
        "tab.sentinel_mean.easy.s0", "seq.gc_content.easy.s0"}
    assert all(len(set(r["episodes"])) == 1 for r in ranks)
    assert ranks[0]["before"] == ranks[1]["before"]
    assert ranks[0]["after"] == pytest.approx(ranks[1]["after"], rel=1e-9)
    assert ranks[0]["after"] != pytest.approx(ranks[0]["before"], rel=1e-6)
    assert ranks[0]["loss"] == pytest.approx(ranks[1]["loss"])
    assert ranks[0]["zero_std"] == 0.0 and ranks[0]["samples"] == sum(r["turns"] for r in ranks)
