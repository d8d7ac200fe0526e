"""`feedmesh provision` as a person runs it: JSON, table, launch plan, picture, clear errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import msgspec
import pytest

from feedmesh.provision import encode_model
from feedmesh.provision.cli import load_model

FIGURE_2B = ["--feeds", "800000", "--subs", "8000000", "--bandwidth-mbps", "100",
             "--memory-mb", "1024", "--cpu", "1"]


def provision(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "feedmesh", "provision", *args],
                          capture_output=True, text=True, timeout=120, check=False,
                          env=env if env is not None else os.environ.copy())


def test_json_is_one_object_with_counts_services_and_links():
    done = provision(*FIGURE_2B, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert {"crawlers", "filters", "reflectors", "services", "links"} <= set(plan)
    by_role = {}
    for service in plan["services"]:
        by_role.setdefault(service["role"], []).append(service)
        assert {"in_mbps", "out_mbps", "cpu", "memory_mb"} <= set(service["load"])
        assert service["host"].startswith("127.")
        assert service["flags"].startswith(f"{service['role']} --shard ")
    assert (len(by_role["crawler"]), len(by_role["filter"]), len(by_role["reflector"])) == \
        (plan["crawlers"], plan["filters"], plan["reflectors"])
    assert sum(s["feeds"] for s in by_role["crawler"]) == 800_000
    assert sum(s["subscriptions"] for s in by_role["reflector"]) == 8_000_000
    names = {s["name"] for s in plan["services"]}
    assert all(link["from"] in names and link["to"] in names for link in plan["links"])
    # every load fits the node: the plan succeeded
    assert all(s["load"]["in_share"] <= 1 and s["load"]["memory_share"] <= 1
               for s in plan["services"])


def test_the_table_and_launch_plan_for_a_person():
    done = provision(*FIGURE_2B)
    assert done.returncode == 0, done.stderr
    assert " crawler" in done.stdout.splitlines()[0] and "launch plan" in done.stdout
    assert "feedmesh crawler --shard 0/" in done.stdout


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
def test_the_picture_is_drawn_with_graphviz(tmp_path):
    picture = tmp_path / "topology.svg"
    done = provision(*FIGURE_2B, "--picture", str(picture))
    assert done.returncode == 0, done.stderr
    svg = picture.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "crawler" in svg and "reflector" in svg and "<title>filter" in svg


def test_without_graphviz_the_dot_file_is_written_and_said_in_one_line(tmp_path):
    env = os.environ.copy()
    env["PATH"] = str(tmp_path / "empty")  # no dot anywhere on it
    picture = tmp_path / "topology.svg"
    done = provision(*FIGURE_2B, "--picture", str(picture), env=env)
    assert done.returncode == 0, done.stderr
    assert not picture.exists()
    dot = (tmp_path / "topology.dot").read_text()
    assert dot.startswith("digraph") and '"crawler-0" ->' in dot
    [line] = [x for x in done.stdout.splitlines() if "dot" in x.lower() and "installed" in x]
    assert str(tmp_path / "topology.dot") in line


def test_an_unresolvable_plan_exits_non_zero_with_one_clear_line():
    done = provision("--feeds", "1000", "--subs", "1000", "--memory-mb", "16")
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("feedmesh provision: ") and "memory" in line
    assert "no decomposition resolves it" in line


def test_a_model_of_another_version_is_refused(tmp_path):
    raw = msgspec.json.decode(encode_model(load_model(None)))
    raw["version"] = 99
    path = tmp_path / "m.json"
    path.write_bytes(msgspec.json.encode(raw))
    done = provision(*FIGURE_2B, "--model", str(path))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "model version 99 is not known" in done.stderr


def test_the_shipped_models_are_chosen_by_name():
    plans = {}
    for name in ("hub", "processes"):
        done = provision("--feeds", "6000", "--subs", "200000", "--bandwidth-mbps", "2.5",
                         "--memory-mb", "320", "--json", "--model", name)
        assert done.returncode == 0, done.stderr
        plans[name] = json.loads(done.stdout)
    default = json.loads(provision("--feeds", "6000", "--subs", "200000", "--bandwidth-mbps",
                                   "2.5", "--memory-mb", "320", "--json").stdout)
    assert default == plans["hub"]
    # a crawler process of its own loads less than the hub's one process (its fixed memory)
    memory = {name: plan["services"][0]["load"]["memory_mb"] for name, plan in plans.items()}
    assert memory["processes"] < 0.7 * memory["hub"]
    assert load_model(Path("processes")).reflector.bytes_per_poll_item > 0


@pytest.mark.parametrize("args, says", [
    (["--subs", "10"], "--feeds and --subs are needed"),
    (["--feeds", "0", "--subs", "10"], "--feeds must be >= 1"),
    (["--feeds", "10", "--subs", "10", "--cpu", "0"], "--cpu must be > 0"),
    (["--feeds", "10", "--subs", "10", "--model", "/nonexistent.json"], "cannot read model"),
    (["calibrate", "--hub", "/nonexistent.json"], "cannot read /nonexistent.json"),
    (["--check"], "--check needs --up DIR (a `feedmesh up` topology) or --metrics URL"),
    (["--feeds", "10", "--subs", "10", "--max-services", "2"], "--max-services must be >= 3"),
    # a target thousands of services big is refused at once, not planned for minutes
    (["--feeds", "100000000000", "--subs", "10"], "needs at least 46,567 crawlers"),
    (["--feeds", "50000000", "--subs", "1000000000"], "bound of 2,000 services"),
])
def test_bad_input_is_one_line(args, says):
    done = provision(*args)
    assert done.returncode == 2, done.stdout
    assert "Traceback" not in done.stderr and says in done.stderr


def test_calibrate_writes_the_model_from_benchmark_outputs(tmp_path):
    data = Path(__file__).parent / "data"
    out = tmp_path / "model.json"
    done = provision("calibrate", "--match", str(data / "match.json"),
                     "--crawl-bandwidth", str(data / "crawl_bandwidth.json"),
                     "--crawl-throughput", str(data / "crawl_throughput.json"),
                     "--hub", str(data / "hub.json"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    written = load_model(out)
    shipped = load_model(None)
    assert written.crawler == shipped.crawler and written.filter == shipped.filter
    assert written.reflector == shipped.reflector
    # and a plan reads it
    assert provision(*FIGURE_2B, "--model", str(out), "--json").returncode == 0


def test_the_plan_says_what_it_assumed_and_what_its_addresses_are():
    done = provision("--feeds", "1000", "--subs", "10000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("1 crawler, 1 filter, 1 reflector for ")
    assert "(0 decompositions)" in done.stdout
    assert "workload: each feed fetched every 900 s" in done.stdout
    assert "loopback hosts that `feedmesh up --topology` gives" in done.stdout


def test_the_workload_is_a_flag_and_changes_the_plan():
    base = json.loads(provision("--feeds", "1000000", "--subs", "10000000", "--json").stdout)
    busier = provision("--feeds", "1000000", "--subs", "10000000", "--json",
                       "--posts-per-day", "50", "--crawl-interval", "300")
    assert busier.returncode == 0, busier.stderr
    plan = json.loads(busier.stdout)
    total = sum(len(plan[k]) if isinstance(plan[k], list) else plan[k]
                for k in ("crawlers", "filters", "reflectors"))
    assert total > sum(base[k] for k in ("crawlers", "filters", "reflectors"))
    said = provision("--feeds", "1000", "--subs", "1000", "--keep", "20", "--poll-interval",
                     "600", "--posts-per-day", "3")
    assert "posting 3 entries a day; each private feed keeps 20 and is polled every 600 s" \
        in said.stdout
    bad = provision("--feeds", "1000", "--subs", "1000", "--keep", "0")
    assert bad.returncode == 2 and "--keep must be > 0" in bad.stderr


def test_a_node_smaller_than_a_process_says_so():
    done = provision("--feeds", "100000", "--subs", "1000000", "--memory-mb", "256")
    assert done.returncode == 2
    assert "fixed memory is" in done.stderr and "no split helps" in done.stderr
    assert "needs more than" not in done.stderr
