"""GRPO's warm start: behaviour cloning on the seed tasks' reference actions before RL, with an
automatic length (stop when the held-aside conversations stop improving). A part of the GRPO
class (``WarmStart`` is one of its bases), kept apart because it is its own job: supervised
training, its own batching and its own stopping rule."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from coevolve_sdk import (
    Task,
)

from .options import AUTO_MEASURE, WarmStartOptions
from .packing import Example, micro_batches, sample_batches

__all__ = ["WarmStart"]

#: How the warm start's loss reaches the output layer (part of its cache key, with the stopping
#: rule): "agent-rows" applies the output layer to the scored positions only.
SFT_LOSS_ROWS = "agent-rows-v1"


class WarmStart:
    """The warm-start methods of ``GRPO`` (they use its policy, model, optimiser and processes)."""

    def warm_start_examples(self, tasks: list[Task]) -> list[tuple[list[int], list[int]]]:
        """Replay each task's reference actions in a fresh environment and tokenise the
        conversation, the actions as assistant turns: ``(token_ids, loss_mask)`` per task."""
        policy = self.policy
        examples: list[tuple[list[int], list[int]]] = []
        for task in tasks:
            if not task.reference_actions:
                continue
            env = self.context.new_env()
            try:
                _, info = env.reset(seed=self.context.seed, options={"task": task})
                ids = list(policy.encode_prompt(info["messages"], info["tools"]))
                mask = [0] * len(ids)
                for a_i, action in enumerate(task.reference_actions):
                    comp = policy.encode_completion(action)
                    ids += comp
                    mask += [1] * len(comp)
                    _, _, terminated, truncated, info = env.step(action)
                    if terminated or truncated or a_i == len(task.reference_actions) - 1:
                        break
                    follow = policy.encode_followup(info.get("messages", []))
                    ids += follow
                    mask += [0] * len(follow)
            finally:
                try:
                    env.close()
                except Exception:
                    pass
            if len(ids) > policy.max_context:
                continue
            examples.append((ids, mask))
        return examples

    def warm_start(self, tasks: list[Task]) -> dict[str, float]:
        """Supervised fine-tuning on the seed tasks' reference actions (loss on agent tokens,
        token mean per batch).

        Runs in this process alone, on the bare model, with its own AdamW (the GRPO optimiser
        state is untouched), so it works whether the loop calls it on the main process only
        (as the core loop does) or on every process. In a multi-process run the other processes
        receive the main process's result at the next ``broadcast`` or ``step`` (see ``_sync_once``).
        """

        ws = self.options.warm_start  # type: ignore[attr-defined]
        if ws.steps == 0:
            return {"warm_start_steps": 0.0}
        examples = self.warm_start_examples(tasks)
        if not examples:
            raise ValueError("warm start: none of the tasks has reference actions that fit the context")
        # The full-weight module: shared with the trained model (one process, DDP, ZeRO-2) or, under
        # FSDP, the decoding copy, which reaches the shards at the next sync.
        self.policy.before_update()
        module = self.policy.module
        if ws.cache and self._processes.world_size == 1:
            from .warm_cache import cache_lock, load_entry, save_entry, warm_start_key

            root = Path(ws.cache)
            settings = ws.model_dump(exclude={"cache"})
            settings["loss_rows"] = SFT_LOSS_ROWS  # how the loss is computed is code too: a new way is a new entry
            if ws.steps == "auto":
                settings["auto_measure"] = AUTO_MEASURE  # the stopping rule is code: a new rule is a new entry
            key = warm_start_key(module, examples, settings, self.context.seed)
            with cache_lock(root, key):
                cached = load_entry(root, key, module)
                if cached is None:
                    metrics = self._warm_start_steps(module, examples)
                    save_entry(root, key, module, metrics)
                    return metrics
            self.context.log(f"warm start: reusing the identical warm start cached in {root / key}")
            self._after_warm_start()
            return {**cached, "warm_start_cached": 1.0}
        return self._warm_start_steps(module, examples)

    def _warm_start_steps(self, module: Any, examples: list[Example]) -> dict[str, float]:
        import torch

        ws: WarmStartOptions = self.options.warm_start  # type: ignore[attr-defined]
        auto = ws.steps == "auto"
        held: list[Example] = []
        train = examples
        if auto:
            train, held = _hold_aside(examples, ws.auto.holdout, self.context.seed)
        total = ws.auto.max_steps if auto else int(ws.steps)
        params = [p for p in module.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=ws.lr, weight_decay=0.0)
        losses: list[float] = []
        t0 = time.perf_counter()
        module.train()
        tokens = 0.0
        processed = 0.0
        best, best_step, best_conv, best_state, since_best, done = -1.0, 0, 0.0, None, 0, 0
        checks: list[float] = []
        for step_i, idx in enumerate(sample_batches(len(train), total, ws.batch_size, self.context.seed + 17)):
            if self._processes.is_main_process:
                self.context.progress("warm start", step_i, total)
            loss, n_tok, n_in = self.sft_backward(module, [train[i] for i in idx])
            if ws.max_grad_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, ws.max_grad_norm)
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss)
            tokens += n_tok
            processed += n_in
            done = step_i + 1
            if auto and (done % ws.auto.check_every == 0 or done == total):
                conv_share, share = self.reproduced(module, held)
                checks.append(share)
                module.train()
                if share > best:
                    best, best_step, best_conv, since_best = share, done, conv_share, 0
                    best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
                else:
                    since_best += 1
                if self._processes.is_main_process:
                    self.context.log(f"warm start: step {done}, held-aside turns reproduced {share:.3f}, whole conversations "
                                     f"{conv_share:.3f} (best turns {best:.3f} at step {best_step})")
                # a share still at zero is no plateau: the model has not reached the level where it is measured
                if done >= ws.auto.min_steps and best > 0 and (since_best >= ws.auto.patience or share >= 1.0):
                    break
        if auto and best_state is not None and best_step != done:
            module.load_state_dict(best_state)
        if self._processes.is_main_process:
            self.context.progress("warm start", total, total)
        self._after_warm_start()
        elapsed = time.perf_counter() - t0
        head = losses[: max(1, len(losses) // 10)]
        tail = losses[-max(1, len(losses) // 10) :]
        out = {
            "warm_start_steps": float(best_step if auto else done),
            "warm_start_examples": float(len(train)),
            "warm_start_loss_first": sum(head) / len(head),
            "warm_start_loss_last": sum(tail) / len(tail),
            "warm_start_tokens": tokens,
            "warm_start_input_tokens": processed,
            "warm_start_seconds": elapsed,
            "warm_start_tokens_per_s": processed / elapsed if elapsed > 0 else 0.0,
        }
        if auto:
            out |= {"warm_start_steps_run": float(done), "warm_start_held_aside": float(len(held)),
                    "warm_start_held_aside_turns": best, "warm_start_held_aside_match": best_conv,
                    "warm_start_checks": float(len(checks))}
        return out

    def exact_match(self, module: Any, examples: list[Example]) -> float:
        """The share of ``examples`` whose every agent token is the model's most likely token
        given the conversation before it (teacher forcing). For a conversation replayed from
        reference actions this is whether a greedy rollout would repeat the reference: the
        observations between the agent's turns are the same as long as its actions are."""
        return self.reproduced(module, examples)[0]

    def reproduced(self, module: Any, examples: list[Example]) -> tuple[float, float]:
        """(share of conversations, share of agent turns) that greedy decoding reproduces
        exactly under teacher forcing. The turn share moves before whole conversations do, so
        the automatic warm start watches it; the conversation share is what it reports."""
        import torch

        if not examples:
            return 0.0, 0.0
        module.eval()
        dev = self.accelerator.device
        pad = self.policy.pad_token_id
        convs = turns = turns_ok = 0
        with torch.no_grad():
            for mb in micro_batches(examples, "buckets", self.options.warm_start.micro_batch_tokens):  # type: ignore[attr-defined]
                width = max(len(r) for r in mb.ids)
                ids = torch.full((len(mb.ids), width), pad, dtype=torch.long)
                for r, row in enumerate(mb.ids):
                    ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
                ids = ids.to(dev)
                with self.accelerator.autocast():
                    logits = module(input_ids=ids, use_cache=False).logits
                guess = logits[:, :-1, :].argmax(-1).cpu()
                for r, (row, m) in enumerate(zip(mb.ids, mb.mask)):
                    ok = (guess[r, : len(row) - 1] == torch.tensor(row[1:], dtype=torch.long)).tolist()
                    all_ok = True
                    t = 1
                    while t < len(row):  # agent turns: the runs of 1s in the mask (position 0 has no prediction)
                        if not m[t]:
                            t += 1
                            continue
                        u = t
                        while u < len(row) and m[u]:
                            u += 1
                        hit = all(ok[t - 1 : u - 1])
                        turns += 1
                        turns_ok += int(hit)
                        all_ok &= hit
                        t = u
                    convs += int(all_ok)
        return convs / len(examples), turns_ok / max(turns, 1)

    def _after_warm_start(self) -> None:
        ws = self.options.warm_start  # type: ignore[attr-defined]
        self.counters.warm_started = True
        reset = self.options.beta > 0 and ws.reset_reference  # type: ignore[attr-defined]
        if reset:
            self._snapshot_reference()
        self._dirty = "reset_reference" if reset else True

    def sft_backward(self, module: Any, batch: list[Example]) -> tuple[float, float, float]:
        """Forward and backward of the warm start's loss on one batch of conversations, laid out
        as ``warm_start.layout`` says: the token mean of ``-log p`` over the agent tokens (each
        conversation's first token excluded, as in the GRPO update), whatever the layout.

        Leaves the gradients in ``module``'s parameters; returns (loss, agent tokens, real
        tokens forwarded)."""
        import torch

        ws = self.options.warm_start  # type: ignore[attr-defined]
        n_tok = float(sum(sum(m[1:]) for _, m in batch))
        dev = self.accelerator.device
        pad = self.policy.pad_token_id
        loss_sum = 0.0
        for mb in micro_batches(batch, ws.layout, ws.micro_batch_tokens):
            width = max(len(r) for r in mb.ids)
            ids = torch.full((len(mb.ids), width), pad, dtype=torch.long)
            mask = torch.zeros((len(mb.ids), width), dtype=torch.float32)
            for r, (row, m) in enumerate(zip(mb.ids, mb.mask)):
                ids[r, : len(row)] = torch.tensor(row, dtype=torch.long)
                mask[r, : len(row)] = torch.tensor(m, dtype=torch.float32)
            nz = torch.nonzero(mask.sum(0))
            first = max(1, min(int(nz[0]) if len(nz) else width - 1, width - 1))
            positions = torch.tensor(mb.positions, dtype=torch.long, device=dev) if mb.positions is not None else None
            ids, mask = ids.to(dev), mask.to(dev)
            with self.accelerator.autocast():
                lp = self._logprobs(module, ids, None, first, positions, mask=mask)
            loss = -(lp * mask).sum() / max(n_tok, 1.0)
            loss.backward()
            loss_sum += float(loss.detach())
        return loss_sum, n_tok, float(sum(len(i) for i, _ in batch))


def _hold_aside(examples: list[Example], share: float, seed: int) -> tuple[list[Example], list[Example]]:
    """Split the warm start's conversations into (trained on, held aside), by a draw that
    follows the run's seed. At least one conversation on each side when there are two or more."""
    import random

    order = list(range(len(examples)))
    random.Random(seed * 1_000_003 + 29).shuffle(order)
    n_held = min(max(1, round(share * len(examples))), len(examples) - 1) if len(examples) > 1 else 0
    held = sorted(order[:n_held])
    keep = sorted(order[n_held:])
    return [examples[i] for i in keep] or list(examples), [examples[i] for i in held]
