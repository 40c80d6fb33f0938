"""The load model of ``scheduler_load.py`` (and its tables): per hour, the DAG runs and task instances of the
planned shape (one DAG per (policy, action), ADR 0004) and of one DAG per (table, action), from the plans and
schedules that ``scheduler_load.py`` reads off the project's code.

**Time-based runs** come from the built DAGs' timetables. A planned run without events maps the plan's batches
(at most ``[core] max_map_length``): ``1 + max(batches, 1)`` task instances (``plan``, and ``run_batch`` per
map index, or once skipped with none), ``1 + batches`` task starts.

**Event runs of a planned DAG** are simulated (:func:`simulate`), one DAG at a time, as Airflow 3.3's scheduler
makes them (``DagModel.dags_needing_dagruns``, ``SchedulerJobRunner._create_dag_runs_asset_triggered``,
``AssetManager._queue_dagruns``):

* every event on the policy's asset writes the DAG's queue row (``asset_dag_run_queue``, one per (asset, DAG),
  insert on conflict do nothing) unless one is there; every planned DAG of the policy's event-driven actions is
  scheduled on that one asset, so each gets every event, also those for other actions (an event names the
  actions its table's watcher found due; a run whose events name none of its action plans nothing);
* at each scheduler loop (``loop_s``) a DAG with a queue row and fewer than ``max_active_runs`` queued or running
  runs gets one run: ``run_after`` = the row's ``created_at``, the events in (the previous run's ``run_after``,
  ``run_after``]; the row is deleted. The run stays active a uniform draw between half and 1.5 times ``run_s``
  (a fixed duration would keep the runs in step: all ``max_active_runs`` ending at once, then none for a run);
* the run's ``plan`` task, ``read_s`` after the run's creation, also reads the events after its ``run_after``
  that no run of its DAG consumed by then (``dag_factory/plan_events.py``) and plans the tables of all of
  them for its action (``services/plan_runs.py``: only those tables, not the policy's others): it measures up to
  ``[tablemgmt] plan_measure_budget`` of them (each pays with the plan's share of the fleet) and runs the rest
  unmeasured (their health gate decides). An event may so be planned by two runs.

Events are a Poisson stream, one table each (two events of one table within a run are rare at 100,000 tables).
Runs active at once come from the simulation; a run's duration does not (``run_s`` is the model's input).
"""

from __future__ import annotations

import bisect
import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

MAX_MAP = 1024  # Airflow's default [core] max_map_length
BATCH = 50  # [tablemgmt] plan_batch_size's default
BUDGET = 200  # [tablemgmt] plan_measure_budget's default


@dataclass(frozen=True)
class EventModel:
    max_active_runs: int
    run_s: float = 60.0  # a planned event run, creation to end (the mean)
    loop_s: float = 1.0  # a scheduler loop ([scheduler] scheduler_idle_sleep_time's default when idle)
    read_s: float = 3.0  # a run's creation to its plan task's read of the late events (at most run_s / 2)
    hours: float = 6.0  # simulated, after a warm-up
    seed: int = 40
    regular: bool = False  # events evenly spaced (scheduler_check.py's injection) instead of a Poisson stream


@dataclass
class EventRuns:
    """One planned DAG's event runs: per hour, and per run (means)."""

    runs_h: float
    tis_h: float
    starts_h: float
    planned_h: float  # tables planned per hour (an event planned by two runs counts twice)
    events_per_run: float  # the events Airflow gave a run (any action)
    planned_per_run: float  # tables a run's plan planned for its action (its events and the late ones)
    late_per_run: float  # of which read late (after its run_after, in no run yet)
    active: float  # runs active at once, mean over time
    wait_p50: float  # an event for the action -> the first plan that has it (s)
    wait_p95: float


