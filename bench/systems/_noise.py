"""Noise of one timed window: other processes' CPU and steal, from /proc/stat.

Pure standard library (imported by the orchestrator and by every driver, in any venv).
``Window.end(ours)`` takes the CPU seconds our own processes used in the window (the
server's from INFO cpu, the client's from rusage) and returns, as fractions of the whole
machine over the window (2 cores = 1.0): ``others`` (busy time that was not ours) and
``steal`` (time the hypervisor gave to other guests). /proc/stat counts in clock ticks
(USER_HZ, 10 ms), so a window shorter than ~1 s reads coarse; the figures are clamped at 0.
"""

from __future__ import annotations

import os
import time
from typing import Any

TICK = 1.0 / os.sysconf("SC_CLK_TCK")
# A row is noisy when others used more than 5 % of the machine or steal took more than 5 %.
NOISY_OTHERS, NOISY_STEAL = 0.05, 0.05


def _stat() -> tuple[float, float]:
    """(busy seconds excluding steal, steal seconds), all CPUs."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq) * TICK, steal * TICK


class Window:
    def __init__(self) -> None:
        self.busy0, self.steal0 = _stat()
        self.t0 = time.perf_counter()

    def end(self, ours: float) -> dict[str, Any]:
        busy1, steal1 = _stat()
        wall = max(time.perf_counter() - self.t0, 1e-9)
        capacity = wall * (os.cpu_count() or 1)
        others = max(0.0, (busy1 - self.busy0) - ours) / capacity
        steal = max(0.0, steal1 - self.steal0) / capacity
        return {"others": round(others, 4), "steal": round(steal, 4), "window_s": round(wall, 3),
                "noisy": others > NOISY_OTHERS or steal > NOISY_STEAL}
