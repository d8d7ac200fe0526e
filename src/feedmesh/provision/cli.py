"""``feedmesh provision``: plan a topology, calibrate the model, check a running one.

    feedmesh provision --feeds 800000 --subs 8000000 --bandwidth-mbps 100 --memory-mb 1024 \\
        --cpu 1 [--overprovision 0.1] [--model MODEL.json] [--json] [--picture topology.svg]
    feedmesh provision calibrate [--run] [--hub FILE --match FILE ...] [--out MODEL.json]
    feedmesh provision --check --metrics URL [URL...] [--seconds 10] [limits]
    feedmesh provision --check --up DIR | --metrics ROLE=URL... [--seconds 10] [limits]

The edge of the package: files, subprocesses (the benchmarks, Graphviz's ``dot``) and HTTP
(``/metrics``) are here; everything it prints is decided by the pure modules.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from importlib import resources
from pathlib import Path
from typing import Any

import msgspec
from prometheus_client.parser import text_string_to_metric_families

from feedmesh.errors import FeedmeshError
from feedmesh.secret_file import SecretFileError, read_token

from .calibrate import BENCHMARKS, PROCESS_BENCHMARKS, model_from_benchmarks
from .check import ROLES, Scrape, check, live_loads, role_load
from .errors import ProvisionError
from .launch import launch_plan, topology_json
from .model import Machine, ResourceModel, decode_model, encode_model
from .planner import PlannerSettings, plan
from .render import plan_table, topology_dot
from .topology import NodeLimits, Targets

__all__ = ["configure", "load_model", "run"]

DEFAULT_MODEL = "default_model.json"
SHIPPED_MODELS = {"hub": DEFAULT_MODEL, "processes": "processes_model.json"}
"""Models shipped with feedmesh, by the name ``--model`` takes: ``hub`` (the default) measured
on ``feedmesh serve``, every tier in one process; ``processes`` measured on ``feedmesh up``'s
separate processes (docs/provisioning.md, "A model of separate processes")."""
BENCHMARK_DIR = Path(__file__).resolve().parents[3] / "benchmarks"


class CommandError(FeedmeshError):
    """A one-line failure of this command (the cause is in the message)."""


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("action", nargs="?", choices=("calibrate",),
                        help="`calibrate`: write a model file from the benchmarks' outputs")
    plan_group = parser.add_argument_group("planning (and the limits --check checks against)")
    plan_group.add_argument("--feeds", type=int, help="source feeds to crawl")
    plan_group.add_argument("--subs", type=int, help="user subscriptions to serve")
    plan_group.add_argument("--bandwidth-mbps", type=float, default=100.0,
                            help="each node's inbound and outbound bandwidth")
    plan_group.add_argument("--memory-mb", type=float, default=1024.0, help="each node's memory")
    plan_group.add_argument("--cpu", type=float, default=1.0,
                            help="each node's CPU relative to one core of the model's machine")
    plan_group.add_argument("--overprovision", type=float, default=0.0,
                            help="head-room: loads count (1 + this) times")
    plan_group.add_argument("--model", type=Path, metavar="MODEL",
                            help="a model file, or a shipped model: 'hub' (the default: every "
                                 "tier in one process, `feedmesh serve`) or 'processes' (each "
                                 "role a process of its own, `feedmesh up`)")
    workload = parser.add_argument_group("the workload planned for (default: the model's own, "
                                         "printed with the plan)")
    workload.add_argument("--crawl-interval", type=float, metavar="S",
                          help="seconds between two fetches of a feed")
    workload.add_argument("--posts-per-day", type=float, metavar="N",
                          help="new entries a feed gets a day, on average")
    workload.add_argument("--poll-interval", type=float, metavar="S",
                          help="seconds between two polls of a private feed by its reader")
    workload.add_argument("--keep", type=int, metavar="K",
                          help="entries each private feed keeps")
    plan_group.add_argument("--max-services", type=int, default=PlannerSettings.max_services,
                            metavar="N", help="refuse a plan of more services than this "
                            "(planning time grows with the links between them)")
    plan_group.add_argument("--json", action="store_true", help="print the topology as JSON")
    plan_group.add_argument("--picture", type=Path,
                            help="draw the topology (Graphviz; .svg, .png or .pdf)")
    check_group = parser.add_argument_group("checking running hubs (Cobra 3.6)")
    check_group.add_argument("--check", action="store_true",
                             help="read live figures and say what violates its limits")
    check_group.add_argument("--metrics", nargs="+", default=[], metavar="URL",
                             help="hubs' /metrics URLs (or their base URLs), or one process of "
                             "a role as ROLE=URL (crawler=, filter=, reflector=)")
    check_group.add_argument("--reflector-token-file", default="", metavar="FILE",
                             help="the bearer token a reflector=URL asks for, a file 0600 "
                             "(`feedmesh up`'s DATA/secrets/reflector.token; --up finds it)")
    check_group.add_argument("--up", default="", metavar="DIR",
                             help="every crawler, filter and reflector process of a `feedmesh "
                             "up --data DIR` topology (its DIR/up.json), each as its role")
    check_group.add_argument("--seconds", type=float, default=10.0,
                             help="seconds between the two scrapes rates are taken over")
    calibrate_group = parser.add_argument_group("calibrate")
    for name in BENCHMARKS:
        calibrate_group.add_argument(f"--{name.replace('_', '-')}", type=Path, metavar="FILE",
                                     help=f"output of {BENCHMARKS[name].split()[0]}")
    for name, command in PROCESS_BENCHMARKS.items():
        calibrate_group.add_argument(f"--{name}", type=Path, metavar="FILE",
                                     help=f"output of {command.split()[0]} (with the other: a "
                                     "model of separate processes, `feedmesh up`)")
    calibrate_group.add_argument("--run", action="store_true",
                                 help="run the benchmarks not given as files (quick commands)")
    calibrate_group.add_argument("--out", type=Path, help="model file to write (default: stdout)")


def run(args: argparse.Namespace) -> int:
    try:
        if args.action == "calibrate":
            return _calibrate(args)
        model = load_model(args.model)
        if not args.check:
            model = with_workload(model, args)
        limits = NodeLimits.from_units(bandwidth_mbps=args.bandwidth_mbps,
                                       memory_mb=args.memory_mb, cpu=args.cpu,
                                       overprovision=args.overprovision)
        if args.check:
            return _check(args, model, limits)
        return _plan(args, model, limits)
    except (ProvisionError, CommandError) as exc:
        print(f"feedmesh provision: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # the reader left (`| head`): not an error, and nothing to flush to
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def with_workload(model: ResourceModel, args: argparse.Namespace) -> ResourceModel:
    """``model`` with the workload the flags give (a crawl interval, posts a day, readers'
    polls, the entries a feed keeps), its per-crawl costs scaled to match."""
    for flag in ("crawl_interval", "posts_per_day", "poll_interval", "keep"):
        value = getattr(args, flag, None)
        if value is not None and value <= 0:
            raise CommandError(f"--{flag.replace('_', '-')} must be > 0, got {value:g}")
    work, crawler = model.workload, model.crawler
    interval = args.crawl_interval or work.crawl_interval_s
    posts = (args.posts_per_day if args.posts_per_day is not None
             else crawler.articles_per_feed_per_crawl * 86400 / work.crawl_interval_s)
    articles = posts * interval / 86400
    ratio = articles / crawler.articles_per_feed_per_crawl if crawler.articles_per_feed_per_crawl \
        else 1.0
    crawler = msgspec.structs.replace(
        crawler, articles_per_feed_per_crawl=articles,
        bytes_out_per_feed_per_crawl=crawler.bytes_out_per_feed_per_crawl * ratio)
    work = msgspec.structs.replace(
        work, crawl_interval_s=interval,
        poll_interval_s=args.poll_interval or work.poll_interval_s,
        held_per_subscription=args.keep or work.held_per_subscription)
    return msgspec.structs.replace(model, workload=work, crawler=crawler)


def workload_line(model: ResourceModel) -> str:
    work = model.workload
    posts = model.crawler.articles_per_feed_per_crawl * 86400 / work.crawl_interval_s
    return (f"workload: each feed fetched every {work.crawl_interval_s:g} s, posting "
            f"{posts:.2g} entries a day; each private feed keeps {work.held_per_subscription} and "
            f"is polled every {work.poll_interval_s:g} s (--crawl-interval, --posts-per-day, "
            "--keep, --poll-interval)")


def load_model(path: Path | None) -> ResourceModel:
    """A model file, a shipped model by name (``SHIPPED_MODELS``), or the default one."""
    shipped = DEFAULT_MODEL if path is None else SHIPPED_MODELS.get(str(path))
    if shipped is not None:
        return decode_model(resources.files(__package__).joinpath(shipped).read_bytes(),
                            f"the shipped {shipped}")
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise CommandError(f"cannot read model {path}: {exc.strerror}") from exc
    return decode_model(data, str(path))


def _plan(args: argparse.Namespace, model: ResourceModel, limits: NodeLimits) -> int:
    if args.feeds is None or args.subs is None:
        raise CommandError("--feeds and --subs are needed to plan (or --check, or calibrate)")
    if args.max_services < 3:
        raise CommandError(f"--max-services must be >= 3, got {args.max_services}")
    result = plan(Targets(args.feeds, args.subs), limits, model,
                  PlannerSettings(max_services=args.max_services))
    if args.json:
        print(json.dumps(topology_json(result), indent=2))
    else:
        print(plan_table(result))
        print(workload_line(model))
        print(f"model: {model.machine.cpu_model}, {model.machine.cores} cores, measured "
              f"{model.machine.measured_at}")
    if args.picture:
        note = draw(topology_dot(result), args.picture)
        print(note, file=sys.stderr if args.json else sys.stdout)
    if not args.json:
        print("launch plan (`feedmesh up --topology` of this plan's --json starts it on one "
              "machine):")
        for row in launch_plan(result):
            print(f"  {row['host']:12} feedmesh {row['flags']}")
    return 0


def draw(dot_text: str, picture: Path) -> str:
    """Render with Graphviz's ``dot``; without it, write the .dot file and say so."""
    dot = shutil.which("dot")
    if dot is None:
        path = picture.with_suffix(".dot")
        path.write_text(dot_text)
        return f"Graphviz `dot` is not installed: wrote {path} instead of {picture}"
    fmt = picture.suffix.lstrip(".") or "svg"
    done = subprocess.run([dot, f"-T{fmt}", "-o", str(picture)], input=dot_text, text=True,
                          capture_output=True, timeout=120, check=False)
    if done.returncode != 0:
        raise CommandError(f"dot could not draw {picture}: {done.stderr.strip()}")
    return f"picture: {picture}"


