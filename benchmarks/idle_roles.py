"""What a process of each role costs with nothing to do: the fixed part of the provisioner's model
for a topology of separate processes (``feedmesh provision calibrate --idle``).

``feedmesh up`` starts one crawler, one filter, one reflector and one web process (with its own
NATS and PostgreSQL) and is given no feed and no subscription. After a warm-up, over a window:
each process's CPU seconds per second (``/proc/PID/stat``: process CPU time, not wall) and its
resident memory (median of 1 s samples). A process of the plan pays these whatever its share:
timers, the bus's heartbeats, the database pool, the interpreter and the libraries it loads.

    .venv/bin/python benchmarks/idle_roles.py [--window 60]

Last line: JSON ``roles`` -> ``{cpu_s_per_s, rss_mb}`` and the load average.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from feedmesh.procstat import cpu_seconds, rss_bytes
from hub import stop

ROLES = ("crawler", "filter", "reflector", "web")


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=float, default=60.0)
    parser.add_argument("--warmup", type=float, default=20.0)
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="feedmesh-idle-"))
    folder.chmod(0o711)  # as root, up's PostgreSQL runs as its own user, who must pass through
    up = None
    try:
        with open(folder / "up.log", "wb") as log:
            up = subprocess.Popen([sys.executable, "-m", "feedmesh", "up", "--data",
                                   str(folder / "up"), "--crawlers", "1", "--filters", "1",
                                   "--reflectors", "1", "--web", "1", "--port", "0",
                                   "--crawl-interval", "20", "--delivery", "article"],
                                  stdout=subprocess.DEVNULL, stderr=log)
            deadline = time.monotonic() + 300
            while not (folder / "up" / "up.json").exists():
                if up.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"feedmesh up did not start: "
                                       f"{(folder / 'up.log').read_text()[-2000:]}")
                time.sleep(0.5)
            listing = json.loads((folder / "up" / "up.json").read_text())
            pids = {p["role"]: p["pid"] for p in listing["processes"] if p["role"] in ROLES}
            time.sleep(args.warmup)
            load0 = loadavg()
            cpu0 = {role: cpu_seconds(pid) for role, pid in pids.items()}
            rss: dict[str, list[float]] = {role: [] for role in pids}
            started = time.monotonic()
            while time.monotonic() - started < args.window:
                for role, pid in pids.items():
                    rss[role].append((rss_bytes(pid) or 0) / 2**20)
                time.sleep(1.0)
            elapsed = time.monotonic() - started
            cpu1 = {role: cpu_seconds(pid) for role, pid in pids.items()}
            load1 = loadavg()
    finally:
        if up is not None:
            stop(up, 300)
        shutil.rmtree(folder, ignore_errors=True)
    roles = {role: {"cpu_s_per_s": round((cpu1[role] - cpu0[role]) / elapsed, 5),
                    "rss_mb": round(statistics.median(rss[role]), 1)} for role in pids}
    print(f"window {elapsed:.0f} s, load average {load0} -> {load1}")
    for role, figures in roles.items():
        print(f"  {role:10} CPU {figures['cpu_s_per_s'] * 100:5.2f}% of a core, "
              f"RSS {figures['rss_mb']:.0f} MB")
    print(json.dumps({"window_s": round(elapsed, 1), "loadavg": [load0, load1],
                      "roles": roles}))


if __name__ == "__main__":
    main()
