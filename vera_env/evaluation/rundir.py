"""The run folder of ``vera-env eval``: what was asked, what happened, nothing lost.

Layout::

    DIR/run.json                          the settings (what makes two runs comparable)
    DIR/results.jsonl                     one Attempt per line, appended as each finishes
    DIR/transcripts/<task>/<k>/           what the model saw and said, the graph, the answer
    DIR/summary.json                      the metrics, rewritten at the end of each run

Why append-and-fsync one line per attempt: an evaluation of a slow model runs for hours
and dies of ordinary causes (a preempted node, a closed laptop, Ctrl-C). Everything
finished before that must survive, and ``--resume`` must neither redo it nor count it
twice. A process killed in the middle of a write leaves at most one torn last line;
``open_results`` cuts it off before appending again, so the file stays one record per
line.

``--resume`` refuses a folder made with different settings (another model, another
task set, another step budget...): mixing them would produce a table that describes no
run. The environment is compared as a whole (``EnvSpec``: step budget, wrappers, reward,
sandbox limits, judge...); settings that cannot change the outcome (the URL,
concurrency, the sandbox backend) may differ.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import IO, Any

from vera_env.errors import RunSettingsMismatch
from vera_env.rollout import Attempt
from vera_env.spec import EnvSpec

__all__ = ["RunDir", "RunSettings", "RunSettingsMismatch", "append", "write_atomic"]

RESULTS = "results.jsonl"
SETTINGS = "run.json"
SUMMARY = "summary.json"
TRANSCRIPTS = "transcripts"


@dataclass(frozen=True, slots=True)
class RunSettings:
    """What an evaluation run was asked to do: the policy and its sampling, the tasks,
    the attempts, and the environment as an ``EnvSpec``.

    Fields listed in ``NON_BINDING`` may change between a run and its resumption, and so
    may the spec's ``vera_env.spec.NON_BINDING`` fields (the sandbox backend, the
    judge's URL); everything else in the spec is compared.
    """

    policy: str
    model: str
    task_ids: tuple[str, ...]
    attempts: int
    seed: int
    temperature: float
    max_tokens: int
    env: EnvSpec = field(default_factory=EnvSpec)
    system_prompt: str = ""
    prefill: bool = True
    base_url: str = ""
    concurrency: int = 1
    extra: dict[str, Any] = field(default_factory=dict)

    NON_BINDING = ("base_url", "concurrency", "extra")

    @property
    def tasks(self) -> str:
        """The task source (``env.tasks``)."""
        return self.env.tasks

    @property
    def max_steps(self) -> int:
        """The step budget (``env.max_steps``)."""
        return self.env.max_steps

    @property
    def wrappers(self) -> tuple[str, ...]:
        """The wrappers, innermost first (``env.wrappers``)."""
        return tuple(self.env.wrappers)

    @property
    def reserve(self) -> int:
        """``ForcedAnswer``'s reserve (``env.reserve``)."""
        return self.env.reserve

    @property
    def judge_model(self) -> str:
        """The LLM judge's model ("" none)."""
        return self.env.judge.model if self.env.judge else ""

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self)}
        data["task_ids"] = list(self.task_ids)
        data["env"] = self.env.model_dump(mode="json")
        data["extra"] = dict(self.extra)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RunSettings:
        """Read ``to_dict``'s form; a folder written before the spec (``max_steps``,
        ``wrappers``, ``reserve``, ``tasks``, ``judge_model`` at the top) is read too.

        Raises:
            ValueError: Unknown settings, or an invalid environment spec.
        """
        data = _migrated(dict(data))
        known = {f.name for f in fields(cls)}
        unknown = set(data) - known
        if unknown:
            raise ValueError(f"unknown settings {sorted(unknown)} in {SETTINGS}")
        env = EnvSpec.model_validate(data.pop("env", {}))
        return cls(**{**data, "task_ids": tuple(data["task_ids"])}, env=env)

    def differences(self, other: RunSettings) -> list[str]:
        """Binding settings that differ, as ``name: was X, now Y``."""
        out = []
        for f in fields(self):
            if f.name in self.NON_BINDING or f.name == "env":
                continue
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if mine != theirs:
                out.append(f"{f.name}: was {_short(mine)}, now {_short(theirs)}")
        return out + [f"env.{line}" for line in self.env.differences(other.env)]


