"""What a person sees while a run works: a progress bar on a terminal, one line per step elsewhere."""

from __future__ import annotations

import time
from typing import Any

from coevolve_sdk.run.metrics import metric

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TextColumn, TimeElapsedColumn, TimeRemainingColumn


def step_line(step: int, metrics: dict[str, float]) -> str:
    """The per-step summary: reward, signals per kind, pool by origin, time per phase."""
    sig = " ".join(f"{k.split('/', 1)[1]}={int(v)}" for k, v in sorted(metrics.items()) if k.startswith("signals/"))
    pool = " ".join(f"{k.split('/', 1)[1]}={int(v)}" for k, v in sorted(metrics.items()) if k.startswith("pool/") and k != "pool/size")
    times = " ".join(f"{k.split('/', 1)[1]}={v:.1f}s" for k, v in metrics.items() if k.startswith("time/") and v >= 0.05)
    return (
        f"step {step:>4}  reward {metric(metrics, 'rollout/reward_mean'):.3f}  success {metric(metrics, 'rollout/success_rate'):.2f}"
        f"  | signals {sig or '-'}  | pool {int(metrics.get('pool/size', 0))} ({pool})  | {times}"
    )


class Progress:
    def __init__(self, enabled: bool = True, console: Console | None = None, quiet: bool = False) -> None:
        self.console = console or Console(stderr=False, highlight=False, soft_wrap=True)
        self.enabled = enabled
        self.quiet = quiet
        self._bar: RichProgress | None = None
        self._task: Any = None
        self._work: dict[str, Any] = {}
        self._t0 = time.perf_counter()

    def start(self, total: int, completed: int = 0, description: str = "") -> None:
        if not self.enabled:
            return
        if self.console.is_terminal and not self.quiet:
            if self._bar is not None:
                self._task = self._bar.add_task(description, total=total, completed=completed)
                return
            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=False,
            )
            self._bar.start()
            self._task = self._bar.add_task(description, total=total, completed=completed)

    def ensure_bar(self) -> None:
        """A bar for work before training starts (seed pool, warm start)."""
        if self.enabled and not self.quiet and self._bar is None and self.console.is_terminal:
            self._bar = RichProgress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TimeElapsedColumn(), TimeRemainingColumn(), console=self.console, transient=False,
            )
            self._bar.start()

    def step(self, step: int, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        if not self.quiet:
            self.console.print(step_line(step, metrics), markup=False)
        if self._bar is not None:
            self._bar.update(self._task, completed=step)

    def work(self, what: str, done: int, total: int) -> None:
        """Progress of a long piece of work inside a phase (RunContext.progress)."""
        if not self.enabled or self.quiet or total <= 0:
            return
        if self._bar is not None:
            task = self._work.get(what)
            if task is None:
                task = self._work[what] = self._bar.add_task(what, total=total)
            self._bar.update(task, completed=done, visible=done < total)
            return
        quarter = max(1, total // 4)
        if done == total or (done % quarter == 0 and done > 0):
            self.log(f"{what}: {done}/{total}")

    def warn(self, message: str) -> None:
        """Something a person must see even with --quiet (a disk about to fill)."""
        if self.enabled:
            self.console.print(f"[{time.perf_counter() - self._t0:7.1f}s] {message}", markup=False)

    def log(self, message: str) -> None:
        if self.enabled and not self.quiet:
            self.console.print(f"[{time.perf_counter() - self._t0:7.1f}s] {message}", markup=False)

    def stop(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
