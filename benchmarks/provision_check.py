"""The provisioner's plan against reality (issue 15, section 2): plan a small topology, launch it
with ``feedmesh up --topology``, drive it with the farm at the planned load, and compare every
process's predicted CPU, memory and bandwidth with what it measured.

1. The model compared is the one of separate processes (the shipped ``processes`` model,
   ``src/feedmesh/provision/processes_model.json``: ``feedmesh provision calibrate`` with
   ``--idle`` and ``--distributed``, from benchmark outputs kept in ``tests/provision/data/``);
   the default model (``hub``, one process) is shown beside it as the baseline. Each gets this run's
   workload: a crawl every ``--interval`` seconds (the farm runs 900 / interval times faster than
   real time, so one crawl spans Cobra's 15 farm minutes, as in ``crawl_bandwidth.py`` that measured
   the per-crawl figures), and readers polling every subscription every ``subs / --polls-per-s``
   seconds. Nothing in the model is fitted to this run.
2. ``feedmesh provision --json`` plans it for the node limits given (scaled down to this machine);
   the baseline model predicts the loads of the same topology (its own plan may differ).
3. The subscriptions (``hub.py``'s, Cobra-style queries) go into a PostgreSQL started here;
   ``feedmesh up --topology PLAN --store URL --delivery article`` starts NATS, the crawlers,
   filters and reflectors (and one web process, the readers' front), crawling a farm process.
4. Once every crawler has done three cycles (the first fetches everything; readers poll from
   the second) and the start-up backlog on the bus has drained, a window of whole crawl
   intervals: each process's CPU seconds per second (``/proc/PID/stat``: process CPU time, not
   wall), resident memory (median of 1 s samples of RSS; PSS and USS at the end, for reference),
   bytes in and out (the processes' own counters: crawler ``feedmesh_tier_bytes_{in,out}``
   {tier=crawler}, filter {tier=filter}, reflector in {tier=reflector}). A reflector's out is
   what its readers' polls cost: the private feeds answered 200 with gzip on the wire, headers
   included, counted by the polling readers per owning reflector (in this topology the web
   process renders and sends them; the reflector's own answers to it, ``{tier=reflector}``
   out, are shown beside); likewise its CPU is the reflector process's plus the web process's
   share by the polls it answered (Cobra's reflector serves its readers itself).
5. What a private feed holds is the run's state, not the model's output: the plan is for full
   feeds (k entries each, the steady state), but a hub minutes old holds far fewer (Cobra-style
   queries match 1.45% of articles on average, most of them much less). The predictions compared
   are the model's for the topology launched with the workload's ``held_per_answer`` set to the
   (subscription, entry) pairs the reflectors hold per subscription (the mean of the window's
   start and end), as they take the readers' poll rate: answers and held rows are priced per
   entry held.

Memory is compared as RSS: the plan puts every service on a node of its own, where it shares its
pages with no one, so all its resident pages are its own. PSS would divide the libraries' pages
among the several Python processes this one machine runs, a saving no node of the plan has.

    .venv/bin/python benchmarks/provision_check.py [--quick] [--feeds N --subs N --interval S]

Prints the table predicted vs measured per service and resource, and as last line one JSON
object: ``max_abs_error_pct``, ``median_abs_error_pct``, ``within_25pct`` (the share of
predictions within 25% of the measurement), ``baseline`` (the same three for the shipped model),
``services`` (per service and resource: predicted, measured, error), ``saturated``
(services that did not keep up while the plan says they fit), the load average.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import aiohttp
import msgspec
from topology import provision, wait_for

from feedmesh.compose import private_feed_key
from feedmesh.farm import FarmConfig, FarmProcess
from feedmesh.hub.front.tokens import FeedTokens
from feedmesh.procstat import cpu_seconds, rss_bytes
from feedmesh.provision import NodeLimits, Targets, Topology, decode_model, predict
from feedmesh.provision import plan as make_plan
from feedmesh.provision.cli import load_model
from feedmesh.provision.model import ResourceModel, Workload, encode_model
from feedmesh.store.pg_server import LocalPostgres
from hub import ORIGIN, _get, _metrics, stop

PYTHON = [sys.executable, "-m", "feedmesh"]
CRAWL_FARM_S = 900.0  # one crawl spans Cobra's 15 farm minutes, as in crawl_bandwidth.py
RESOURCES = ("cpu", "memory", "in", "out")
PROCESSES_MODEL = Path("processes")  # the shipped model of separate processes
UNITS = {"cpu": "core", "memory": "MB", "in": "KB/s", "out": "KB/s"}


def memory_figures(pid: int) -> dict[str, float]:
    """RSS, PSS and USS (private pages) in MB, from /proc/PID/smaps_rollup."""
    figures = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                name, _, rest = line.partition(":")
                kb = rest.split()[0] if rest.split() else "0"
                if name == "Rss":
                    figures["rss"] = int(kb) / 1024
                elif name == "Pss":
                    figures["pss"] = int(kb) / 1024
                elif name in ("Private_Clean", "Private_Dirty"):
                    figures["uss"] += int(kb) / 1024
    except OSError:
        pass
    return figures


def loadavg() -> list[float]:
    with open("/proc/loadavg") as f:
        return [float(x) for x in f.read().split()[:3]]


class Poller:
    """Readers polling their private feeds through the web process at a steady rate, gzip, no
    validators (the model assumes every poll finds news): wire bytes per owning reflector."""

    def __init__(self, web: str, tokens: FeedTokens, subs: int, reflectors: int,
                 per_s: float) -> None:
        self.web, self.tokens, self.subs, self.reflectors = web, tokens, subs, reflectors
        self.per_s = per_s
        self.bytes = [0] * reflectors
        self.answers = [0] * reflectors
        self.items: list[int] = []  # items in each feed answered 200 (what an answer holds)
        self.statuses: dict[int, int] = {}
        self.stopped = threading.Event()
        self.thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self) -> Poller:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        self.thread.join(30)

    async def _run(self) -> None:
        async with aiohttp.ClientSession(auto_decompress=False) as session:
            sub, started, sent = 0, time.monotonic(), 0
            pending: set[asyncio.Task] = set()
            while not self.stopped.is_set():
                due = int((time.monotonic() - started) * self.per_s)
                while sent < due:
                    sub = sub % self.subs + 1
                    pending.add(asyncio.create_task(self._poll(session, sub)))
                    sent += 1
                pending = {t for t in pending if not t.done()}
                await asyncio.sleep(0.02)
            await asyncio.gather(*pending, return_exceptions=True)

    async def _poll(self, session: aiohttp.ClientSession, sub_id: int) -> None:
        url = f"{self.web}/f/{self.tokens.make(sub_id, 0)}.rss"
        try:
            async with session.get(url, headers={"Accept-Encoding": "gzip"}) as answer:
                body = await answer.read()
                self.statuses[answer.status] = self.statuses.get(answer.status, 0) + 1
                if answer.status == 200:  # provision() gives sub n (from 1) reflector (n-1) % R
                    self.bytes[(sub_id - 1) % self.reflectors] += len(body) + sum(
                        len(k) + len(v) + 4 for k, v in answer.raw_headers)
                    self.answers[(sub_id - 1) % self.reflectors] += 1
                    with contextlib.suppress(zlib.error):
                        self.items.append(zlib.decompress(body, 47).count(b"<item>"))
        except (aiohttp.ClientError, OSError, TimeoutError):
            self.statuses[0] = self.statuses.get(0, 0) + 1


def plan_for(args: argparse.Namespace, folder: Path, model_file: Path | None,
             name: str) -> tuple[dict, Path]:
    base = load_model(model_file)
    workload = Workload(crawl_interval_s=args.interval,
                        poll_interval_s=args.subs / args.polls_per_s,
                        held_per_subscription=base.workload.held_per_subscription)
    model = msgspec.structs.replace(base, workload=workload, source={
        **base.source, "workload": f"benchmarks/provision_check.py: a crawl every "
        f"{args.interval:g} s of a farm x{CRAWL_FARM_S / args.interval:g} (15 farm minutes), "
        f"{args.polls_per_s:g} polls/s over {args.subs} subscriptions"})
    path = folder / f"{name}-model.json"
    path.write_bytes(encode_model(model))
    done = subprocess.run([*PYTHON, "provision", "--json", "--model", str(path),
                           "--feeds", str(args.feeds), "--subs", str(args.subs),
                           "--bandwidth-mbps", str(args.bandwidth_mbps), "--memory-mb",
                           str(args.memory_mb), "--cpu", str(args.cpu), "--overprovision",
                           str(args.overprovision)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"feedmesh provision: {done.stderr.strip()}")
    (folder / f"{name}-plan.json").write_text(done.stdout)
    return json.loads(done.stdout), path


def processes_of(plan: dict, listing: dict) -> dict[str, dict]:
    """Each planned service -> the `up` process that runs it (filters: the replicas of one
    shard in order)."""
    by_role: dict[tuple[str, str], list[dict]] = {}
    for process in listing["processes"]:
        by_role.setdefault((process["role"], process.get("shard", "")), []).append(process)
    out = {}
    for service in plan["services"]:
        out[service["name"]] = by_role[(service["role"], service["process_shard"])].pop(0)
    return out


def answer_bytes(model: ResourceModel, held: float) -> float:
    """The model's private feed answered to a reader, holding ``held`` entries on average."""
    r, k = model.reflector, model.workload.held_per_subscription
    return r.bytes_per_poll_answer + (held - k) * r.bytes_per_poll_item


