"""What a snapshot watcher remembers: per watched action, the last snapshot it reported and when."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


class Unset:
    """Nothing remembered yet (distinct from "remembered: the table had no snapshot")."""

    def __repr__(self) -> str:
        return "<unset>"


UNSET: Final = Unset()


@dataclass
class Watch:
    """What one reader of the table's snapshots was last told: the whole trigger, or one action of a
    per-table watcher (each action keeps its own remembered snapshot and throttle)."""

    action: str | None
    min_interval: float
    remembered: int | None | Unset = UNSET
    fired_at: float | None = None
    held_back: int | None = None

    def throttle_wait(self, now: float) -> float:
        if self.min_interval <= 0 or self.fired_at is None:
            return 0.0
        return max(0.0, self.fired_at + self.min_interval - now)
