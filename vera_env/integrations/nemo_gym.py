"""NeMo Gym adapter: vera as a Gymnasium-style resources server, one task per dataset row.

NeMo Gym (``nemo-gym``, Python 3.12) collects rollouts by posting each JSONL dataset row
to an agent server, which drives a resources server. Its no-code ``resources_servers/
openenv`` server was measured failing against vera (it constructs the env class with no
arguments, resets every row with the same fixed ``reset_kwargs``, and sums ``None``
rewards as 0), so this module ships the pieces NeMo Gym's own convention asks for:

* ``VeraGymnasiumServer``, a ``resources_servers.gymnasium.GymnasiumServer`` whose
  ``reset`` reads the task from the row (``task_id``, or ``split`` + ``index``) and runs
  the environment in-process, one sandboxed episode per NeMo Gym session. Each session's
  calls run in that session's own thread, because bwrap ties a sandbox to the thread
  that spawned it (as in ``vera-env serve``).
* ``VeraGymnasiumAgent``, NeMo Gym's ``gymnasium_agent`` plus one rule: a rollout that
  an infrastructure fault made unscorable carries NeMo Gym's failure sentinel
  (``_ng_failure_class``), so rollout collection writes it to the ``*_failures.jsonl``
  sidecar, which the aggregator never reads, and retries it; never a reward of 0 in the
  main results. The wire type of ``/step`` forces a float reward, so the faulted step
  sends 0.0 with ``info["unscorable"] = true`` and ``info["episode_return"] = null``;
  the stock ``gymnasium_agent`` would sum that 0, which is why the agent is shipped too.
* ``scaffold``, which writes the server folder NeMo Gym's ``ng_run`` launches
  (``resources_servers/vera/{app.py,requirements.txt,configs/vera.yaml,data/*.jsonl}``).
  Its ``requirements.txt`` names the vera-env that wrote it, as installed
  (``installed_requirement``): vera-env is not on the package index, so the
  ``vera-env==<version>`` it used to write pointed NeMo Gym's venv build at nothing.

The NeMo Gym classes are built on first access (module ``__getattr__``), so importing this
module, and ``scaffold``, work without ``nemo-gym`` (Python 3.11). This module does not
use ``from __future__ import annotations``: FastAPI and pydantic read the annotations of
the classes built inside ``_nemo_classes`` at run time, where string annotations would
not resolve.
"""

import argparse
import asyncio
import functools
import json
import sys
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Literal

from pydantic import PrivateAttr

from vera_env import __version__
from vera_env import info as keys
from vera_env.errors import ResetNeeded, TaskFileError
from vera_env.serve.session import Turn, VeraSession
from vera_env.serve.splits import Splits
from vera_env.spec import EnvSpec

# Also, built on first access (they need nemo-gym): VeraGymnasiumServer, VeraGymnasiumAgent,
# VeraResourcesServerConfig. Not in __all__, so a star import does not need nemo-gym.
__all__ = ["EPISODE_RETURN", "FAILURE_CLASS", "FAILURE_KEY", "NemoStep", "VeraEpisodes",
           "installed_requirement", "mark_unscorable", "nemo_step", "scaffold",
           "task_for_row"]

FAILURE_KEY = "_ng_failure_class"
"""NeMo Gym's sentinel (``nemo_gym.rollout_collection.NG_FAILURE_CLASS_KEY``): a result
carrying it goes to the failures sidecar, not the results the aggregator reads."""
FAILURE_CLASS: Literal["transient"] = "transient"
"""An infrastructure fault: retried up to ``NEMO_GYM_MAX_ROLLOUT_ATTEMPTS`` times."""
EPISODE_RETURN = "episode_return"
"""``info`` key: the episode's return so far; null once the episode is unscorable."""

_ROW = "NeMo Gym dataset row"
NemoStep = tuple[str | None, float, bool, bool, dict[str, Any]]
"""What ``GymnasiumServer.step`` returns: observation (None ends), reward, terminated,
truncated, info."""


