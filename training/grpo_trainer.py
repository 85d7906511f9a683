"""``MultiTurnGRPOTrainer``: TRL's GRPO over lockstep episodes, in either layout.

The library half of GRPO, as TRL keeps ``GRPOTrainer`` apart from its ``grpo`` script:
``vera_env.training.scripts.grpo`` is the script (flags, model, dataset, one ``fit``) and builds
this trainer. It serves both layouts, step-wise and concatenated, so it is named for
multi-turn episodes (it was ``StepwiseGRPOTrainer``, in ``stepwise_trainer``).

Why a subclass. TRL's public seam for multi-turn work, ``rollout_func``, must return
exactly one sample per prompt element, and TRL then groups consecutive rows by
``num_generations`` (https://github.com/huggingface/trl/issues/4543 meets the same wall). A step-wise batch has a
variable number of samples per episode, so this class overrides one method,
``_generate_and_score_completions``: it plays the episodes (``vera_env.training.lockstep``, the
one rollout loop), packs them as the layout says (``vera_env.training.packing``: one sample per
turn, or one concatenated sample per episode with the env's tokens masked),
scores each *episode* with the trainer's own reward functions and weights
(``_calculate_rewards``, so ``reward_weights``, async reward functions and
``log_metric`` work as usual), computes group-relative advantages per episode
(``vera_env.training.advantages``), broadcasts them to the episode's samples, weights the samples
so long episodes do not dominate, and returns the dict TRL's loss consumes. With
``redraws`` it first replays, on other tasks, the groups whose rewards are all equal
(DAPO's dynamic sampling: such a group has no advantage, and a step made of them is
spent), so the optimizer steps on groups that teach. Everything
else — the loss, clipping, ``loss_type``, optimizer, vLLM weight sync, checkpoints — is
TRL's. The override reads TRL internals (``_calculate_rewards``,
``_get_per_token_logps_and_entropies``, ``_metrics``, ``_pending_metrics``), so it is pinned to the TRL
range it is tested on (``TESTED_TRL``; pyproject pins the same) and refuses others.

The generation batch (``per_device_train_batch_size * steps_per_generation`` episodes
per process) becomes all of its episodes' samples; TRL splits them into
``steps_per_generation`` micro-batches, so the number of optimizer steps does not grow
with episode length (unlike schemes where every turn is a mini-batch row counted
against the schedule). Each process pads its samples to a multiple of
``steps_per_generation`` and to the largest count of any process with masked dummy
rows, so every process runs the same number
of backward passes on the same number of rows (DDP and TRL's gathered loss statistics
need it).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch
import trl
from accelerate.utils import gather_object
from packaging.version import Version
from trl import GRPOTrainer
from trl.trainer.utils import pad

from vera_env.training.advantages import (
    AdvantageMode,
    group_advantages,
    reward_to_go_advantages,
    sample_weights,
    weighted_rewards,
)
from vera_env.training.dump import RolloutDump, format_episode
from vera_env.training.lockstep import PlayedEpisode
from vera_env.training.packing import Packing, Sample, TurnSample
from vera_env.training.phase_log import PhaseLog, batch_label

__all__ = ["TESTED_TRL", "MultiTurnGRPOTrainer", "Rollout", "check_trl"]

TESTED_TRL = ("1.16", "1.17")
"""TRL versions ``[low, high)`` this override is tested against."""


class Rollout(Protocol):
    """What the trainer plays its episodes with (``vera_env.training.lockstep.LockstepRollout``)."""

    def __call__(self, prompts: list[Any], trainer: Any) -> list[PlayedEpisode]:
        """Play one episode per dataset prompt (a task start), with ``trainer``'s model."""
        ...

    def packing(self, trainer: Any) -> Packing:
        """How the episodes become samples, for ``trainer``'s tokenizer."""
        ...

    def redraw(self, prompt: Any, rng: np.random.Generator) -> str:
        """Another start for a group that taught nothing (``redraws``)."""
        ...