def launched_topology(args: argparse.Namespace, model_path: Path, launched: dict) -> Topology:
    """The topology ``feedmesh provision`` planned and ``up`` launched, planned again in-process
    (the compared model's plan: the baseline's own plan may differ)."""
    limits = NodeLimits.from_units(bandwidth_mbps=args.bandwidth_mbps, memory_mb=args.memory_mb,
                                   cpu=args.cpu, overprovision=args.overprovision)
    topology = make_plan(Targets(args.feeds, args.subs), limits,
                         decode_model(model_path.read_bytes())).topology
    if [s.name for s in topology.services] != [s["name"] for s in launched["services"]]:
        raise RuntimeError("the plan made in-process differs from feedmesh provision's")
    return topology


def predictions(topology: Topology, predicting_path: Path,
                held: float | None = None) -> dict[str, dict[str, float]]:
    """A model's predictions for ``topology``, its private feeds holding ``held`` entries on
    average (None: full, as planned)."""
    model = decode_model(predicting_path.read_bytes())
    model = msgspec.structs.replace(model, workload=msgspec.structs.replace(
        model.workload, held_per_answer=held))
    return {name: {"cpu": load.cpu, "memory": load.memory / 2**20,
                   "in": load.in_bandwidth / 1000, "out": load.out_bandwidth / 1000}
            for name, load in predict(topology, model).items()}


