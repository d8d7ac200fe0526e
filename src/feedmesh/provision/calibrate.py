"""A resource model from feedmesh's own benchmark outputs (their last-line JSON objects).

Pure: the command reads the files (or runs the benchmarks) and the machine's description and
hands the parsed objects here. Which figure comes from which benchmark key is written into the
model's ``source`` (and docs/provisioning.md):

* ``benchmarks/crawl_bandwidth.py``, run ``cd`` (conditional GET, deltas, whole-document and
  per-entry hashes: the real crawler): bytes in and out, new articles, per feed per crawl;
* ``benchmarks/crawl_throughput.py``: seconds per feed (one core, fetch + parse + dedup + store)
  and crawler state per feed;
* ``benchmarks/match.py``: index bytes per subscription; CPU per 61-word article per thousand
  subscriptions;
* ``benchmarks/hub.py``: the filter's match CPU per article on the farm's articles (the part that
  does not grow with subscriptions), the matches per article per subscription, the bytes of one
  matched article filter -> reflector (``article`` delivery, Cobra's final design), the
  reflector's memory per held (subscription, entry) row, the bytes of a private feed answered to
  a reader, and a process's fixed memory.

With the two optional outputs, the model is of a topology of separate processes (``feedmesh
up``), each role's costs in process CPU time rather than the hub's match time:

* ``benchmarks/idle_roles.py`` (``--idle``): each role's fixed CPU and memory, a process with
  nothing to do;
* ``benchmarks/distributed.py --calibration`` (``--distributed``, its ``nats_111`` mode: one
  crawler, one filter, one reflector, a web process, on the model's own workload: 15 farm
  minutes a crawl, 200 fetches a second, ``article`` delivery): each role's CPU per unit of
  work, its process CPU less the fixed part; its memory per subscription and per held (entry,
  subscription) pair as the reflector counts them, its RSS less the fixed part and the re-match
  index; a reader's poll (the reflector's lookups and the web process's render); a private
  feed's bytes as a line in the entries it holds. An older run of ``ids`` delivery (case (a))
  is still read: its reflector then adds the hub's match cost per article.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .errors import ModelError
from .model import (
    MODEL_VERSION,
    CrawlerCosts,
    FilterCosts,
    Machine,
    ReflectorCosts,
    ResourceModel,
    Workload,
)

__all__ = ["BENCHMARKS", "PROCESS_BENCHMARKS", "model_from_benchmarks"]

ROW_BYTES = 45 + 25
"""What a reflector allocates per subscription whatever it holds: k slots of held ids (hub
``TopK``: 45 bytes) and its subscription columns (``SubTable``: 25 bytes). The provisioner sits
below the hub's layer, so the figure is written here; tests/provision/test_model.py checks it
against the hub's arrays."""

BENCHMARKS = {
    "crawl_bandwidth": "benchmarks/crawl_bandwidth.py --feeds 2000 --cycles 3",
    "crawl_throughput": "benchmarks/crawl_throughput.py --feeds 10000 --cycles 3",
    "match": "benchmarks/match.py --subs 1000000 --fewer 4 --naive-articles 0",
    "hub": "benchmarks/hub.py --quick",
}
"""benchmark -> the (quick) command calibrate runs; the same commands reproduce the model."""

PROCESS_BENCHMARKS = {
    "idle": "benchmarks/idle_roles.py",
    "distributed": "benchmarks/distributed.py --calibration",
}
"""Optional, given as files (``--run`` does not run them): a model of separate processes."""


def _get(obj: dict[str, Any], path: str, bench: str) -> float:
    value: Any = obj
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            command = {**BENCHMARKS, **PROCESS_BENCHMARKS}[bench]
            raise ModelError(f"{bench} output has no {path!r}: is it the last line of "
                             f"{command.split()[0]}?")
        value = value[key]
    if not isinstance(value, (int, float)):
        raise ModelError(f"{bench} output: {path!r} is not a number")
    return float(value)


def _hub_case(hub: dict[str, Any], delivery: str) -> dict[str, Any]:
    for case in hub.get("cases", []):
        if case.get("delivery") == delivery:
            return case
    raise ModelError(f"hub output has no case with delivery {delivery!r} (run benchmarks/hub.py "
                     "--quick: it runs both)")