def check_trl(version: str = trl.__version__) -> None:
    """Refuse a TRL outside ``TESTED_TRL`` (the override reads its internals).

    Raises:
        RuntimeError: The version is outside the tested range.
    """
    low, high = map(Version, TESTED_TRL)
    if not low <= Version(version) < high:
        raise RuntimeError(f"vera_env.training.grpo_trainer is tested with trl>={TESTED_TRL[0]},"
                           f"<{TESTED_TRL[1]}; found {version}. Install that range.")


class MultiTurnGRPOTrainer(GRPOTrainer):
    """GRPO where every model turn is one sample (see the module docstring).

    Args:
        rollout: Plays episodes and says how to pack them (``Rollout``).
        advantage: ``episode`` (broadcast) or ``reward_to_go`` (step-wise layout only;
            needs the default reward functions, whose parts it re-weighs per turn).
        dump: Where to write sample records (``--dump-rollouts``), or None.
        print_samples: Print this many episodes of every generation batch.
        redraws: Rounds per training batch in which every group whose rewards are all
            equal is played again on a redrawn start (``rollout.redraw``); the
            replaced episodes are dumped with ``redrawn: true`` and never trained on.
            Episode advantages and one process only (groups are judged whole).
        log: Where each generation batch's rollout is announced and summed up (a
            rollout is most of a step, minutes on a CPU); None: silent.
        *args, **kwargs: ``GRPOTrainer``'s (give no ``rollout_func``).
    """

    _last_loaded_step: int
    """``GRPOTrainer``'s own: the step whose weights vLLM holds (declared for the checker)."""

    def __init__(self, *args: Any, rollout: Rollout, advantage: AdvantageMode = "episode",
                 dump: RolloutDump | None = None, print_samples: int = 0,
                 redraws: int = 0, log: PhaseLog | None = None, **kwargs: Any) -> None:
        check_trl()
        if kwargs.get("rollout_func") is not None:
            raise ValueError("MultiTurnGRPOTrainer plays its own episodes: pass rollout, "
                             "not rollout_func")
        if advantage not in ("episode", "reward_to_go"):
            raise ValueError(f"advantage must be episode or reward_to_go, got {advantage!r}")
        if redraws < 0 or (redraws and advantage != "episode"):
            raise ValueError(f"redraws must be >= 0 and needs advantage='episode' (a group "
                             f"of equal returns may still rank its turns), got {redraws} "
                             f"with {advantage!r}")
        super().__init__(*args, **kwargs)
        if redraws and self.accelerator.num_processes > 1:
            raise ValueError("redraws needs one training process: a redrawn group must be "
                             "replayed whole, and groups may span processes")
        if advantage == "reward_to_go" and self.reward_func_names != [
                "verification_reward", "correctness_reward", "format_reward"]:
            raise ValueError("advantage='reward_to_go' needs vera_env.training.rewards.REWARD_FUNCS: "
                             "it splits their parts per turn")
        self.rollout, self.advantage_mode = rollout, advantage
        self.packing = rollout.packing(self)
        if advantage == "reward_to_go" and self.packing.name != "stepwise":
            raise ValueError("advantage='reward_to_go' needs one sample per turn "
                             "(layout stepwise)")
        self.dump, self.print_samples, self.redraws = dump, print_samples, redraws
        self.phase_log = log
        self.last_episodes: list[PlayedEpisode] = []
        self.last_samples: list[Sample] = []
        self.last_records: list[dict[str, Any]] = []

    # ----- the override -----

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        mode = "train" if self.model.training else "eval"
        if self.use_vllm and self.state.global_step != self._last_loaded_step:
            self.vllm_generation.sync_weights()
            self._last_loaded_step = self.state.global_step
        prompts = [x["prompt"] for x in inputs]
        began = time.perf_counter()
        self._say(mode, f"rolling out {len(prompts)} episodes")
        episodes = self.rollout(prompts, self)
        per_func = self._score(inputs, prompts, episodes)
        if self.redraws and mode == "train":
            per_func = self._redraw(inputs, prompts, episodes, per_func)
        self.last_episodes = episodes
        self._say(mode, f"rolled out {len(episodes)} episodes in {time.perf_counter() - began:.0f} s "
                        f"({sum(len(e.turns) for e in episodes)} turns, "
                        f"{sum(e.excluded for e in episodes)} excluded)"
                        + ("; computing the loss" if mode == "train" else ""))
        advantages = self._episode_advantages(per_func, episodes, mode)
        keep = [not e.excluded for e in episodes]
        packed = [self.packing.samples(e.turns, advs) if ok else []
                  for e, ok, advs in zip(episodes, keep, advantages, strict=True)]
        weights = sample_weights([len(p) for p in packed])
        samples = [s for p in packed for s in p]
        self.last_samples = samples
        self._record(episodes, advantages, keep, packed, weights)
        output = self._batch(samples, weights)
        self._log_batch(episodes, keep, samples, mode)
        return output

    def _say(self, mode: str, what: str) -> None:
        """A phase line about this generation batch (``vera_env.training.phase_log``)."""
        if self.phase_log is not None and self.accelerator.is_main_process:
            per_batch = -(-self.args.steps_per_generation // self.args.gradient_accumulation_steps)
            where = batch_label(mode, self.state.global_step, self.state.max_steps, per_batch,
                                self.accelerator.num_processes)
            self.phase_log(f"{where}: {what}")

    # ----- rewards and advantages -----

    def _score(self, inputs: list[dict[str, Any]], prompts: list[Any],
               episodes: Sequence[PlayedEpisode]) -> torch.Tensor:
        """Each reward function's value per episode (every process's, gathered)."""
        fields = [e.fields() for e in episodes]
        rows = [{**x, **f} for x, f in zip(inputs, fields, strict=True)]
        completions = [e.turns[-1].action if e.turns else "" for e in episodes]
        last_ids = [e.turns[-1].completion_ids if e.turns else [] for e in episodes]
        return self._calculate_rewards(rows, prompts, completions, last_ids)

    def _rewards(self, per_func: torch.Tensor) -> torch.Tensor:
        """Weighted episode rewards; NaN where every function abstained (unscorable)."""
        values = weighted_rewards(per_func.detach().cpu().double().numpy(),
                                  self.reward_weights.tolist())
        return torch.as_tensor(values, dtype=per_func.dtype, device=per_func.device)

    def _redraw(self, inputs: list[dict[str, Any]], prompts: list[Any],
                episodes: list[PlayedEpisode], per_func: torch.Tensor) -> torch.Tensor:
        """Replay groups with no advantage on redrawn starts, in place (``redraws``).

        A replaced episode has already told a curriculum its outcome (the env did, when it
        ended), so a deferred start redrawn after it is drawn from the updated rates.
        Returns ``per_func`` with the replayed episodes' rows.
        """
        size, redrawn = self.num_generations, 0
        for round_ in range(self.redraws):
            _, zero_std = group_advantages(self._rewards(per_func).tolist(), size,
                                           self.scale_rewards)
            dead = [g for g in range(len(episodes) // size) if zero_std[g * size]]
            if not dead:
                break
            rng = np.random.default_rng([self.args.seed, self.state.global_step, round_])
            members = [g * size + k for g in dead for k in range(size)]
            fresh = [self.rollout.redraw(prompts[g * size], rng) for g in dead]
            new_prompts = [p for p in fresh for _ in range(size)]
            new_inputs = [{**inputs[m], "prompt": p} for m, p in zip(members, new_prompts,
                                                                      strict=True)]
            self._say("train", f"replaying {len(dead)} group(s) with no advantage on "
                               f"redrawn tasks (redraw {round_ + 1}/{self.redraws})")
            replayed = self.rollout(new_prompts, self)
            new_func = self._score(new_inputs, new_prompts, replayed)
            old = [episodes[m] for m in members]
            self._record(old, [[0.0] * len(e.turns) for e in old], [False] * len(old),
                         [[] for _ in old], [], redrawn=True)
            for slot, m in enumerate(members):
                episodes[m], prompts[m], inputs[m] = replayed[slot], new_prompts[slot], new_inputs[slot]
                per_func[m] = new_func[slot]
            redrawn += len(dead)
        self._metrics["train"]["stepwise/redrawn_groups"].append(float(redrawn))
        return per_func

    def _episode_advantages(self, per_func: torch.Tensor, episodes: Sequence[PlayedEpisode],
                            mode: str) -> list[list[float]]:
        self._flush_reward_logs(mode)
        rewards = self._rewards(per_func)
        groups = self.num_generations if mode == "train" else self.num_generations_eval
        adv, zero_std = group_advantages(rewards.tolist(), groups, self.scale_rewards)
        offset = self.accelerator.process_index * len(episodes)
        local = adv[offset: offset + len(episodes)]
        for i, name in enumerate(self.reward_func_names):
            self._metrics[mode][f"rewards/{name}/mean"].append(
                torch.nanmean(per_func[:, i]).item())
            self._metrics[mode][f"rewards/{name}/std"].append(_nanstd(per_func[:, i]))
        scored = rewards[~torch.isnan(rewards)]
        self._metrics[mode]["reward"].append(scored.mean().item() if scored.numel() else 0.0)
        self._metrics[mode]["reward_std"].append(scored.std().item() if scored.numel() > 1
                                                 else 0.0)
        # The env's own reward (the parts summed) beside the weighted one trained on, so a
        # run on other weights (verification only) compares with the default reward.
        default = torch.as_tensor(weighted_rewards(per_func.detach().cpu().double().numpy(),
                                                   [1.0] * per_func.shape[1]))
        kept = default[~torch.isnan(default)]
        self._metrics[mode]["reward_default"].append(kept.mean().item() if kept.numel() else 0.0)
        self._metrics[mode]["frac_reward_zero_std"].append(float(zero_std.mean()))
        if self.advantage_mode == "episode":
            return [[float(a)] * len(e.turns) for a, e in zip(local, episodes, strict=True)]
        return self._reward_to_go(episodes, groups)

    def _flush_reward_logs(self, mode: str) -> None:
        """Move what reward functions logged (``log_metric``) into this step's metrics.

        TRL does this inside the ``_generate_and_score_completions`` this class replaces;
        without it ``env/correct`` and the other reward-function metrics never reached
        the logs and piled up in memory. Averaged over every process, keys sorted so all
        ranks gather in the same order. ``log_extra`` columns feed TRL's completions
        table, which step-wise batches do not fill: they are dropped.
        """
        device = self.accelerator.device
        for name in sorted(set(gather_object(list(self._pending_metrics)))):
            values = self._pending_metrics.get(name, [])
            local = torch.tensor([sum(values), len(values)], dtype=torch.float32, device=device)
            total, count = self.accelerator.gather(local).view(-1, 2).sum(dim=0).tolist()
            if count:
                self._metrics[mode][name].append(total / count)
        self._pending_metrics.clear()
        self._pending_extra_logs.clear()

    def _reward_to_go(self, episodes: Sequence[PlayedEpisode], groups: int) -> list[list[float]]:
        w_ver, w_cor, w_fmt = self.reward_weights.tolist()
        turn_rewards = [[w_ver * t.reward_parts.verification
                         + w_cor * (t.reward_parts.correctness or 0.0)
                         - w_fmt * t.reward_parts.penalty for t in e.turns]
                        for e in episodes]
        # Groups may span processes: gather them whole, normalise, keep this process's part.
        every = gather_object([(r, not e.excluded) for r, e in zip(turn_rewards, episodes, strict=False)])
        advantages = reward_to_go_advantages([r for r, _ in every], [ok for _, ok in every],
                                             groups, self.scale_rewards)
        offset = self.accelerator.process_index * len(episodes)
        return advantages[offset: offset + len(episodes)]

    # ----- tensors for TRL's loss -----

    def _batch(self, samples: list[Sample], weights: list[float]) -> dict[str, Any]:
        device = self.accelerator.device
        chunks = self.args.steps_per_generation
        eos = self.eos_token_ids[0]
        rows = [Sample(s.prompt_ids, s.completion_ids, s.mask, s.logprobs, s.advantage * w)
                for s, w in zip(samples, weights, strict=True)]
        # Masked dummies: every process gets the same number of rows per micro-step
        # (TRL gathers per-row statistics in its loss, and all_gather needs equal shapes).
        counts = self.accelerator.gather(torch.tensor([len(rows)], device=device))
        target = max(int(counts.max().item()), chunks)
        target += -target % chunks
        rows += [Sample([eos], [eos], [0], [0.0], 0.0)] * (target - len(rows))
        prompt = [torch.tensor(s.prompt_ids) for s in rows]
        completion = [torch.tensor(s.completion_ids) for s in rows]
        side = {"padding_side": "left", "pad_to_multiple_of": self.pad_to_multiple_of}
        right = {"padding_side": "right", "pad_to_multiple_of": self.pad_to_multiple_of}
        pad_id = self._tokenizer.pad_token_id
        out = {
            "prompt_ids": pad(prompt, padding_value=pad_id, **side).to(device),
            "prompt_mask": pad([torch.ones_like(p) for p in prompt], padding_value=0,
                               **side).to(device),
            "completion_ids": pad(completion, padding_value=pad_id, **right).to(device),
            "completion_mask": pad([torch.ones_like(c) for c in completion], padding_value=0,
                                   **right).to(device),
            "tool_mask": pad([torch.tensor(s.mask) for s in rows], padding_value=0,
                             **right).to(device),
            "advantages": torch.tensor([s.advantage for s in rows], dtype=torch.float32,
                                       device=device),
        }
        loss_mask = out["completion_mask"] * out["tool_mask"]
        out["num_items_in_batch"] = self.accelerator.gather(loss_mask.sum()).sum()
        logprobs = [s.logprobs for s in rows if s.logprobs is not None]
        self._add_logps(out, logprobs if len(logprobs) == len(rows) else None)
        return out

    def _add_logps(self, out: dict[str, Any], sampled: list[list[float]] | None) -> None:
        """Old-policy, reference and vLLM importance-sampling terms, as TRL computes them."""
        ids = torch.cat([out["prompt_ids"], out["completion_ids"]], dim=1)
        attention = torch.cat([out["prompt_mask"], out["completion_mask"]], dim=1)
        keep = out["completion_ids"].size(1)
        generate_every = self.args.steps_per_generation * self.num_iterations
        correction = self.use_vllm and self.vllm_importance_sampling_correction
        with torch.no_grad():
            if self.args.gradient_accumulation_steps % generate_every != 0 or correction:
                out["old_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                    self.model, ids, attention, keep,
                    batch_size=self.args.per_device_train_batch_size)
            if self.beta != 0.0:
                if self.ref_model is None:
                    raise ValueError("beta > 0 with step-wise samples needs a reference model "
                                     "(load the model from a folder, not PEFT)")
                out["ref_per_token_logps"], _, _ = self._get_per_token_logps_and_entropies(
                    self.ref_model, ids, attention, keep,
                    batch_size=self.args.per_device_train_batch_size)
        if not correction or sampled is None:
            return
        values = pad([torch.tensor([float("nan") if x is None else x for x in lp])
                      for lp in sampled], padding_value=0.0, padding_side="right",
                     pad_to_multiple_of=self.pad_to_multiple_of).to(ids.device)
        out["sampling_per_token_logps"] = values
        mask = out["completion_mask"] * out["tool_mask"]
        diff = torch.nan_to_num((out["old_per_token_logps"] - values) * mask, nan=0.0)
        mode = self.vllm_importance_sampling_mode
        ratio = torch.exp(diff.sum(dim=-1, keepdim=True) if mode.startswith("sequence") else diff)
        low = self.vllm_importance_sampling_clip_min
        high = self.vllm_importance_sampling_clip_max
        if mode.endswith("truncate"):
            ratio = torch.clamp(ratio, min=low, max=high)
        else:
            bad = (ratio < (low if low is not None else -torch.inf)) | (
                ratio > (high if high is not None else torch.inf))
            ratio = ratio.masked_fill(bad, 0.0)
        out["importance_sampling_ratio"] = ratio

    # ----- logging and the dump -----

    def _log_batch(self, episodes: Sequence[PlayedEpisode], keep: list[bool],
                   samples: list[Sample], mode: str) -> None:
        device = self.accelerator.device
        turns = [t for e, ok in zip(episodes, keep, strict=True) if ok for t in e.turns]
        local = torch.tensor([len(turns), sum(bool(t.error) for t in turns),
                              sum(t.cut for t in turns), sum(keep), len(episodes),
                              len(samples), sum(sum(s.mask) for s in samples),
                              max((len(s.prompt_ids) for s in samples), default=0)],
                             dtype=torch.float64, device=device)
        every = self.accelerator.gather(local.unsqueeze(0))
        n, errors, cut, kept, total, rows, sampled = every[:, :7].sum(dim=0).tolist()
        metrics = self._metrics[mode]
        metrics["env/format_error_rate"].append(errors / n if n else 0.0)
        metrics["stepwise/turns_per_episode"].append(n / kept if kept else 0.0)
        metrics["stepwise/samples"].append(rows)
        metrics["stepwise/excluded_episodes"].append(total - kept)
        metrics["stepwise/max_prompt_tokens"].append(every[:, 7].max().item())
        metrics["completions/mean_length"].append(sampled / rows if rows else 0.0)
        metrics["completions/clipped_ratio"].append(cut / n if n else 0.0)
        if mode == "train":
            self.state.num_input_tokens_seen += int(sum(len(s.prompt_ids) + len(s.completion_ids)
                                                        for s in samples))
        metrics["num_tokens"] = [self.state.num_input_tokens_seen]

    def _record(self, episodes: Sequence[PlayedEpisode], advantages: list[list[float]],
                keep: list[bool], packed: list[list[Sample]], weights: list[float],
                *, redrawn: bool = False) -> None:
        """Dump records (gathered to the main process) and print sample episodes.

        A turn's ``weight`` is that of the sample(s) its episode was trained as;
        ``redrawn``: the episodes were replaced by a redraw (never trained on).
        """
        if self.dump is None and not self.print_samples:
            return
        records: list[list[dict[str, Any]]] = []
        w = iter(weights)
        for episode, advs, ok, samples in zip(episodes, advantages, keep, packed, strict=True):
            weight = [next(w) for _ in samples][:1] or [0.0]
            records.append([_record(episode, turn, adv if ok else None, weight[0],
                                    self._tokenizer, self.state, redrawn)
                            for turn, adv in zip(episode.turns, advs, strict=True)])
        every = gather_object(records)
        if not self.accelerator.is_main_process:
            return
        groups = self.num_generations if self.model.training else self.num_generations_eval
        base = self.dump.episodes if self.dump is not None else 0
        for k, episode_records in enumerate(every):
            for record in episode_records:
                record["episode"], record["group"] = base + k, (base + k) // groups
        flat = [r for rs in every for r in rs]
        self.last_records = flat
        if self.dump is not None:
            self.dump.write(flat)
            self.dump.episodes += len(every)
        for episode_records in every[: self.print_samples]:
            print(format_episode(episode_records), flush=True)


def _nanstd(values: torch.Tensor) -> float:
    """Unbiased std of the non-NaN values (0.0 with fewer than two)."""
    kept = values[~torch.isnan(values)]
    return kept.std().item() if kept.numel() > 1 else 0.0


def _record(episode: PlayedEpisode, turn: TurnSample, advantage: float | None, weight: float,
            tokenizer: Any, state: Any, redrawn: bool = False) -> dict[str, Any]:
    return {
        "step": state.global_step, "episode": None, "group": None,
        "task_id": episode.start.task_id, "seed": episode.start.seed, "turn": turn.turn,
        "observation": turn.observation, "prefill": turn.prefill,
        "prompt": tokenizer.decode(turn.prompt_ids), "prompt_tokens": len(turn.prompt_ids),
        "completion": tokenizer.decode(turn.completion_ids),
        "completion_tokens": len(turn.completion_ids), "cut": turn.cut,
        "advantage": advantage, "weight": weight, "trained": advantage is not None,
        "redrawn": redrawn,
        "reward": turn.reward, "reward_parts": turn.reward_parts.to_dict(), "error": turn.error,
        "status": episode.attempt.status, "correct": episode.attempt.correct,
    }
