"""Play vera episodes through NeMo Gym's real FastAPI apps; print the outcome as JSON.

Run by ``tests/integrations/test_nemo_gym.py`` with the Python 3.12 venv that has
``nemo-gym`` (it needs 3.12; the test suite runs on 3.11). Modes:

* ``server ROW_JSON``: the oracle's turns through ``VeraGymnasiumServer``'s ``/reset``
  and ``/step`` (NeMo Gym's ``GymnasiumServer`` routes and session middleware).
* ``reset ROW_JSON``: ``/reset`` only; prints the task the row picked.
* ``agent ROW_JSON``: the same episode through ``VeraGymnasiumAgent``'s ``/run`` (NeMo
  Gym's ``gymnasium_agent`` loop), the model server replaced by the oracle's turns and
  the resources server reached over its real app.
* ``scaffold DIR``: the folder ``scaffold`` wrote, read as NeMo Gym reads it (OmegaConf,
  the server's and agent's config classes); the first dataset row reset on that server.
* ``--fault`` (server and agent modes): the sandbox fails on the second step, as an infrastructure
  fault would (the env's ``play_turn`` raises ``SandboxError`` in a free turn).
"""

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from unittest.mock import MagicMock

from fastapi.encoders import jsonable_encoder
from fastapi.testclient import TestClient
from nemo_gym.config_types import ModelServerRef, ResourcesServerRef
from nemo_gym.openai_utils import NeMoGymResponse
from nemo_gym.server_utils import ServerClient
from omegaconf import OmegaConf
from responses_api_agents.gymnasium_agent.app import GymnasiumAgentConfig

from vera_env import env as env_module
from vera_env.errors import SandboxError
from vera_env.integrations import nemo_gym
from vera_env.policy import OraclePolicy
from vera_env.tasks import load_tasks

MAX_STEPS = 12


def response(text: str) -> dict[str, Any]:
    """A model's turn as NeMo Gym's Responses-API object."""
    return NeMoGymResponse(
        id="r", created_at=0.0, model="oracle", object="response", parallel_tool_calls=False,
        tool_choice="auto", tools=[],
        output=[{"id": "m", "type": "message", "role": "assistant", "status": "completed",
                 "content": [{"type": "output_text", "text": text, "annotations": []}]}],
    ).model_dump(mode="json")


def resources_client() -> TestClient:
    """NeMo Gym's real app for the vera server (routes, session middleware)."""
    config = nemo_gym.VeraResourcesServerConfig(host="", port=0, entrypoint="", name="vera",
                                                env_spec={"max_steps": MAX_STEPS})
    server = nemo_gym.VeraGymnasiumServer(config=config,
                                          server_client=MagicMock(spec=ServerClient))
    return TestClient(server.setup_webserver())


def inject_fault(after_steps: int) -> None:
    """Make the sandbox fail from free step ``after_steps + 1`` on."""
    real_play, calls = env_module.play_turn, {"n": 0}

    def play(ep: Any, action: str, turn: Any, rules: Any) -> None:
        if not turn.phase.answer_only:  # a free turn, where commands run
            calls["n"] += 1
            if calls["n"] > after_steps:
                raise SandboxError("injected fault: the sandbox died")
        real_play(ep, action, turn, rules)

    env_module.play_turn = play


def play_server(row: dict[str, Any]) -> dict[str, Any]:
    """The oracle through ``/reset`` and ``/step``; returns rewards and the last info."""
    client, oracle = resources_client(), OraclePolicy(load_tasks("builtin"))
    body = {"responses_create_params": {"input": []}, **row}
    reset = client.post("/reset", json=body)
    reset.raise_for_status()
    info = reset.json()["info"]
    rewards: list[float] = []
    while True:
        turn = oracle.act("", info)
        step = client.post("/step", json={**body, "response": response(turn)})
        step.raise_for_status()
        data = step.json()
        rewards.append(data["reward"])
        info = data["info"]
        if data["terminated"] or data["truncated"]:
            return {"task_id": info["task_id"], "rewards": rewards, "return": sum(rewards),
                    "info": info, "observation": data["observation"]}