# -- calibrate -------------------------------------------------------------------------------

def _last_json_line(text: str, where: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.strip():
            try:
                value = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CommandError(f"{where}: the last line is not JSON ({exc.msg})") from exc
            if not isinstance(value, dict):
                raise CommandError(f"{where}: the last line is not a JSON object")
            return value
    raise CommandError(f"{where}: empty")


def machine() -> Machine:
    model = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return Machine(model, os.cpu_count() or 1,
                   datetime.datetime.now(datetime.UTC).date().isoformat())


def _calibrate(args: argparse.Namespace) -> int:
    outputs, sources = {}, {}
    for name, command in BENCHMARKS.items():
        path = getattr(args, name)
        if path is not None:
            try:
                outputs[name] = _last_json_line(path.read_text(), str(path))
            except OSError as exc:
                raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
            sources[name] = f"read from {path}"
        elif args.run:
            script, *flags = command.split()
            if not (BENCHMARK_DIR / Path(script).name).is_file():
                raise CommandError(f"{script} is not here ({BENCHMARK_DIR}): --run needs a "
                                   "checkout of feedmesh")
            print(f"running {command} ...", file=sys.stderr, flush=True)
            done = subprocess.run([sys.executable, str(BENCHMARK_DIR / Path(script).name),
                                   *flags], capture_output=True, text=True, check=False)
            if done.returncode != 0:
                tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise CommandError(f"{command} failed ({done.returncode}): {tail}")
            outputs[name] = _last_json_line(done.stdout, command)
            sources[name] = f"run {datetime.datetime.now(datetime.UTC).date().isoformat()}"
    for name in PROCESS_BENCHMARKS:
        path = getattr(args, name)
        if path is not None:
            try:
                outputs[name] = _last_json_line(path.read_text(), str(path))
            except OSError as exc:
                raise CommandError(f"cannot read {path}: {exc.strerror}") from exc
            sources[name] = f"read from {path}"
    missing = [f"--{n.replace('_', '-')}" for n in BENCHMARKS if n not in outputs]
    if missing:
        raise CommandError(f"no output for {', '.join(missing)}: give the files or --run")
    model = model_from_benchmarks(outputs, machine(), sources)
    data = encode_model(model)
    if args.out:
        args.out.write_bytes(data)
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(data.decode())
    return 0


# -- check -----------------------------------------------------------------------------------

def scrape(url: str, token_file: str = "") -> Scrape:
    """``url``'s Prometheus figures; ``token_file``: the bearer token it asks for (a reflector
    of ``feedmesh up``), a file 0600."""
    headers = {}
    if token_file:
        try:
            token = read_token(token_file, "reflector token").decode()
            headers["Authorization"] = f"Bearer {token}"
        except SecretFileError as exc:
            raise CommandError(str(exc)) from exc
    if not url.rstrip("/").endswith("/metrics"):
        url = url.rstrip("/") + "/metrics"
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers),
                                    timeout=10) as answer:
            text = answer.read().decode()
    except OSError as exc:
        raise CommandError(f"cannot read {url}: {exc}") from exc
    figures: Scrape = {}
    try:
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                label = ",".join(f"{k}={v}" for k, v in sorted(sample.labels.items()))
                figures[f"{sample.name}{{{label}}}" if label else sample.name] = sample.value
    except ValueError as exc:
        raise CommandError(f"{url} is not a Prometheus exposition: {exc}") from exc
    return figures