def _migrated(data: dict[str, Any]) -> dict[str, Any]:
    """Settings written before the ``EnvSpec``, in today's form."""
    legacy = {k: data.pop(k) for k in ("tasks", "max_steps", "wrappers", "reserve",
                                       "judge_model") if k in data}
    if "env" in data or not legacy:
        return data
    env: dict[str, Any] = {k: legacy[k] for k in ("tasks", "max_steps", "wrappers", "reserve")
                           if k in legacy}
    if legacy.get("judge_model"):
        env["judge"] = {"base_url": "", "model": legacy["judge_model"]}
    return {**data, "env": env}


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class RunDir:
    """A run folder.

    Args:
        path: The folder (created on ``start``).
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.results_path = self.path / RESULTS
        self.settings_path = self.path / SETTINGS
        self.summary_path = self.path / SUMMARY
        self.transcripts = self.path / TRANSCRIPTS

    def exists(self) -> bool:
        """A run was started here."""
        return self.settings_path.exists() or self.results_path.exists()

    def settings(self) -> RunSettings:
        """The stored settings.

        Raises:
            FileNotFoundError: No run here.
        """
        if not self.settings_path.exists():
            raise FileNotFoundError(f"{self.path} holds no {SETTINGS}: not an eval run folder")
        return RunSettings.from_dict(json.loads(self.settings_path.read_text("utf-8")))

    def check(self, settings: RunSettings, *, resume: bool) -> None:
        """Raise what ``start`` would raise, writing nothing.

        ``vera-env eval`` checks the folder, then the endpoint, and only then ``start``s:
        a run refused in between (a wrong URL or model) must leave no ``run.json``
        behind, or the corrected command with the same ``--out`` is refused as "already
        holds a run".

        Raises:
            FileExistsError: A run exists here and ``resume`` is False.
            FileNotFoundError: ``resume`` with no run here.
            RunSettingsMismatch: ``resume`` with different binding settings.
        """
        if resume:
            stored = self.settings()
            diff = stored.differences(settings)
            if diff:
                raise RunSettingsMismatch(
                    f"refusing to resume {self.path}: it was made with different "
                    f"settings ({'; '.join(diff)}); use a new --out")
        elif self.exists():
            raise FileExistsError(f"{self.path} already holds a run; pass --resume to "
                                  "continue it or choose a new --out")

    def start(self, settings: RunSettings, *, resume: bool) -> None:
        """Create the folder and write the settings, or check that resuming it is sound.

        Raises:
            FileExistsError: A run exists here and ``resume`` is False.
            FileNotFoundError: ``resume`` with no run here.
            RunSettingsMismatch: ``resume`` with different binding settings.
        """
        self.check(settings, resume=resume)
        self.path.mkdir(parents=True, exist_ok=True)
        write_atomic(self.settings_path, json.dumps(settings.to_dict(), indent=2) + "\n")

    def attempts(self) -> list[Attempt]:
        """Every complete record in ``results.jsonl`` (a torn last line is ignored).

        Raises:
            ValueError: A line other than the last is not an Attempt (a corrupt file).
        """
        return _read(self.results_path)[0]

    def open_results(self) -> IO[str]:
        """Open ``results.jsonl`` for appending, first cutting off a torn last line."""
        self.path.mkdir(parents=True, exist_ok=True)
        if self.results_path.exists():
            _, good_bytes = _read(self.results_path)
            with self.results_path.open("r+b") as handle:
                handle.truncate(good_bytes)
        return self.results_path.open("a", encoding="utf-8")

    def drop(self, keep: set[tuple[str, int]]) -> None:
        """Rewrite ``results.jsonl`` keeping only the attempts whose key is in ``keep``."""
        kept = [a for a in self.attempts() if (a.task_id, a.attempt_index) in keep]
        write_atomic(self.results_path, "".join(a.to_json() + "\n" for a in kept))

    def transcript_dir(self, task_id: str, attempt_index: int) -> Path:
        """Where the transcript of one attempt lives."""
        return self.transcripts / _safe(task_id) / str(attempt_index)

    def write_summary(self, summary: dict[str, Any]) -> None:
        write_atomic(self.summary_path, json.dumps(summary, indent=2, default=str) + "\n")


def append(handle: IO[str], attempt: Attempt) -> None:
    """Append one attempt and make it durable before returning."""
    handle.write(attempt.to_json() + "\n")
    handle.flush()
    os.fsync(handle.fileno())


def _read(path: Path) -> tuple[list[Attempt], int]:
    """The attempts and the byte length of the complete lines of the file.

    Every record ends with a newline; text after the last newline is a write the
    process did not finish (killed mid-line), so it is not a record.

    Raises:
        ValueError: A complete line is not an Attempt.
    """
    if not path.exists():
        return [], 0
    *complete, _torn = path.read_bytes().split(b"\n")
    attempts, good = [], 0
    for number, raw in enumerate(complete, start=1):
        if raw.strip():
            try:
                attempts.append(Attempt.from_json(raw.decode("utf-8")))
            except (ValueError, UnicodeDecodeError) as exc:
                raise ValueError(f"{path}:{number}: not an Attempt record: {exc}") from exc
        good += len(raw) + 1
    return attempts, good


def _safe(task_id: str) -> str:
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in task_id)[:120] or "_"


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