def measure(args: argparse.Namespace) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="feedmesh-provcheck-"))
    up = farm = poller = None
    try:
        with contextlib.ExitStack() as servers:
            plan, model_path = plan_for(args, folder, args.model, "model")
            _, baseline_path = plan_for(args, folder, args.baseline_model, "baseline")
            print(f"plan: {plan['crawlers']} crawlers, {plan['filters']} filters, "
                  f"{plan['reflectors']} reflectors for {args.feeds} feeds, {args.subs} "
                  f"subscriptions; limits {plan['limits']}", flush=True)
            for step in plan["steps"]:
                print(f"  step: {step['violation']} -> {step['decomposition']} x"
                      f"{step['replicas']}", flush=True)
            pg_folder = tempfile.mkdtemp(prefix="feedmesh-provcheck-pg-")
            servers.callback(shutil.rmtree, pg_folder, True)
            pg = LocalPostgres(pg_folder, durable=True).start()
            servers.callback(pg.stop)
            url = pg.superuser_login(folder / "secrets" / "superuser.pgpass").url  # no password
            started = time.perf_counter()
            provision(url, args.subs, plan["reflectors"])
            print(f"  {args.subs} subscriptions written in {time.perf_counter() - started:.0f} s",
                  flush=True)
            config = FarmConfig(feeds=args.feeds, seed=3, faults="none", hosts=20,
                                speed=CRAWL_FARM_S / args.interval, origin=ORIGIN,
                                max_age_share=0.0)
            farm = FarmProcess(config, cpu=0).start()
            data = folder / "up"
            log = open(folder / "up.log", "wb")  # noqa: SIM115 (closed with the folder)
            servers.callback(log.close)
            up = subprocess.Popen(
                [*PYTHON, "up", "--data", str(data), "--topology", str(folder / "model-plan.json"),
                 "--store", url, "--opml", farm.opml_url, "--allow-network", "127.0.0.0/8",
                 "--crawl-interval", str(args.interval), "--per-host", "64", "--no-backlog",
                 "--delivery", "article", "--port", "0", "--web", "1"],
                stdout=subprocess.DEVNULL, stderr=log)
            wait_for(lambda: (data / "up.json").exists() or up.poll() is not None,
                     "the topology starting", 900)
            if up.poll() is not None:
                raise RuntimeError(f"feedmesh up exited: {(folder / 'up.log').read_text()[-2000:]}")
            listing = json.loads((data / "up.json").read_text())
            mapping = processes_of(plan, listing)
            crawlers = [p["metrics"].removesuffix("/metrics") for p in listing["processes"]
                        if p["role"] == "crawler"]

            def cycles() -> list[int]:
                return [json.loads(_get(f"{c}/api/stats", 30))["crawl_cycles"] or 0
                        for c in crawlers]

            wait_for(lambda: min(cycles()) >= 2, "two crawl cycles", 3 * args.interval + 900)
            tokens = FeedTokens(private_feed_key(data / "hub", url))   # kept in PostgreSQL
            poller = Poller(listing["web"], tokens, args.subs, plan["reflectors"],
                            args.polls_per_s).start()
            wait_for(lambda: min(cycles()) >= 3, "a steady crawl cycle", 2 * args.interval + 600)
            tiers = [p for p in listing["processes"] if p["role"] in ("filter", "reflector")]

            def backlog() -> float:
                return sum(v for p in tiers for k, v in _metrics(
                    p["metrics"].removesuffix("/metrics"), p.get("token_file", "")).items()
                    if k.startswith("feedmesh_queue_messages"))

            with contextlib.suppress(RuntimeError):  # a backlog that stays is reported below
                wait_for(lambda: backlog() < 50, "the start-up backlog draining", 300)
            # What the private feeds hold (see 5. above): the pairs the reflectors hold.
            reflectors = [p for p in listing["processes"] if p["role"] == "reflector"]
            k = load_model(args.model).workload.held_per_subscription

            def held() -> float:
                return sum(_metrics(p["metrics"].removesuffix("/metrics"),
                                    p.get("token_file", "")).get(
                    "feedmesh_reflector_rows_held", 0.0) for p in reflectors)

            held0 = held()
            webs = [p for p in listing["processes"] if p["role"] == "web"]
            window = math.ceil(args.window / args.interval) * args.interval
            names = list(mapping)
            load0 = loadavg()
            before = {n: _metrics(mapping[n]["metrics"].removesuffix("/metrics"),
                               mapping[n].get("token_file", "")) for n in names}
            cpu0 = {n: cpu_seconds(mapping[n]["pid"]) for n in names}
            web_cpu0 = sum(cpu_seconds(p["pid"]) for p in webs)
            polled0, answers0 = list(poller.bytes), list(poller.answers)
            items0 = len(poller.items)
            t0 = time.monotonic()
            rss: dict[str, list[float]] = {n: [] for n in names}
            while time.monotonic() - t0 < window:
                for n in names:
                    rss[n].append((rss_bytes(mapping[n]["pid"]) or 0) / 2**20)
                time.sleep(1.0)
            after = {n: _metrics(mapping[n]["metrics"].removesuffix("/metrics"),
                               mapping[n].get("token_file", "")) for n in names}
            cpu1 = {n: cpu_seconds(mapping[n]["pid"]) for n in names}
            web_cpu = (sum(cpu_seconds(p["pid"]) for p in webs) - web_cpu0)
            polled1, answers1 = list(poller.bytes), list(poller.answers)
            items = poller.items[items0:]
            elapsed = time.monotonic() - t0
            held_avg = (held0 + held()) / 2 / args.subs
            print(f"  private feeds hold {held_avg:.2f} entries on average (k = {k}); the "
                  f"readers' answers held {statistics.mean(items) if items else 0:.2f}",
                  flush=True)
            topology = launched_topology(args, model_path, plan)
            loads = predictions(topology, model_path, held_avg)
            baseline_loads = predictions(topology, baseline_path, held_avg)
            planned = predictions(topology, model_path)
            load1 = loadavg()
            last_cycles = {c: json.loads(_get(f"{c}/api/stats", 30))["last_crawl"]
                           for c in crawlers}
            poller.stop()
            statuses = dict(poller.statuses)
            poller = None

            def rate(name: str, key: str) -> float:
                return max(0.0, after[name].get(key, 0.0) - before[name].get(key, 0.0)) / elapsed

            rows: dict[str, dict] = {}
            for service in plan["services"]:
                name, role = service["name"], service["role"]
                pid = mapping[name]["pid"]
                measured = {"cpu": (cpu1[name] - cpu0[name]) / elapsed,
                            "memory": statistics.median(rss[name]),
                            "in": rate(name, f"feedmesh_tier_bytes_in_total{{tier={role}}}")
                            / 1000}
                if role == "reflector":
                    number = int(service["process_shard"].split("/")[0])
                    measured["out"] = (polled1[number] - polled0[number]) / elapsed / 1000
                    answers = answers1[number] - answers0[number]
                    # Cobra's reflector serves its readers; here a web process renders and
                    # sends what the reflector holds: its CPU is the reflector's, by polls.
                    all_answers = sum(answers1) - sum(answers0)
                    web_share = web_cpu / elapsed * answers / max(1, all_answers)
                    measured["cpu"] += web_share
                    extra = {"web_cpu_share": round(web_share, 4),
                             "internal_answers_kb_s": round(rate(
                        name, "feedmesh_tier_bytes_out_total{tier=reflector}") / 1000, 2),
                        "answers_200_per_s": round(answers / elapsed, 2),
                        "bytes_per_200_answer": round((polled1[number] - polled0[number])
                                                      / max(1, answers))}
                else:
                    measured["out"] = rate(name, f"feedmesh_tier_bytes_out_total{{tier={role}}}"
                                           ) / 1000
                    extra = {}
                queued = sum(v for k, v in after[name].items()
                             if k.startswith("feedmesh_queue_messages"))
                queued_before = sum(v for k, v in before[name].items()
                                    if k.startswith("feedmesh_queue_messages"))
                rows[name] = {"role": role, "predicted": loads[name],
                              "planned": planned[name],
                              "baseline": baseline_loads.get(name),
                              "measured": measured, "memory_at_end": memory_figures(pid),
                              "queued_at_start": queued_before, "queued_at_end": queued,
                              "articles_in_per_s": rate(
                                  name, f"feedmesh_tier_articles_in_total{{tier={role}}}"),
                              "articles_out_per_s": rate(
                                  name, f"feedmesh_tier_articles_out_total{{tier={role}}}"),
                              **extra}
            up.send_signal(signal.SIGTERM)
            up.wait(600)
            up = None
    finally:
        if poller is not None:
            poller.stop()
        if up is not None:
            stop(up, 600)
        if farm is not None:
            farm.stop()
        shutil.rmtree(folder, ignore_errors=True)
    return {"plan": plan, "rows": rows, "window_s": round(elapsed, 1),
            "bytes_per_poll_answer": answer_bytes(load_model(args.model), held_avg),
            "loadavg_before": load0, "loadavg_after": load1, "poll_statuses": statuses,
            "crawl_cycles": last_cycles, "limits": plan["limits"], "model": str(model_path),
            "held_per_subscription": round(held_avg, 3),
            "items_per_answer": round(statistics.mean(items), 2) if items else None}