def _token_files(args: argparse.Namespace) -> dict[str, str]:
    """Metrics URL -> the token file it asks for: ``--up DIR``'s reflectors' (from its
    listing), and the reflector=URLs given, ``--reflector-token-file``'s."""
    found = {}
    if args.reflector_token_file:
        found = {url: args.reflector_token_file for role, _, url in
                 (given.partition("=") for given in args.metrics) if role == "reflector"}
    if not args.up:
        return found
    try:
        processes = json.loads((Path(args.up) / "up.json").read_text())["processes"]
    except (OSError, ValueError, KeyError, TypeError):
        return found
    return {**found, **{p["metrics"]: p["token_file"] for p in processes
                        if "metrics" in p and p.get("token_file")}}


def _targets(args: argparse.Namespace) -> list[tuple[str, str, str]]:
    """(service name, role or "hub", metrics URL) for every process to check: ``--up DIR``'s
    listing (its crawler, filter and reflector processes), ``ROLE=URL`` and whole hubs' URLs."""
    targets = []
    if args.up:
        listing_path = Path(args.up) / "up.json"
        try:
            listing = json.loads(listing_path.read_text())
            processes = listing["processes"]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CommandError(f"--up {args.up}: no running `feedmesh up` topology there "
                               f"({listing_path}: {exc})") from exc
        for process in processes:
            if process.get("role") in ROLES and "metrics" in process:
                shard = process.get("shard", "")
                name = f"{process['role']} {shard}".strip()
                targets.append((f"{name}@pid {process['pid']}", process["role"],
                                process["metrics"]))
        if not targets:
            raise CommandError(f"--up {args.up}: the listing names no crawler, filter or "
                               "reflector with its metrics address")
    for given in args.metrics:
        role, sep, url = given.partition("=")
        if sep and role in ROLES:
            targets.append((f"{role}@{url.split('//', 1)[-1].split('/', 1)[0]}", role, url))
        elif sep and not role.startswith(("http", "/")):
            raise CommandError(f"--metrics {given}: a role is one of {', '.join(ROLES)} "
                               "(ROLE=URL), or give a whole hub's URL alone")
        else:
            targets.append((given.split("//", 1)[-1].split("/", 1)[0], "hub", given))
    return targets