def model_from_benchmarks(outputs: dict[str, dict[str, Any]], machine: Machine,
                          sources: dict[str, str], workload: Workload | None = None
                          ) -> ResourceModel:
    """``outputs``: benchmark name (keys of BENCHMARKS) -> its last-line JSON; ``sources``: the
    same names -> where that output came from (a file, a run), quoted in the model."""
    workload = workload or Workload()
    missing = sorted(set(BENCHMARKS) - set(outputs))
    if missing:
        raise ModelError(f"calibrate needs the output of {', '.join(missing)}")
    bw, tp, match, hub = (outputs[k] for k in ("crawl_bandwidth", "crawl_throughput", "match",
                                                "hub"))
    fetches = _get(bw, "bytes.cd.fetched", "crawl_bandwidth")
    if fetches <= 0:
        raise ModelError("crawl_bandwidth output: no fetch in run cd")
    subs = _get(match, "subs", "match")
    index_per_sub = (_get(match, "index_mb", "match") + _get(match, "vocabulary_mb", "match")) \
        * 2**20 / subs
    bench_cpu_per_ksub = 1 / _get(match, "articles_per_cpu_s_61", "match") / (subs / 1000)

    ids, article = _hub_case(hub, "ids"), _hub_case(hub, "article")
    hub_subs = _get(article, "subscriptions", "hub")
    hub_feeds = _get(article, "feeds", "hub")
    filter_articles = _get(ids, "filter_articles_in_per_s", "hub")
    if filter_articles <= 0:
        raise ModelError("hub output: no article reached the filter in the window")
    # Matching costs a part per article (decode, tokenize, send: the hub's match time on the
    # farm's articles at its few subscriptions) and a part per subscription (the index at 1M
    # subscriptions, 61-word articles): two points, two terms.
    hub_cpu_per_article = _get(ids, "match_cpu_s_per_s", "hub") / filter_articles
    cpu_per_ksub = bench_cpu_per_ksub
    cpu_per_article = max(0.0, hub_cpu_per_article - cpu_per_ksub * hub_subs / 1000)
    p = _get(ids, "matches_per_s", "hub") / filter_articles / hub_subs
    message = (_get(article, "filter_bytes_out_per_s", "hub")
               / _get(article, "filter_articles_out_per_s", "hub"))
    # What a crawler sends is its new articles as the bus carries them (each packed with its
    # tokens, about twice the entry's own encoding that crawl_bandwidth.py counts): the hub's
    # crawler -> filter bytes per article, at crawl_bandwidth's articles per crawl.
    crawler_articles = _get(article, "crawler_articles_out_per_s", "hub")
    if crawler_articles <= 0:
        raise ModelError("hub output: the crawler sent no article in the window")
    article_message = _get(article, "crawler_bytes_out_per_s", "hub") / crawler_articles
    articles_per_crawl = _get(bw, "bytes.cd.new", "crawl_bandwidth") / fetches
    reflector_bytes = _get(article, "reflector_mb", "hub") * 2**20
    k = workload.held_per_subscription
    # Every subscription holds k entries by the end of the window (each article matched ~1% of
    # them, hundreds of articles a second): what the reflector holds beyond its index and its
    # SQLite caches (2 x 2 MB), per held row.
    per_row = max(0.0, reflector_bytes - hub_subs * index_per_sub - 4 * 2**20) / (hub_subs * k)
    state_per_feed = _get(tp, "state_bytes_per_feed", "crawl_throughput")
    # What a hub process holds beyond the reflector, the index and the feeds' state: libraries,
    # the JIT's code, SQLite caches. Every service is its own process, so each pays it.
    base = max(0.0, _get(article, "hub_rss_mb", "hub") * 2**20 - reflector_bytes
               - hub_subs * index_per_sub - hub_feeds * state_per_feed)

    def cite(bench: str, keys: str) -> str:
        command = {**BENCHMARKS, **PROCESS_BENCHMARKS}[bench]
        return f"{command} -> {keys} ({sources.get(bench, 'given')})"

    source = {
        "crawler.bytes_in_per_feed_per_crawl": cite("crawl_bandwidth", "bytes.cd.in / "
                                                    "bytes.cd.fetched"),
        "crawler.bytes_out_per_feed_per_crawl": cite("crawl_bandwidth", "bytes.cd.new / "
                                                     "bytes.cd.fetched") + " x " + cite(
            "hub", "cases[article].crawler_bytes_out_per_s / crawler_articles_out_per_s (an "
                   "article as the bus carries it, packed with its tokens)"),
        "crawler.articles_per_feed_per_crawl": cite("crawl_bandwidth", "bytes.cd.new / "
                                                    "bytes.cd.fetched"),
        "crawler.cpu_s_per_feed_per_crawl": cite("crawl_throughput", "1 / feeds_per_s (steady "
                                                 "cycles, one core: an upper bound on CPU)"),
        "crawler.memory_bytes_per_feed": cite("crawl_throughput", "state_bytes_per_feed"),
        "filter.cpu_s_per_article_per_ksubs": cite("match", "1 / articles_per_cpu_s_61 / "
                                                   "(subs / 1000)"),
        "filter.cpu_s_per_article": cite("hub", "cases[ids].match_cpu_s_per_s / "
                                         "filter_articles_in_per_s - the per-ksubs part at its "
                                         "subscriptions"),
        "filter.memory_bytes_per_subscription": cite("match", "(index_mb + vocabulary_mb) / "
                                                     "subs"),
        "filter.matches_per_article_per_subscription": cite(
            "hub", "cases[ids].matches_per_s / filter_articles_in_per_s / subscriptions"),
        "filter.bytes_per_match_message": cite("hub", "cases[article].filter_bytes_out_per_s / "
                                               "filter_articles_out_per_s"),
        "reflector.cpu_s_per_article_per_ksubs": "= filter's (the reflector re-matches, "
                                                 "Cobra's final design; top-k insertion not "
                                                 "counted)",
        "reflector.cpu_s_per_article": "= filter's",
        "reflector.memory_bytes_per_subscription": "= filter.memory_bytes_per_subscription (its "
                                                   "re-match index)",
        "reflector.memory_bytes_per_held_entry": cite(
            "hub", "(cases[article].reflector_mb - subscriptions * index per subscription - "
                   f"4 MB of SQLite caches) / (subscriptions * k={k})"),
        "reflector.bytes_per_poll_answer": cite("hub", "cases[article].feed_200_wire_bytes "
                                                "(a private feed answered 200, gzip, with its "
                                                "headers; every poll assumed to find news)"),
        "memory_base_bytes": cite("hub", "cases[article].hub_rss_mb - reflector_mb - index - "
                                         "feeds * crawler state (one process's fixed memory)"),
        "workload": "Cobra: 15-minute crawls, readers polling every 30 minutes, k = 10",
        "cpu_s_per_s_base": "0: not measured (give --idle: the hub is one process)",
        "reflector.cpu_s_per_poll": "0: not measured (give --distributed with its poll phase)",
        "reflector.bytes_per_poll_item": "0: not measured (give --distributed with its answer "
                                         "fit): every answer is taken as a full feed",
    }
    model = ResourceModel(
        version=MODEL_VERSION, machine=machine, workload=workload,
        crawler=CrawlerCosts(
            bytes_in_per_feed_per_crawl=_get(bw, "bytes.cd.in", "crawl_bandwidth") / fetches,
            bytes_out_per_feed_per_crawl=articles_per_crawl * article_message,
            articles_per_feed_per_crawl=articles_per_crawl,
            cpu_s_per_feed_per_crawl=1 / _get(tp, "feeds_per_s", "crawl_throughput"),
            memory_bytes_per_feed=state_per_feed,
            memory_base_bytes=base),
        filter=FilterCosts(
            cpu_s_per_article=cpu_per_article,
            cpu_s_per_article_per_ksubs=cpu_per_ksub,
            memory_bytes_per_subscription=index_per_sub,
            memory_base_bytes=base,
            matches_per_article_per_subscription=p,
            bytes_per_match_message=message),
        reflector=ReflectorCosts(
            cpu_s_per_article=cpu_per_article,
            cpu_s_per_article_per_ksubs=cpu_per_ksub,
            memory_bytes_per_subscription=index_per_sub,
            memory_bytes_per_held_entry=per_row,
            memory_base_bytes=base,
            bytes_per_poll_answer=_get(article, "feed_200_wire_bytes", "hub")),
        source=source)
    if "idle" in outputs or "distributed" in outputs:
        if not ("idle" in outputs and "distributed" in outputs):
            raise ModelError("a model of separate processes needs both --idle and "
                             "--distributed (the fixed part and the part per unit of work)")
        return _separate_processes(model, outputs["idle"], outputs["distributed"], ids, article,
                                   cite)
    return model