def simulate(asset_h: float, own: float, share: float, m: EventModel) -> EventRuns:
    """One planned DAG's event runs: ``asset_h`` events an hour on the policy's asset, a share ``own`` of them
    for this DAG's action, a share ``share`` of its planned tables paying (see the module docstring)."""
    rng = random.Random(f"{m.seed}:{m.max_active_runs}:{asset_h}:{own}:{share}")
    rate = asset_h / 3600
    warm = max(600.0, 5 * m.run_s)
    span = min(
        max(m.hours * 3600, 40 * m.run_s), 200_000 / max(rate, 1e-9)
    )  # 40 run lengths at least; ~200,000 events at most
    end = warm + span
    times: list[float] = []
    t = rng.expovariate(rate)
    while t < end:
        times.append(t)
        t += 1 / rate if m.regular else rng.expovariate(rate)
    mine = [rng.random() < own for _ in times]
    pays = [rng.random() < share for _ in times]
    read_s = min(m.read_s, m.run_s / 2)
    lasts = 1.5 * m.run_s  # the longest run
    # Airflow's scheduler, one loop every loop_s: (created, run_after, first event index, end event index, end)
    runs: list[tuple[float, float, int, int, float]] = []
    active: list[float] = []
    row: float | None = None
    last_idx, i, k = 0, 0, 1
    while (tick := k * m.loop_s) <= end:
        k += 1
        while i < len(times) and times[i] <= tick:
            if row is None:
                row = times[i]  # the first event writes the queue row; later ones find it there
            i += 1
        active = [e for e in active if e > tick]
        if row is not None and len(active) < m.max_active_runs:
            hi = bisect.bisect_right(times, row)
            done = tick + rng.uniform(0.5, 1.5) * m.run_s
            runs.append((tick, row, last_idx, hi, done))
            last_idx, row = hi, None
            active.append(done)
    created = [r[0] for r in runs]
    planned_at = [math.inf] * len(times)
    counted = [r for r in runs if warm <= r[0] < end - lasts]
    tis = starts = planned = events = late_n = 0.0
    for c, after, lo, hi, _ in runs:
        read = c + read_s
        newest = runs[bisect.bisect_right(created, read) - 1][1]  # the latest run created by the read
        late_lo, late_hi = bisect.bisect_right(times, max(after, newest)), bisect.bisect_right(times, read)
        named = [j for j in range(lo, hi) if mine[j]] + [j for j in range(late_lo, late_hi) if mine[j]]
        for j in named:
            planned_at[j] = min(planned_at[j], read)
        if warm <= c < end - lasts:
            paying = sum(pays[j] for j in named[:BUDGET]) + max(len(named) - BUDGET, 0)
            batches = min(math.ceil(paying / BATCH), MAX_MAP)
            tis, starts = tis + 1 + max(batches, 1), starts + 1 + batches
            planned, events = planned + len(named), events + hi - lo
            late_n += sum(mine[j] for j in range(late_lo, late_hi))
    waits = sorted(
        planned_at[j] - times[j] for j in range(len(times)) if mine[j] and warm <= times[j] < end - 2 * lasts
    )
    hours = (end - lasts - warm) / 3600
    n = len(counted) or 1
    busy = sum(min(e, end) - max(c, warm) for c, *_, e in runs if e > warm) / (end - warm)

    def pct(q: float) -> float:
        return waits[min(len(waits) - 1, int(q * len(waits)))] if waits else math.nan

    return EventRuns(
        runs_h=len(counted) / hours,
        tis_h=tis / hours,
        starts_h=starts / hours,
        planned_h=planned / hours,
        events_per_run=events / n,
        planned_per_run=planned / n,
        late_per_run=late_n / n,
        active=busy,
        wait_p50=statistics.median(waits) if waits else math.nan,
        wait_p95=pct(0.95),
    )


def per_table_events_h(commits: float, spacing_h: float) -> float:
    """A table's events an hour for one action: a commit's, at most one per the action's interval."""
    return min(commits / 24, 1 / spacing_h)