def saturated(run: dict, interval: float) -> list[str]:
    """Services that did not keep up while the plan says they fit: a crawl cycle longer than its
    interval, a backlog on the bus of more than one interval's articles, or a measured load
    above the node's limit."""
    limits = run["limits"]
    bandwidth = limits["bandwidth_mbps"] * 1e6 / 8 / 1000
    cap = {"cpu": limits["cpu"], "memory": limits["memory_mb"], "in": bandwidth,
           "out": bandwidth}
    found = []
    for name, row in run["rows"].items():
        over = [r for r in RESOURCES if row["measured"][r] > cap[r]]
        if over:
            found.append(f"{name}: {', '.join(over)} above the limit")
        if row["role"] != "crawler" and row["queued_at_end"] > max(
                10.0, row["articles_in_per_s"] * interval):
            found.append(f"{name}: {row['queued_at_end']:.0f} messages queued")
    for crawler, cycle in run["crawl_cycles"].items():
        if cycle and cycle.get("elapsed_s", 0) > interval:
            found.append(f"crawler at {crawler}: a cycle took {cycle['elapsed_s']:.0f} s")
    return found


def error_pct(p: float, m: float) -> float:
    return abs(p - m) / m * 100 if m > 0 else (0.0 if p == 0 else math.inf)