def _separate_processes(model: ResourceModel, idle: dict[str, Any], distributed: dict[str, Any],
                        ids: dict[str, Any], article: dict[str, Any], cite: Any
                        ) -> ResourceModel:
    """The hub-measured model, with each role's costs as a process of its own measures them."""
    run = distributed.get("modes", {}).get("nats_111")
    if not isinstance(run, dict) or "processes" not in run:
        raise ModelError("distributed output has no modes.nats_111 with its processes (run "
                         "benchmarks/distributed.py --quick --skip filters,kills)")
    k = model.workload.held_per_subscription
    feeds = _get(run, "feeds", "distributed")
    subs = _get(run, "subscriptions", "distributed")
    articles = _get(run, "articles_per_s", "distributed")
    if articles <= 0 or feeds <= 0 or subs <= 0:
        raise ModelError("distributed output: no article flowed in mode nats_111")
    interval = _get(run, "crawl_interval_s", "distributed")
    # the fetches it made (a loaded machine fetches fewer than feeds / interval asks)
    fetched = run.get("fetches_per_s") or feeds / interval

    def fixed(role: str) -> tuple[float, float]:
        return (_get(idle, f"roles.{role}.cpu_s_per_s", "idle"),
                _get(idle, f"roles.{role}.rss_mb", "idle") * 2**20)

    def busy(process: str) -> tuple[float, float]:
        return (_get(run, f"processes.{process}.cpu_pct", "distributed") / 100,
                _get(run, f"processes.{process}.rss_mb", "distributed") * 2**20)

    c, f, r = model.crawler, model.filter, model.reflector
    (c_cpu0, c_mem0), (f_cpu0, f_mem0), (r_cpu0, r_mem0) = (fixed(x) for x in
                                                            ("crawler", "filter", "reflector"))
    c_cpu, _ = busy("crawler")
    f_cpu, f_mem = busy("filter-0")
    r_cpu, r_mem = busy("reflector-0")
    per_ksub = f.cpu_s_per_article_per_ksubs
    filter_per_article = max(0.0, (f_cpu - f_cpu0) / articles - per_ksub * subs / 1000)
    rematch_per_sub = max(0.0, (_get(article, "hub_rss_mb", "hub")
                                - _get(ids, "hub_rss_mb", "hub")) * 2**20
                          / _get(article, "subscriptions", "hub"))
    rematching = run.get("delivery") == "article"
    if rematching:  # measured as the model describes it: the reflector re-matches
        reflector_per_article = max(0.0, (r_cpu - r_cpu0) / articles - per_ksub * subs / 1000)
        index_bytes = rematch_per_sub * subs
    else:  # what the ids reflector spends per article, plus matching it
        reflector_per_article = max(0.0, (r_cpu - r_cpu0) / articles) + f.cpu_s_per_article
        index_bytes = 0.0
    # A second run at a lower rate (the same subscriptions): each role's CPU is then the line
    # through the two, a working process's fixed part and a part per unit of work, instead of
    # the idle process's CPU and one ratio.
    low = distributed.get("modes", {}).get("nats_111_low")
    lines: dict[str, tuple[float, float]] = {}
    if isinstance(low, dict) and "processes" in low:
        if _get(low, "subscriptions", "distributed") != subs:
            raise ModelError("distributed output: modes.nats_111_low has other subscriptions "
                             "than modes.nats_111")
        low_fetched = low.get("fetches_per_s") or _get(low, "feeds", "distributed") / _get(
            low, "crawl_interval_s", "distributed")
        low_articles = _get(low, "articles_per_s", "distributed")
        for process, x1, x0 in (("crawler", fetched, low_fetched),
                                ("filter-0", articles, low_articles),
                                ("reflector-0", articles, low_articles)):
            if x1 <= x0:
                raise ModelError(f"distributed output: modes.nats_111_low's {process} did no "
                                 "less work than modes.nats_111's: no line through the two")
            y1 = _get(run, f"processes.{process}.cpu_pct", "distributed") / 100
            y0 = _get(low, f"processes.{process}.cpu_pct", "distributed") / 100
            slope = max(0.0, (y1 - y0) / (x1 - x0))
            lines[process] = (max(0.0, y1 - slope * x1), slope)
        c_cpu0, crawler_per_fetch = lines["crawler"]
        f_cpu0, slope = lines["filter-0"]
        filter_per_article = max(0.0, slope - per_ksub * subs / 1000)
        if rematching:
            r_cpu0, slope = lines["reflector-0"]
            reflector_per_article = max(0.0, slope - per_ksub * subs / 1000)
    else:
        crawler_per_fetch = max(0.0, c_cpu - c_cpu0) / fetched
    # the (subscription, entry) pairs the reflector held (full feeds if the run did not say)
    held = run.get("held_per_subscription") or k
    per_held_entry = max(0.0, r_mem - r_mem0 - index_bytes) / (subs * held)
    memory_line = False
    if lines and rematching and low.get("held_per_subscription"):
        # Two runs holding different numbers of pairs: the memory a pair adds is the slope
        # (rows are allocated k wide per subscription, so it is small), and what the working
        # process holds beyond its index and its pairs is fixed (the compiled matcher, the
        # bus's and the store's buffers), as its CPU's intercept is.
        pairs1, pairs0 = held * subs, low["held_per_subscription"] * subs
        if pairs1 > pairs0:
            memory_line = True
            r_mem_low = _get(low, "processes.reflector-0.rss_mb", "distributed") * 2**20
            per_held_entry = max(0.0, (r_mem - r_mem_low) / (pairs1 - pairs0))
            rematch_per_sub += ROW_BYTES
            r_mem0 = max(r_mem0, r_mem - rematch_per_sub * subs - per_held_entry * pairs1)
    fit = run.get("feed_answer_fit")
    fitted = isinstance(fit, dict) and _get(fit, "bytes_per_item", "distributed") > 0
    # Readers' polls: the reflector's lookups and the web process's render and send, per poll,
    # beyond what the two spend on the article stream meanwhile (distributed.py's poll phase).
    polled = run.get("poll_phase")
    per_poll = 0.0
    if isinstance(polled, dict):
        per_poll = (_get(polled, "reflector_cpu_s_per_poll", "distributed")
                    + _get(polled, "web_cpu_s_per_poll", "distributed"))
    source = dict(model.source)
    source.pop("memory_base_bytes", None)
    source.pop("cpu_s_per_s_base", None)
    for tier in ("crawler", "filter", "reflector"):
        source[f"{tier}.cpu_s_per_s_base"] = cite("idle", f"roles.{tier}.cpu_s_per_s "
                                                  "(process CPU time, nothing to do)")
        source[f"{tier}.memory_base_bytes"] = cite("idle", f"roles.{tier}.rss_mb")
    nats = "modes.nats_111.processes"
    source.update({
        "crawler.cpu_s_per_feed_per_crawl": cite(
            "distributed", f"({nats}.crawler.cpu_pct / 100 - the idle crawler's) / "
            "modes.nats_111.fetches_per_s (else feeds / crawl_interval_s): process CPU time per "
            "feed fetched (its articles included)"),
        "filter.cpu_s_per_article": cite(
            "distributed", f"({nats}.filter-0.cpu_pct / 100 - the idle filter's) / "
            "articles_per_s - the per-ksubs part at its subscriptions: process CPU time per "
            "article (decoding, matching, publishing, acknowledging)"),
        "filter.memory_bytes_per_subscription": cite(
            "distributed", f"({nats}.filter-0.rss_mb - the idle filter's) / subscriptions: the "
            "index and what the process keeps to build it"),
        "reflector.cpu_s_per_article": cite(
            "distributed", f"({nats}.reflector-0.cpu_pct / 100 - the idle reflector's) / "
            "articles_per_s - the per-ksubs part at its subscriptions (article delivery: "
            "re-matching, storing)") if rematching else cite(
            "distributed", f"({nats}.reflector-0.cpu_pct / 100 - the idle reflector's) / "
            "articles_per_s (storing, ids delivery) + the hub's match CPU per article "
            "(filter.cpu_s_per_article of the hub-measured model: the re-match)"),
        "reflector.memory_bytes_per_subscription": cite(
            "hub", "(cases[article].hub_rss_mb - cases[ids].hub_rss_mb) / subscriptions: the "
            "re-match index and its queries"),
        "reflector.memory_bytes_per_held_entry": cite(
            "distributed", f"({nats}.reflector-0.rss_mb - the idle reflector's - the re-match "
            "index) / (subscriptions * modes.nats_111.held_per_subscription): per pair held")
        if rematching else cite(
            "distributed", f"({nats}.reflector-0.rss_mb - the idle reflector's) / "
            f"(subscriptions * k={k}) (an ids reflector holds no index)"),
        "reflector.cpu_s_per_poll": cite(
            "distributed", "modes.nats_111.poll_phase: (reflector_cpu_s_per_poll + "
            "web_cpu_s_per_poll): a reader's poll that finds news, the reflector's lookups and "
            "the web process's render and send, beyond their CPU for the article stream")
        if isinstance(polled, dict) else "not measured (the distributed output has no "
        "poll_phase): 0",
    })
    if lines:
        both = ("the line through modes.nats_111 and modes.nats_111_low (two rates): "
                "processes.{}.cpu_pct / 100 against {}")
        for tier, process, unit in (("crawler", "crawler", "fetches_per_s"),
                                    ("filter", "filter-0", "articles_per_s"),
                                    ("reflector", "reflector-0", "articles_per_s")):
            if tier == "reflector" and not rematching:
                continue
            source[f"{tier}.cpu_s_per_s_base"] = cite(
                "distributed", "its intercept: a working process's fixed CPU; " +
                both.format(process, unit))
        source["crawler.cpu_s_per_feed_per_crawl"] = cite(
            "distributed", "its slope: process CPU time per feed fetched (its articles "
            "included); " + both.format("crawler", "fetches_per_s"))
        source["filter.cpu_s_per_article"] = cite(
            "distributed", "its slope less the per-ksubs part at its subscriptions; " +
            both.format("filter-0", "articles_per_s"))
        if rematching:
            source["reflector.cpu_s_per_article"] = cite(
                "distributed", "its slope less the per-ksubs part at its subscriptions "
                "(article delivery: re-matching, storing); " +
                both.format("reflector-0", "articles_per_s"))
    if memory_line:
        source["reflector.memory_bytes_per_held_entry"] = cite(
            "distributed", "(processes.reflector-0.rss_mb of modes.nats_111 - of "
            "modes.nats_111_low) / the difference of their pairs held (held_per_subscription "
            "* subscriptions), 0 if it shrank")
        source["reflector.memory_base_bytes"] = cite(
            "distributed", "modes.nats_111.processes.reflector-0.rss_mb - subscriptions * "
            "memory_bytes_per_subscription - the pairs held * memory_bytes_per_held_entry: a "
            "working reflector's fixed memory (at least the idle one's)")
        source["reflector.memory_bytes_per_subscription"] = cite(
            "hub", "(cases[article].hub_rss_mb - cases[ids].hub_rss_mb) / subscriptions: the "
            f"re-match index and its queries; + {ROW_BYTES} bytes: the reflector's rows of k "
            "held ids and its subscription columns, allocated per subscription")
    if fitted:
        source["reflector.bytes_per_poll_answer"] = cite(
            "distributed", "modes.nats_111.feed_answer_fit.bytes_at_k: 100 private feeds "
            "answered 200 (gzip, headers included), bytes as a line in the entries each held, "
            f"at k={k}")
        source["reflector.bytes_per_poll_item"] = cite(
            "distributed", "modes.nats_111.feed_answer_fit.bytes_per_item: that line's slope")
    return msgspec.structs.replace(
        model,
        crawler=msgspec.structs.replace(
            c, cpu_s_per_s_base=c_cpu0, memory_base_bytes=c_mem0,
            cpu_s_per_feed_per_crawl=crawler_per_fetch),
        filter=msgspec.structs.replace(
            f, cpu_s_per_s_base=f_cpu0, memory_base_bytes=f_mem0,
            cpu_s_per_article=filter_per_article,
            memory_bytes_per_subscription=max(0.0, f_mem - f_mem0) / subs),
        reflector=msgspec.structs.replace(
            r, cpu_s_per_s_base=r_cpu0, memory_base_bytes=r_mem0,
            cpu_s_per_article=reflector_per_article,
            memory_bytes_per_subscription=rematch_per_sub,
            memory_bytes_per_held_entry=per_held_entry,
            cpu_s_per_poll=per_poll,
            **({"bytes_per_poll_answer": _get(fit, "bytes_at_k", "distributed"),
                "bytes_per_poll_item": _get(fit, "bytes_per_item", "distributed")}
               if fitted else {})),
        source=source)