def load(
    n: int, plan: dict[str, dict[str, Any]], per_table: dict, policy_dags: dict, commits: float, m: EventModel
) -> tuple[list[tuple[str, str, int, float, float, float]], dict[str, EventRuns]]:
    """Per action and shape: (shape, action, DAGs, runs/h, task instances/h, task starts/h); and the planned
    DAGs' event runs per action."""
    rows = []
    for action, d in per_table.items():
        runs = n * d["per_day"] / 24
        if d["events"] and commits:
            runs += n * per_table_events_h(commits, d["spacing_h"])  # one run per event
        ti = runs * len(d["tasks"])
        rows.append(("per (table, action)", action, n, runs, ti, ti))
    evented = {a: d for a, d in policy_dags.items() if a != "discovery" and d["events"]}
    # One watcher a table, one event per commit naming the actions due (each at most once per its interval).
    per_h = {a: per_table_events_h(commits, d["spacing_h"]) for a, d in evented.items()}
    asset_h = n * max(per_h.values(), default=0)
    simulated: dict[str, EventRuns] = {}
    for action, d in policy_dags.items():
        if action == "discovery":
            runs = d["per_day"] / 24
            rows.append(("planned", "discovery", 1, runs, runs, runs))
            continue
        p = plan[action]
        batches = min(p["batches"], MAX_MAP)
        runs = d["per_day"] / 24
        ti, starts = runs * (1 + max(batches, 1)), runs * (1 + batches)
        if action in evented and commits:
            enabled = p["pays"] + p["measure"] + p["idle"]
            ev = simulate(asset_h, n * per_h[action] / asset_h, p["pays"] / enabled if enabled else 0, m)
            simulated[action] = ev
            runs, ti, starts = runs + ev.runs_h, ti + ev.tis_h, starts + ev.starts_h
        rows.append(("planned", action, 1, runs, ti, starts))
    return rows, simulated


def print_rows(n: int, label: str, rows: list) -> dict[str, list[float]]:
    """The per-action table of one setting; the totals per shape (DAGs, runs, task instances, starts)."""
    print(f"\nPer hour at {n:,} tables x 7 actions, {label}:\n")
    print("| shape | action | DAGs | DAG runs / h | task instances / h | task starts / h |")
    print("|---|---|---:|---:|---:|---:|")
    totals: dict[str, list[float]] = {}
    for shape, action, dags, runs, ti, starts in rows:
        print(f"| {shape} | {action} | {dags:,} | {runs:,.2f} | {ti:,.2f} | {starts:,.2f} |")
        acc = totals.setdefault(shape, [0, 0, 0, 0])
        for k, v in enumerate((dags, runs, ti, starts)):
            acc[k] += v
    for shape, (dags, runs, ti, starts) in totals.items():
        print(
            f"| **{shape}, total** | | **{dags:,.0f}** | **{runs:,.1f}** | **{ti:,.1f}** | **{starts:,.1f}** |"
        )
    per, planned = totals["per (table, action)"], totals["planned"]
    print(
        f"\nper-table / planned: DAG runs {per[1] / planned[1]:,.0f}x, task instances {per[2] / planned[2]:,.0f}x"
    )
    return totals


def print_events(mar: int, events: dict[str, EventRuns]) -> None:
    """The simulated event runs of each event-driven planned DAG at ``mar``."""
    print(f"\nThe planned DAGs' event runs at max_active_runs {mar} (simulated, scheduler_model.py):\n")
    print(
        "| action | event runs / h | runs active (mean) | events per run | tables planned per run (late) "
        "| tables planned / h | task instances per run | event -> planned p50 / p95 (s) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for action, e in events.items():
        print(
            f"| {action} | {e.runs_h:,.1f} | {e.active:.1f} | {e.events_per_run:.1f} "
            f"| {e.planned_per_run:.1f} ({e.late_per_run:.1f}) | {e.planned_h:,.0f} "
            f"| {e.tis_h / e.runs_h if e.runs_h else 0:.2f} | {e.wait_p50:.1f} / {e.wait_p95:.1f} |"
        )