def task_for_row(metadata: Mapping[str, Any], splits: Splits) -> str:
    """The task a NeMo Gym dataset row asks for.

    A row names its task by ``task_id``, or by ``split`` (default ``train``) and
    ``index``; the extra fields of a JSONL row reach the server as ``metadata``.

    Raises:
        TaskFileError: The row names no task, or one the splits do not have.
    """
    if metadata.get("task_id"):
        task_id = str(metadata["task_id"])
        try:
            splits.tasks.get(task_id)
        except KeyError as exc:
            raise TaskFileError(_ROW, "task_id", f"unknown task {task_id!r}") from exc
        return task_id
    if "index" not in metadata:
        raise TaskFileError(_ROW, "task_id", f"the row names no task: give 'task_id', or "
                            f"'split' and 'index' (row fields: {sorted(metadata)})")
    try:
        return splits.task_id(str(metadata.get("split", "train")), int(metadata["index"]))
    except (IndexError, KeyError, ValueError) as exc:
        raise TaskFileError(_ROW, "split/index", str(exc)) from exc


@dataclass(frozen=True, slots=True)
class _Slot:
    session: VeraSession
    thread: ThreadPoolExecutor


class VeraEpisodes:
    """Episodes by NeMo Gym session id, each in its own environment and thread.

    The part of the server that does not need ``nemo-gym``: it takes the row's metadata
    and the model's text, and returns what ``GymnasiumServer`` returns.

    Args:
        spec: The environment every episode is built from.
        splits: Where rows' task ids and indices are looked up.
    """

    def __init__(self, spec: EnvSpec, splits: Splits) -> None:
        self._spec, self._splits = spec, splits
        self._slots: dict[str, _Slot] = {}

    async def reset(self, metadata: Mapping[str, Any], session_id: str | None) -> tuple[str, dict[str, Any]]:
        """Start the row's task in session ``session_id`` (replacing any episode it had).

        Raises:
            TaskFileError: The row names no task, or an unknown one.
        """
        task_id = task_for_row(metadata, self._splits)
        await self.close(session_id)
        slot = _Slot(VeraSession(functools.partial(self._spec.build, tasks=self._splits.tasks)),
                     ThreadPoolExecutor(max_workers=1, thread_name_prefix="vera-nemo"))
        self._slots[session_id or ""] = slot
        turn = await self._call(slot, functools.partial(slot.session.reset, task_id=task_id))
        return turn.text, _info(turn)

    async def step(self, text: str, session_id: str | None) -> NemoStep:
        """Play one turn of raw model text.

        Raises:
            ResetNeeded: The session has no running episode.
        """
        slot = self._slots.get(session_id or "")
        if slot is None:
            raise ResetNeeded(f"session {session_id!r} has no episode; reset first")
        turn = await self._call(slot, functools.partial(slot.session.step, text))
        return nemo_step(turn)

    async def close(self, session_id: str | None) -> None:
        """Kill the session's sandbox and forget it. Idempotent."""
        slot = self._slots.pop(session_id or "", None)
        if slot is not None:
            await self._call(slot, slot.session.close)
            slot.thread.shutdown(wait=False)

    @property
    def open_sessions(self) -> int:
        """Sessions with an environment (a crashed rollout leaves one until reset)."""
        return len(self._slots)

    @staticmethod
    async def _call(slot: _Slot, call: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(slot.thread, call)


def nemo_step(turn: Turn) -> NemoStep:
    """A vera step as NeMo Gym's 5-tuple; the observation is None once the episode ended.

    An unscorable step's reward slot is 0.0 only because the wire type is a float: its
    ``info`` says ``unscorable`` and ``episode_return`` is None, and ``VeraGymnasiumAgent``
    turns the rollout into a NeMo Gym failure.
    """
    reward = 0.0 if turn.reward is None else turn.reward
    return (None if turn.done else turn.text, reward, turn.terminated, turn.truncated,
            _info(turn))


def _info(turn: Turn) -> dict[str, Any]:
    fields = json.loads(json.dumps({k: turn.info.get(k) for k in keys.INFO_KEYS}, default=str))
    return {**fields, EPISODE_RETURN: turn.episode_return}


def mark_unscorable(result: dict[str, Any]) -> dict[str, Any]:
    """A ``/run`` result with NeMo Gym's failure sentinel when its episode was unscorable."""
    info = result.get("info") or {}
    if not info.get(keys.UNSCORABLE):
        return result
    return {**result, FAILURE_KEY: FAILURE_CLASS,
            "error_message": "vera: an infrastructure fault made this episode unscorable"}


@functools.cache
def _nemo_classes() -> dict[str, type]:
    """Build the classes that subclass NeMo Gym's (imported here: the ``nemo-gym`` extra)."""
    # nemo-gym is optional and needs Python 3.12: untyped here, and absent from the lint env.
    from fastapi import Request  # noqa: PLC0415
    from nemo_gym.base_resources_server import BaseResourcesServerConfig  # type: ignore[import-not-found]  # noqa: PLC0415
    from resources_servers.gymnasium import GymnasiumServer, extract_text  # type: ignore[import-not-found]  # noqa: PLC0415
    from responses_api_agents.gymnasium_agent.app import GymnasiumAgent, GymnasiumAgentRunRequest, GymnasiumRunResponse  # type: ignore[import-not-found]  # noqa: PLC0415

    class VeraResourcesServerConfig(BaseResourcesServerConfig):  # type: ignore[misc]
        """The server's YAML block: ``env_spec`` (``EnvSpec`` fields) and ``splits``."""

        env_spec: dict[str, Any] = {}
        splits: dict[str, str] = {"train": "builtin"}

    class VeraGymnasiumServer(GymnasiumServer):  # type: ignore[misc]
        """vera behind NeMo Gym's ``/reset`` and ``/step``; the row picks the task."""

        config: VeraResourcesServerConfig
        _episodes: VeraEpisodes | None = PrivateAttr(None)

        @property
        def episodes(self) -> VeraEpisodes:
            if self._episodes is None:
                self._episodes = VeraEpisodes(EnvSpec.model_validate(self.config.env_spec),
                                              Splits(self.config.splits))
            return self._episodes

        async def reset(self, metadata: dict[str, Any], session_id: str | None = None
                        ) -> tuple[str | None, dict[str, Any]]:
            return await self.episodes.reset(metadata, session_id)

        async def step(self, action: Any, metadata: dict[str, Any],
                       session_id: str | None = None) -> NemoStep:
            return await self.episodes.step(extract_text(action), session_id)

        async def close_session(self, session_id: str | None) -> None:
            await self.episodes.close(session_id)
            await super().close_session(session_id)

    class VeraGymnasiumAgent(GymnasiumAgent):  # type: ignore[misc]
        """``gymnasium_agent`` that reports an unscorable episode as a NeMo Gym failure."""

        async def run(self, request: Request, body: GymnasiumAgentRunRequest) -> GymnasiumRunResponse:
            result = await super().run(request, body)
            return GymnasiumRunResponse.model_validate(mark_unscorable(result.model_dump()))

    return {"VeraResourcesServerConfig": VeraResourcesServerConfig,
            "VeraGymnasiumServer": VeraGymnasiumServer, "VeraGymnasiumAgent": VeraGymnasiumAgent}


def __getattr__(name: str) -> Any:
    if name in ("VeraResourcesServerConfig", "VeraGymnasiumServer", "VeraGymnasiumAgent"):
        return _nemo_classes()[name]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


_APP = '''"""NeMo Gym entry point for vera (written by vera_env.integrations.nemo_gym.scaffold)."""

from vera_env.integrations.nemo_gym import {cls}

if __name__ == "__main__":
    {cls}.run_webserver()
'''


def installed_requirement() -> str:
    """The ``requirements.txt`` text that installs the vera-env running now.

    PEP 610's ``direct_url.json`` says where an installed distribution came from: a
    clone (editable or not) or a wheel on disk is named by its ``file://`` URL (an
    editable install's is the project folder), a VCS checkout by its URL and commit. An
    install without one came from a package index, where vera-env is not published, so
    its version pin carries a comment saying to publish it or replace the line.
    """
    direct = _direct_url()
    if direct is None:
        return (f"# vera-env is not on the package index: publish {__version__} there, or "
                "replace the next line with a clone or wheel (vera-env @ file:///path)\n"
                f"vera-env=={__version__}")
    url = str(direct["url"])
    vcs = direct.get("vcs_info")
    if vcs:
        url = f"{vcs['vcs']}+{url}@{vcs['commit_id']}"
    if direct.get("subdirectory"):
        url += f"#subdirectory={direct['subdirectory']}"
    return f"vera-env @ {url}"


def _direct_url() -> dict[str, Any] | None:
    """The parsed ``direct_url.json`` of the installed vera-env, or None (an index install).

    Every distribution named vera-env is asked: run from a clone, a stale
    ``vera_env.egg-info`` there (no ``direct_url.json``) is found before the installed one.
    """
    for dist in metadata.distributions(name="vera-env"):
        text = dist.read_text("direct_url.json")
        if text:
            found: dict[str, Any] = json.loads(text)
            return found
    return None


def _config(name: str, env_spec: Mapping[str, Any], splits: Mapping[str, str],
            max_steps: int, data: str) -> dict[str, Any]:
    server = {"entrypoint": "app.py", "domain": "other", "verified": False,
              "description": "vera: data analysis with harness-executed verification reward",
              "env_spec": dict(env_spec), "splits": dict(splits)}
    agent = {"entrypoint": "app.py",
             "resources_server": {"type": "resources_servers", "name": name},
             "model_server": {"type": "responses_api_models", "name": "policy_model"},
             "max_steps": max_steps,
             "datasets": [{"name": "example", "type": "example", "jsonl_fpath": data}]}
    return {name: {"resources_servers": {name: server}},
            f"{name}_gymnasium_agent": {"responses_api_agents": {f"{name}_agent": agent}}}


def scaffold(root: Path, *, name: str = "vera", env_spec: Mapping[str, Any] | None = None,
             splits: Mapping[str, str] | None = None, rows: int = 8,
             requirement: str | None = None) -> Path:
    """Write the folders ``ng_run`` launches: ``root/resources_servers/<name>/`` (the
    server, its YAML and dataset) and ``root/responses_api_agents/<name>_agent/``.

    NeMo Gym finds a server's folder from its YAML keys (``resources_servers: {name:}``),
    in the working directory first; it runs ``app.py`` there in a venv built from
    ``requirements.txt``. The dataset has one row per task of the train split (at most
    ``rows``). The YAML is written as JSON, which is YAML too. ``requirement`` (the
    ``requirements.txt`` text) defaults to ``installed_requirement()``.

    Returns:
        The server folder.
    """
    spec = dict(env_spec or {})
    requirement = installed_requirement() if requirement is None else requirement
    chosen = dict(splits or {"train": "builtin"})
    EnvSpec.model_validate(spec)  # a bad spec fails here, not in the launched server
    ids = Splits(chosen).task_specs("train")[:rows]
    folder, agent = root / "resources_servers" / name, root / "responses_api_agents" / f"{name}_agent"
    for path, cls in ((folder, "VeraGymnasiumServer"), (agent, "VeraGymnasiumAgent")):
        path.mkdir(parents=True, exist_ok=True)
        (path / "app.py").write_text(_APP.format(cls=cls))
        (path / "requirements.txt").write_text(requirement + "\n")
    (folder / "configs").mkdir(exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    data = f"resources_servers/{name}/data/example.jsonl"
    with (folder / "data" / "example.jsonl").open("w") as out:
        for row in ids:
            out.write(json.dumps({"responses_create_params": {"input": []},
                                  "task_id": row["task_id"], "agent_ref": {
                                      "type": "responses_api_agents",
                                      "name": f"{name}_gymnasium_agent"}}) + "\n")
    max_steps = EnvSpec.model_validate(spec).max_steps + 1  # + the one extra answer ask
    config = _config(name, spec, chosen, max_steps, data)
    (folder / "configs" / f"{name}.yaml").write_text(json.dumps(config, indent=2) + "\n")
    return folder


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vera_env.integrations.nemo_gym scaffold DIR``: write the server folder."""
    parser = argparse.ArgumentParser(prog="python -m vera_env.integrations.nemo_gym")
    sub = parser.add_subparsers(dest="command", required=True)
    make = sub.add_parser("scaffold", help="write resources_servers/<name>/ for ng_run")
    make.add_argument("root", type=Path, help="the folder ng_run is started from")
    make.add_argument("--name", default="vera", help="server name (default: vera)")
    make.add_argument("--tasks", default="builtin", help="train split source (default: builtin)")
    make.add_argument("--max-steps", type=int, default=20, help="turns per episode (default: 20)")
    make.add_argument("--rows", type=int, default=8, help="dataset rows (default: 8)")
    make.add_argument("--requirement",
                      help="how the server's venv installs vera-env, e.g. a clone's path "
                           "(default: where the running vera-env was installed from)")
    args = parser.parse_args(argv)
    folder = scaffold(args.root, name=args.name, env_spec={"max_steps": args.max_steps},
                      splits={"train": args.tasks}, rows=args.rows, requirement=args.requirement)
    print(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