def _check(args: argparse.Namespace, model: ResourceModel, limits: NodeLimits) -> int:
    if not args.metrics and not args.up:
        raise CommandError("--check needs --up DIR (a `feedmesh up` topology) or --metrics URL "
                           "(a hub's /metrics, or ROLE=URL for one process)")
    if args.seconds <= 0:
        raise CommandError("--seconds must be > 0")
    targets = _targets(args)
    tokens = _token_files(args)
    first = {url: scrape(url, tokens.get(url, "")) for _, _, url in targets}
    started = time.monotonic()
    time.sleep(args.seconds)  # rates are taken between two scrapes, this far apart
    second = {url: scrape(url, tokens.get(url, "")) for _, _, url in targets}
    elapsed = time.monotonic() - started
    loads, estimated, tiers = {}, {}, {}
    for name, role, url in targets:
        if role == "hub":
            hub_loads, hub_estimated = live_loads(name, first[url], second[url], elapsed, model)
            loads.update(hub_loads)
            estimated.update(hub_estimated)
            tiers.update({n: n.split("@", 1)[0] for n in hub_loads})
        else:
            if "feedmesh_process_cpu_seconds" not in second[url]:
                raise CommandError(f"{url} does not export feedmesh_process_cpu_seconds: is it "
                                   f"a feedmesh {role} of this version?")
            loads[name] = role_load(role, first[url], second[url], elapsed)
            estimated[name] = []
            tiers[name] = role
    findings = check(loads, limits, tiers)
    if args.json:
        print(json.dumps({"services": {name: {**load.as_dict(), "role": tiers[name]}
                                       for name, load in loads.items()},
                          "estimated": estimated,
                          "violations": [{"service": f.violation.service,
                                          "role": f.violation.tier,
                                          "resource": f.violation.resource,
                                          "load": f.violation.load, "limit": f.violation.limit,
                                          "decomposition": f.decomposition,
                                          "replicas": f.replicas} for f in findings]}, indent=2))
    else:
        for name, load in loads.items():
            guessed = f" (estimated: {', '.join(estimated[name])})" if estimated[name] else ""
            print(f"{name}: in {load.in_bandwidth * 8 / 1e6:.3f} Mbps, out "
                  f"{load.out_bandwidth * 8 / 1e6:.3f} Mbps, CPU {load.cpu:.3f}, "
                  f"{load.memory / 2**20:.0f} MB{guessed}")
        if not findings:
            print("every service fits its limits")
        for finding in findings:
            print(f"VIOLATION {finding.describe()}")
    return 1 if findings else 0
