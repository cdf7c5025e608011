"""Issue 19 (1e): the random-exploration arm keeps exploring (bounded) until it has validated as
many tasks as the admission cap, or its round record says why it stopped short, so that arms
compare at equal admitted-task counts as far as possible."""

from __future__ import annotations

from pathlib import Path

from .scheduler_kit import random_scheduler


def _round(tmp_path: Path, name: str, **evolution: object) -> dict:
    # one candidate per start at most: two starts cannot reach a cap of 6
    sched, store = random_scheduler(tmp_path / f"{name}.sqlite", steps=10, seed_tasks=40, every=5, random_starts=2, **evolution)
    sched.offer([], [], 5)
    sched.poll(5)
    (rd,) = store.rounds()
    return rd


def test_the_random_arm_explores_further_starts_until_it_reaches_the_admission_cap(tmp_path: Path) -> None:
    rd = _round(tmp_path, "far", max_admitted_per_round=6, random_max_starts=40)
    assert rd["accepted"] == 6 and rd["admission_cap_reached"] is True and rd["short_of_cap"] is None, rd
    assert 6 <= rd["starts_explored"] < 40 and rd["starts_explored"] % 2 == 0  # whole batches of random_starts
    assert rd["signals_used"] == rd["starts_explored"] == rd["by_kind"]["random"]


def test_a_random_round_stopped_by_its_bound_says_so(tmp_path: Path) -> None:
    rd = _round(tmp_path, "bounded", max_admitted_per_round=6, random_max_starts=4)
    assert rd["starts_explored"] == 4 and rd["accepted"] < 6
    assert rd["admission_cap_reached"] is False and "random_max_starts" in rd["short_of_cap"], rd


def test_without_a_cap_the_random_arm_explores_its_random_starts_once(tmp_path: Path) -> None:
    rd = _round(tmp_path, "uncapped")
    assert rd["starts_explored"] == 2 and rd["admission_cap_reached"] is None