def reset_only(row: dict[str, Any]) -> dict[str, Any]:
    """``/reset`` on the row; the task it picked."""
    reset = resources_client().post("/reset", json={"responses_create_params": {"input": []}, **row})
    reset.raise_for_status()
    return {"task_id": reset.json()["info"]["task_id"]}


def play_agent(row: dict[str, Any]) -> dict[str, Any]:
    """The oracle through ``VeraGymnasiumAgent``'s ``/run``; returns the run's result."""
    env_client, oracle = resources_client(), OraclePolicy(load_tasks("builtin"))
    task = {"id": ""}

    async def post(server_name: str, url_path: str, json: Any = None, cookies: Any = None) -> Any:
        payload = jsonable_encoder(json)
        if server_name == "vera":
            answer = env_client.post(url_path, json=payload)
            if url_path == "/reset":
                task["id"], task["step"] = answer.json()["info"]["task_id"], 0
            content, status = answer.content, answer.status_code
        else:  # the policy model: the oracle's next turn
            turn = oracle.act("", {"task_id": task["id"], "step": task["step"]})
            task["step"] += 1
            content, status = json_bytes(response(turn)), 200
        return SimpleNamespace(ok=status < 400, status=status, cookies={},
                               read=_reader(content), content=SimpleNamespace(read=_reader(content)))

    client = MagicMock(spec=ServerClient)
    client.post = post
    config = GymnasiumAgentConfig(
        host="", port=0, entrypoint="", name="vera_agent", max_steps=MAX_STEPS + 1,
        resources_server=ResourcesServerRef(type="resources_servers", name="vera"),
        model_server=ModelServerRef(type="responses_api_models", name="policy_model"))
    agent = nemo_gym.VeraGymnasiumAgent(config=config, server_client=client)
    run = TestClient(agent.setup_webserver()).post(
        "/run", json={"responses_create_params": {"input": []}, **row})
    run.raise_for_status()
    result = run.json()
    return {"task_id": result["info"]["task_id"], "return": result["reward"],
            "info": result["info"], "failure_class": result.get(nemo_gym.FAILURE_KEY)}


def check_scaffold(root: Path) -> dict[str, Any]:
    """Load the scaffolded YAML with NeMo Gym's loaders; reset the first row on it."""
    config = OmegaConf.to_container(OmegaConf.load(root / "resources_servers/vera/configs/vera.yaml"))
    block = config["vera"]["resources_servers"]["vera"] | {"host": "", "port": 0, "name": "vera"}
    agent = config["vera_gymnasium_agent"]["responses_api_agents"]["vera_agent"]
    GymnasiumAgentConfig.model_validate(agent | {"host": "", "port": 0, "name": "vera_agent"})
    server = nemo_gym.VeraGymnasiumServer(config=nemo_gym.VeraResourcesServerConfig.model_validate(block),
                                          server_client=MagicMock(spec=ServerClient))
    row = json.loads((root / agent["datasets"][0]["jsonl_fpath"]).read_text().splitlines()[0])
    reset = TestClient(server.setup_webserver()).post("/reset", json=row)
    reset.raise_for_status()
    return {"row_task_id": row["task_id"], "task_id": reset.json()["info"]["task_id"],
            "steps_left": reset.json()["info"]["steps_left"]}


def json_bytes(data: Any) -> bytes:
    return json.dumps(data).encode()


def _reader(content: bytes) -> Any:
    async def read() -> bytes:
        return content
    return read


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["server", "reset", "agent", "scaffold"])
    parser.add_argument("row", help="the dataset row's fields, as JSON (scaffold: the folder)")
    parser.add_argument("--fault", action="store_true", help="the sandbox fails on step 2")
    args = parser.parse_args()
    if args.fault:
        inject_fault(after_steps=1)
    if args.mode == "scaffold":
        print(json.dumps(check_scaffold(Path(args.row))))
        return 0
    play = {"server": play_server, "reset": reset_only, "agent": play_agent}[args.mode]
    print(json.dumps(play(json.loads(args.row))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
