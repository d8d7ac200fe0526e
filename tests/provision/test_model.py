"""The model file: versioned, validated, tagged with its machine; the shipped one is calibrate's
output from the benchmark outputs kept in tests/provision/data/."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from feedmesh.provision import ModelError, ModelVersionError, decode_model, encode_model
from feedmesh.provision.calibrate import BENCHMARKS, PROCESS_BENCHMARKS, model_from_benchmarks
from feedmesh.provision.cli import load_model

DATA = Path(__file__).parent / "data"


def shipped() -> dict:
    return msgspec.json.decode(encode_model(load_model(None)))


def test_the_shipped_model_is_tagged_with_its_machine_and_sources():
    model = load_model(None)
    assert model.version == 2
    assert model.machine.cores >= 1 and model.machine.cpu_model and model.machine.measured_at
    for tier in ("crawler", "filter", "reflector"):
        for field in getattr(model, tier).__struct_fields__:
            if field not in ("memory_base_bytes", "cpu_s_per_s_base"):
                assert f"{tier}.{field}" in model.source, f"{tier}.{field} has no source"
    assert "memory_base_bytes" in model.source and "cpu_s_per_s_base" in model.source


def test_the_shipped_model_is_calibrates_output_from_the_kept_benchmark_outputs():
    outputs = {name: json.loads((DATA / f"{name}.json").read_text()) for name in BENCHMARKS}
    model = load_model(None)
    sources = {name: f"read from tests/provision/data/{name}.json" for name in BENCHMARKS}
    again = model_from_benchmarks(outputs, model.machine, sources)
    assert again == model


def test_a_crawlers_bytes_out_are_its_articles_as_the_bus_carries_them():
    # not the entries' own encoding (crawl_bandwidth's out_new_entries): an article travels packed
    # with its tokens, about twice that, and the plan check measured what travels
    outputs = {name: json.loads((DATA / f"{name}.json").read_text()) for name in BENCHMARKS}
    article = next(c for c in outputs["hub"]["cases"] if c["delivery"] == "article")
    on_the_bus = article["crawler_bytes_out_per_s"] / article["crawler_articles_out_per_s"]
    crawler = load_model(None).crawler
    assert crawler.bytes_out_per_feed_per_crawl == pytest.approx(
        crawler.articles_per_feed_per_crawl * on_the_bus)
    cd = outputs["crawl_bandwidth"]["bytes"]["cd"]
    assert crawler.bytes_out_per_feed_per_crawl > 1.5 * cd["out_new_entries"] / cd["fetched"]


def test_an_unknown_version_is_refused_by_name():
    raw = shipped()
    raw["version"] = 3
    with pytest.raises(ModelVersionError, match="model version 3 is not known"):
        decode_model(msgspec.json.encode(raw), "m.json")


def test_a_version_1_model_reads_without_the_version_2_fields():
    raw = shipped()
    raw["version"] = 1
    del raw["workload"]["held_per_answer"], raw["reflector"]["bytes_per_poll_item"]
    model = decode_model(msgspec.json.encode(raw), "old.json")
    assert model.version == 2 and model.workload.held == model.workload.held_per_subscription
    assert model.reflector.bytes_per_poll_item == 0.0
    raw["reflector"]["bytes_per_poll_item"] = 500.0  # a version 1 file cannot have it
    with pytest.raises(ModelError, match=r"reflector\.bytes_per_poll_item is a version 2 field"):
        decode_model(msgspec.json.encode(raw), "old.json")


@pytest.mark.parametrize("change, says", [
    (lambda m: m["filter"].pop("cpu_s_per_article_per_ksubs"), "cpu_s_per_article_per_ksubs"),
    (lambda m: m["crawler"].update(bytes_in_per_feed_per_crawl=-1), "must be >= 0"),
    (lambda m: m["filter"].update(matches_per_article_per_subscription=2), "probability"),
    (lambda m: m["machine"].update(gpu="x"), "gpu"),
])
def test_a_bad_field_is_named(change, says):
    raw = shipped()
    change(raw)
    with pytest.raises(ModelError, match=says):
        decode_model(msgspec.json.encode(raw), "m.json")


def test_not_json_is_one_clear_error():
    with pytest.raises(ModelError, match=r"m\.json: not JSON"):
        decode_model(b"{", "m.json")


def test_encoding_round_trips():
    model = load_model(None)
    assert decode_model(encode_model(model)) == model


def test_calibrate_names_a_missing_benchmark_figure():
    outputs = {name: json.loads((DATA / f"{name}.json").read_text()) for name in BENCHMARKS}
    del outputs["match"]["index_mb"]
    with pytest.raises(ModelError, match="match output has no 'index_mb'"):
        model_from_benchmarks(outputs, load_model(None).machine, {})


PROCESSES_MODEL = (Path(__file__).parents[2] / "src" / "feedmesh" / "provision"
                   / "processes_model.json")


def kept_outputs(*extra: str) -> dict:
    return {name: json.loads((DATA / f"{name}.json").read_text().strip().splitlines()[-1])
            for name in (*BENCHMARKS, *extra)}


def test_the_separate_processes_model_is_calibrates_output_from_kept_outputs():
    model = decode_model(PROCESSES_MODEL.read_bytes(), str(PROCESSES_MODEL))
    sources = {name: f"read from tests/provision/data/{name}.json"
               for name in (*BENCHMARKS, *PROCESS_BENCHMARKS)}
    again = model_from_benchmarks(kept_outputs(*PROCESS_BENCHMARKS), model.machine, sources)
    assert again == model
    hub_model = load_model(None)
    idle = kept_outputs("idle")["idle"]["roles"]
    runs = kept_outputs("distributed")["distributed"]["modes"]
    subs = runs["nats_111"]["subscriptions"]
    for tier in ("crawler", "filter", "reflector"):
        costs = getattr(model, tier)
        # each role's fixed memory is its own idle process's (a working reflector's is more),
        # not the whole hub's
        assert costs.memory_base_bytes >= idle[tier]["rss_mb"] * 2**20
        assert costs.memory_base_bytes < getattr(hub_model, tier).memory_base_bytes
        assert f"{tier}.cpu_s_per_s_base" in model.source
        # CPU: the line through the two runs passes through both measurements
        process = {"crawler": "crawler", "filter": "filter-0", "reflector": "reflector-0"}[tier]
        for run in runs.values():
            if tier == "crawler":
                work = run["fetches_per_s"] * costs.cpu_s_per_feed_per_crawl
            else:
                work = run["articles_per_s"] * (costs.cpu_s_per_article
                                                + costs.cpu_s_per_article_per_ksubs * subs / 1000)
            assert costs.cpu_s_per_s_base + work == pytest.approx(
                run["processes"][process]["cpu_pct"] / 100)
    assert model.crawler.memory_base_bytes == idle["crawler"]["rss_mb"] * 2**20
    # a working process's fixed CPU is at least an idle one's
    assert model.filter.cpu_s_per_s_base >= idle["filter"]["cpu_s_per_s"]
    # an answer is priced per entry held; a pair held costs no memory the runs could see (rows
    # are allocated k wide per subscription)
    assert model.reflector.bytes_per_poll_item > 0
    assert model.reflector.bytes_per_poll_answer > 5 * model.reflector.bytes_per_poll_item
    # what the hub measured as wall time of matching is less than the process's CPU per article
    assert model.filter.cpu_s_per_article > hub_model.filter.cpu_s_per_article
    # the re-matching reflector pays the store of the ids reflector plus the match
    assert model.reflector.cpu_s_per_article > hub_model.filter.cpu_s_per_article
    # bandwidth figures are the crawl's and the hub's, unchanged
    assert (model.crawler.bytes_in_per_feed_per_crawl
            == hub_model.crawler.bytes_in_per_feed_per_crawl)
    assert model.filter.bytes_per_match_message == hub_model.filter.bytes_per_match_message


def test_a_separate_processes_model_needs_both_outputs():
    outputs = kept_outputs("idle")
    with pytest.raises(ModelError, match="needs both --idle and --distributed"):
        model_from_benchmarks(outputs, load_model(None).machine, {})
    outputs = kept_outputs("idle", "distributed")
    outputs["distributed"] = {"modes": {}}
    with pytest.raises(ModelError, match=r"modes\.nats_111"):
        model_from_benchmarks(outputs, load_model(None).machine, {})


def test_the_reflectors_bytes_per_subscription_are_the_hubs_arrays():
    from feedmesh.hub.tiers.subtable import SubTable
    from feedmesh.hub.tiers.topk import TopK
    from feedmesh.provision.calibrate import ROW_BYTES

    assert TopK(1).nbytes() + SubTable(1).nbytes() == ROW_BYTES
    assert TopK(1000).nbytes() + SubTable(1000).nbytes() == ROW_BYTES * 1000