def compare(run: dict, key: str = "predicted") -> dict:
    figures: dict[str, dict] = {}
    errors = []
    for name, row in run["rows"].items():
        if row[key] is None:
            continue
        figures[name] = {}
        for resource in RESOURCES:
            p, m = row[key][resource], row["measured"][resource]
            error = error_pct(p, m)
            figures[name][resource] = {"predicted": round(p, 4), "measured": round(m, 4),
                                       "ratio": round(p / m, 3) if m > 0 else None,
                                       "error_pct": round(error, 1)}
            errors.append(error)
    return {"figures": figures, "errors": errors}


def summary(result: dict) -> dict:
    errors = result["errors"]
    if not errors:
        return {}
    return {"max_abs_error_pct": round(max(errors), 1),
            "median_abs_error_pct": round(statistics.median(errors), 1),
            "within_25pct": round(sum(e <= 25 for e in errors) / len(errors), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a smaller, shorter run (~8 min)")
    parser.add_argument("--feeds", type=int, default=6000)
    parser.add_argument("--subs", type=int, default=200_000)
    parser.add_argument("--interval", type=float, default=30.0,
                        help="real seconds between crawls (the farm runs 900/interval faster)")
    parser.add_argument("--window", type=float, default=180.0)
    parser.add_argument("--polls-per-s", type=float, default=20.0,
                        help="readers' polls per second over all subscriptions")
    parser.add_argument("--bandwidth-mbps", type=float, default=2.5)
    parser.add_argument("--memory-mb", type=float, default=320.0)
    parser.add_argument("--cpu", type=float, default=1.0)
    parser.add_argument("--overprovision", type=float, default=0.0)
    parser.add_argument("--model", type=Path, default=PROCESSES_MODEL,
                        help="the model compared: a file or a shipped model's name (default: "
                        "'processes', the separate processes' model)")
    parser.add_argument("--baseline-model", type=Path, default=None,
                        help="the model shown beside it (default: the shipped one, the hub's)")
    args = parser.parse_args()
    if args.quick:
        args.feeds, args.subs, args.window = min(args.feeds, 3000), min(args.subs, 100_000), 60.0
        args.interval = min(args.interval, 20.0)
    print(f"load average at start: {loadavg()}", flush=True)
    run = measure(args)
    result, baseline = compare(run), compare(run, "baseline")
    print(f"\nwindow {run['window_s']} s; load average {run['loadavg_before']} -> "
          f"{run['loadavg_after']}; polls by status {run['poll_statuses']}")
    print(f"model: {args.model}; baseline: {args.baseline_model or 'the shipped model'}")
    print(f"{'service':12} {'resource':10} {'predicted':>10} {'baseline':>10} {'measured':>10} "
          f"{'pred/meas':>9} {'error':>6} {'base err':>8}")
    for name, resources in result["figures"].items():
        for resource, f in resources.items():
            ratio = "-" if f["ratio"] is None else f"{f['ratio']:.2f}"
            b = baseline["figures"].get(name, {}).get(resource)
            print(f"{name:12} {resource + ' ' + UNITS[resource]:10} {f['predicted']:10.3f} "
                  f"{'-' if b is None else format(b['predicted'], '10.3f'):>10} "
                  f"{f['measured']:10.3f} {ratio:>9} {f['error_pct']:5.0f}% "
                  f"{'-' if b is None else format(b['error_pct'], '7.0f') + '%':>8}")
    for name, row in run["rows"].items():
        mem = row["memory_at_end"]
        extra = (f"; readers got {row['answers_200_per_s']} feeds/s of "
                 f"{row['bytes_per_200_answer']} bytes (the model, at the entries held: "
                 f"{run['bytes_per_poll_answer']:.0f}); its answers to the web process "
                 f"{row['internal_answers_kb_s']} KB/s" if "internal_answers_kb_s" in row else "")
        print(f"  {name}: at the end RSS {mem['rss']:.0f} MB, PSS {mem['pss']:.0f}, USS "
              f"{mem['uss']:.0f}; articles in/out {row['articles_in_per_s']:.1f}/"
              f"{row['articles_out_per_s']:.1f} per s; queued {row['queued_at_start']:.0f} -> "
              f"{row['queued_at_end']:.0f}{extra}")
    ours, base = summary(result), summary(baseline)
    busy = saturated(run, args.interval)
    shown = f"{base['within_25pct']:.0%}" if base else "not computed"
    print(f"within 25%: {ours['within_25pct']:.0%} of {len(result['errors'])} predictions "
          f"(baseline: {shown}); saturated: {busy or 'none'}")
    print(json.dumps({
        "feeds": args.feeds, "subscriptions": args.subs, "crawl_interval_s": args.interval,
        "polls_per_s": args.polls_per_s, "window_s": run["window_s"],
        "topology": {k: run["plan"][k] for k in ("crawlers", "filters", "reflectors")},
        "limits": run["limits"], "loadavg": [run["loadavg_before"], run["loadavg_after"]],
        "model": str(args.model), **ours,
        "reflectors": {name: {k: row[k] for k in ("answers_200_per_s", "bytes_per_200_answer",
                                                  "internal_answers_kb_s", "web_cpu_share")}
                       for name, row in run["rows"].items() if row["role"] == "reflector"},
        "held_per_subscription": run["held_per_subscription"],
        "items_per_answer": run["items_per_answer"],
        "baseline": base, "saturated": busy,
        "memory_measure": "RSS (median of 1 s samples)", "cpu_measure": "process CPU time",
        "services": result["figures"]}))


if __name__ == "__main__":
    main()
