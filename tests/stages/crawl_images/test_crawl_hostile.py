"""crawl_images against a hostile web (issue 15), all on 127.0.0.1 (tests/stages/crawl_images/hostile_web.py):
parallel partitions, the URL guard, time and size bounds, robots.txt (RFC 9309) and X-Robots-Tag,
deterministic outputs, candidates kept on the way in, the format policy, and retry rules."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import tracemalloc
from pathlib import Path

import pandas as pd
import pytest
import yaml
from PIL import Image

from gavil.io import validate
from gavil.params import parse_params
from gavil.pipeline import catalog
from gavil.pipeline.runner import run_stage
from schemas.crawl import Candidates, Images
from stages.crawl_images import crawl
from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.journal import Journal, reusable
from stages.crawl_images.liveness import held
from stages.crawl_images.stage import reduce, work
from stages.crawl_images.store import clean_store, staging
from stages.crawl_images.urlguard import address_problem, candidate_url, redact
from tests.helpers import IMAGES, ROOT
from tests.stages.crawl_images.hostile_web import (
    FakeDns,
    HostileWeb,
    SilentServer,
    Trickle,
    endless,
    fail_first,
    flat,
    gzip_bomb,
    gzipped,
    picture,
    redirect,
    self_signed,
    send,
    serve,
)

STORE = Path(catalog.entry("image_store").path)
JOURNAL = Path(catalog.entry("crawl_journal").path)
BASE = {
    "source": "urllist",
    "urllist_path": "map.json",
    "top_n": 10,
    "threads": 4,
    "timeout_s": 3,
    "deadline_s": 20,
    "retries": 1,
    "backoff_s": 0.02,
    "max_retry_after_s": 5,
    "per_host": {"max_connections": 4, "delay_s": 0.0},
    "user_agent": "winogavil-pipeline/test (research crawler)",
    "respect_robots": False,
    "allow_private_hosts": True,
    "bing": {"endpoint": "http://127.0.0.1:9/none"},
    "greedy": {"url_template": "http://127.0.0.1:9/{concept}"},
}


def params(**over):
    return parse_params({"crawl": {**BASE, **over}})


def cf(*concepts):
    return pd.DataFrame({"concept": list(concepts), "status": ["ok"] * len(concepts), "reason": [None] * len(concepts)})


def run(url_map: dict, p=None, **over):
    """Crawl ``url_map`` (concept -> URL or [URLs]) from the current directory; (candidates, images by concept)."""
    Path("map.json").write_text(json.dumps(url_map))
    cands, images = crawl(cf(*url_map), p or params(**over))
    return validate(cands, Candidates), validate(images, Images).set_index("concept")


@pytest.fixture
def web():
    w = HostileWeb()
    try:
        yield w
    finally:
        w.close()


def _tables(d: Path) -> dict[str, bytes]:
    return {n: (d / catalog.entry(n).path).read_bytes() for n in ("candidates", "images")}


def _stage_run(d: Path, url_map: dict, p) -> dict[str, bytes]:
    """The whole stage (plan, work, reduce) in project folder ``d``; returns the tables' bytes."""
    d.mkdir(parents=True, exist_ok=True)
    cwd = os.getcwd()
    os.chdir(d)
    try:
        Path("map.json").write_text(json.dumps(url_map))
        catalog.write_table(cf(*url_map), "concept_filter")
        run_stage("crawl_images", p)
    finally:
        os.chdir(cwd)
    return _tables(d)


# ============================================================================ 1. parallel partitions
HOLD_STAGING = """
import sys, time
sys.path.insert(0, {root!r})
from pathlib import Path
from stages.crawl_images.store import staging
with staging(Path("store")) as d:
    (d / "half.part").write_bytes(b"x")
    print(d.name, flush=True)
    time.sleep(60)
"""


def test_clean_store_removes_only_staging_no_live_run_holds(in_tmp):
    store = in_tmp / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD_STAGING.format(root=str(ROOT))], cwd=in_tmp, stdout=subprocess.PIPE, text=True
    )
    try:
        other = store / proc.stdout.readline().strip()  # another process's live staging
        with staging(store) as mine:  # this thread's
            dead = store / ".staging-1-dead"  # a killed run's: its lock file is free
            dead.mkdir()
            (dead / ".lock").touch()
            (dead / "1.part").write_bytes(b"half")
            assert clean_store(store) == [".staging-1-dead"]
            assert (other / "half.part").exists() and mine.exists() and held(other / ".lock")
        assert not mine.exists()
        os.kill(proc.pid, signal.SIGKILL)  # the owner dies: its lock goes with it
        proc.wait()
        assert clean_store(store) == [other.name] and not other.exists()
    finally:
        proc.kill()
        proc.wait()


class Pace:
    """Slow images hold their second half until :meth:`release_when_staging_dirs` (at most ``hold`` seconds), so a
    test can make sure one partition is mid-download while another starts; ``hold = 0``: no wait."""

    def __init__(self) -> None:
        self.hold = 0.0
        self.released = threading.Event()

    def release_when_staging_dirs(self, store: Path, n: int, timeout: float = 20) -> set[str]:
        """Release once ``n`` distinct staging folders were seen in ``store`` (each run makes one
        after cleaning the store), or after ``timeout`` seconds; returns the names seen."""
        seen: set[str] = set()
        end = time.monotonic() + timeout
        while len(seen) < n and time.monotonic() < end:
            seen |= {d.name for d in store.glob(".staging-*")} if store.is_dir() else set()
            time.sleep(0.005)
        self.released.set()
        return seen


PACE = Pace()


@pytest.fixture
def pace():
    PACE.hold, PACE.released = 0.0, threading.Event()
    yield PACE
    PACE.released.set()
    PACE.hold = 0.0


def _slow_images(web: HostileWeb, n: int) -> dict[str, str]:
    """``n`` concepts, each with one distinct image, its second half held back by :data:`PACE`."""

    def half_then_rest(body: bytes):
        def fn(req):
            req.send_response(200)
            req.send_header("Content-Length", str(len(body)))
            req.end_headers()
            req.wfile.write(body[: len(body) // 2])
            req.wfile.flush()
            if PACE.hold:
                PACE.released.wait(PACE.hold)
            req.wfile.write(body[len(body) // 2 :])

        return fn

    for i in range(n):
        web.routes[f"/img/{i}.jpg"] = half_then_rest(picture(i))
    return {f"concept {i:02d}": f"{web.base}/img/{i}.jpg" for i in range(n)}


def _project(d: Path, url_map: dict, p) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "map.json").write_text(json.dumps(url_map))
    (d / "params.json").write_text(json.dumps({"crawl": p.crawl.model_dump()}))
    cwd = os.getcwd()
    os.chdir(d)
    try:
        catalog.write_table(cf(*url_map), "concept_filter")
    finally:
        os.chdir(cwd)


def test_partitions_in_threads_never_destroy_each_others_downloads(in_tmp, web, monkeypatch, pace):
    url_map = _slow_images(web, 12)
    p = params(threads=2, partition_size=6, timeout_s=30, deadline_s=60)
    baseline = _stage_run(in_tmp / "seq", url_map, p)
    d = in_tmp / "threads"
    _project(d, url_map, p)
    monkeypatch.chdir(d)
    concepts = sorted(url_map)
    pace.hold = 20
    results: list = [None, None]
    a = threading.Thread(target=lambda: results.__setitem__(0, work(p, concepts[:6])))
    a.start()  # partition A downloads into its staging, the second halves held back ...
    while web.total() == 0:
        time.sleep(0.005)
    b = threading.Thread(target=lambda: results.__setitem__(1, work(p, concepts[6:])))
    b.start()  # ... while partition B starts and cleans the store
    assert len(pace.release_when_staging_dirs(d / STORE, 2)) == 2
    a.join()
    b.join()
    reduce(p, results)
    assert _tables(d) == baseline
    images = pd.read_parquet(catalog.entry("images").path)
    assert (images["status"] == "ok").all() and not list((d / STORE).glob(".*staging*"))


TWO_PROCS = """
import json, shutil, sys
sys.path.insert(0, {root!r})
from gavil.params import parse_params
from gavil.pipeline.runner import run_stage
run_stage("crawl_images", parse_params(json.loads(open("params.json").read())))
for n in ("candidates", "images"):
    shutil.copy(f"data/crawl/{{n}}.parquet", f"{{n}}-{{sys.argv[1]}}.parquet")
"""


def test_two_processes_a_second_apart_give_the_sequential_fates(in_tmp, web, pace):
    url_map = _slow_images(web, 8)
    p = params(threads=2, timeout_s=30, deadline_s=60)
    baseline = _stage_run(in_tmp / "seq", url_map, p)
    d = in_tmp / "two"
    _project(d, url_map, p)
    script = TWO_PROCS.format(root=str(ROOT))
    pace.hold = 30
    first = subprocess.Popen([sys.executable, "-c", script, "1"], cwd=d)
    while web.total() == 0 and first.poll() is None:  # the first is downloading, halves held back ...
        time.sleep(0.01)
    time.sleep(1.0)
    second = subprocess.Popen([sys.executable, "-c", script, "2"], cwd=d)  # ... when the second starts
    assert len(pace.release_when_staging_dirs(d / STORE, 2, timeout=60)) == 2
    assert first.wait(120) == 0 and second.wait(120) == 0
    for i in ("1", "2"):
        assert {n: (d / f"{n}-{i}.parquet").read_bytes() for n in ("candidates", "images")} == baseline, i


def test_journal_compaction_leaves_live_writers_alone(in_tmp):
    live, done = Journal(in_tmp / "j"), Journal(in_tmp / "j")
    live.append({"kind": "download", "url": "u1", "status": "kept"})
    for i in range(3):
        done.append({"kind": "download", "url": f"d{i}", "status": "kept"})
    done.close()
    other = Journal(in_tmp / "j")
    other.append({"kind": "download", "url": "o1", "status": "kept"})
    other.close()
    Journal(in_tmp / "j").compact()  # another partition's reduce, while `live` still writes
    live.append({"kind": "download", "url": "u2", "status": "kept"})
    live.close()
    _, downloads = Journal(in_tmp / "j").load()
    assert set(downloads) == {"u1", "u2", "d0", "d1", "d2", "o1"}
    assert len(list((in_tmp / "j").glob("seg-*.jsonl"))) == 2  # the live one, and the merged one


@pytest.mark.slow
def test_prefect_flow_with_concurrent_partitions_loses_nothing(in_tmp, web, monkeypatch, pace):
    from prefect.testing.utilities import prefect_test_harness

    from flows.build import run_flow

    url_map = _slow_images(web, 12)
    p = params(threads=2, partition_size=2, timeout_s=30, deadline_s=60)
    baseline = _stage_run(in_tmp / "seq", url_map, p)
    d = in_tmp / "flow"
    _project(d, url_map, p)
    monkeypatch.chdir(d)
    raw = yaml.safe_load((ROOT / "params.yaml").read_text())  # every key: a params.yaml must hold them all
    raw["crawl"] = p.crawl.model_dump()
    raw["prefect"]["task_runner"] = {"kind": "thread", "threads": 6}
    Path("params.yaml").write_text(yaml.safe_dump(raw, sort_keys=False))
    pace.hold = 20
    release = threading.Thread(target=pace.release_when_staging_dirs, args=(d / STORE, 3, 60))
    release.start()  # the first partitions' downloads wait until three partitions have started
    with prefect_test_harness(server_startup_timeout=120):
        result = run_flow(only=["crawl_images"], use_dvc=False)
    release.join()
    assert result["crawl_images"]["by_status"] == {"ok": 12}
    assert json.loads(Path("data/metrics/timings/crawl_images.json").read_text())["partitions"] == 6
    assert _tables(d) == baseline


# ============================================================================ 2. the URL guard
def test_ambiguous_urls_are_refused_and_never_fetched(in_tmp, web):
    web.routes["/x.jpg"] = serve(picture(1))
    host = f"127.0.0.1:{web.port}"
    url_map = {
        "backslash": f"http://{host}\\@public.example/x.jpg",  # urlparse: host public.example; urllib3: 127.0.0.1
        "backslash path": f"http://{host}/a\\..\\x.jpg",
        "userinfo": f"http://alice:hunter2@{host}/x.jpg",
        "space": f"http://{host}/x .jpg",
        "tab": f"http://{host}/x\t.jpg",
        "newline": f"http://{host}/x.jpg\nHost: evil",
        "nul": f"http://{host}/x\x00.jpg",
        "del": f"http://{host}/x\x7f.jpg",
        "bad port": "http://127.0.0.1:99999/x.jpg",
        "bad ipv6": "http://[::1/x.jpg",
        "no host": "http:///x.jpg",
        "relative": "/x.jpg",
        "gopher": f"gopher://{host}/x.jpg",
        "too long": f"http://{host}/x.jpg?" + "a" * 5000,
        "fine": f"http://{host}/x.jpg",
    }
    for allow_private in (True, False):  # ambiguity is refused whatever the address policy
        cands, df = run(url_map, allow_private_hosts=allow_private)
        refused = df.drop(index="fine")
        assert (refused["status"] == "refused_url").all(), refused[["status", "reason"]]
        assert df.loc["fine", "status"] == ("ok" if allow_private else "refused_url")
    assert web.n("/x.jpg") == 1  # only "fine", only when private hosts were allowed
    why = df["reason"].to_dict()
    assert (
        "credentials" in why["backslash"] and "backslash" in why["backslash path"] and "credentials" in why["userinfo"]
    )
    assert "whitespace or a control character" in why["space"] and "U+0000" in why["nul"]
    assert "malformed" in why["bad port"] and "malformed" in why["bad ipv6"] and "scheme 'gopher'" in why["gopher"]
    records = [r for seg in (in_tmp / JOURNAL).glob("*.jsonl") for r in map(json.loads, seg.read_text().splitlines())]
    assert all(not r["transient"] for r in records if r["url"] != url_map["fine"])  # permanent: not retried


def test_credentials_are_never_stored(in_tmp, web):
    web.routes["/x.jpg"] = serve(picture(1))
    web.routes["/hop"] = redirect(f"http://bob:swordfish@127.0.0.1:{web.port}/x.jpg")
    web.routes["/search"] = serve(
        f"""<div class="imgpt"><a m='{{"murl":"http://carol:opensesame@127.0.0.1:{web.port}/x.jpg"}}'>x</a></div>""".encode(),
        "text/html",
    )
    url_map = {"user": f"http://alice:hunter2@127.0.0.1:{web.port}/x.jpg", "hop": f"{web.base}/hop"}
    _stage_run(in_tmp / "a", url_map, params())
    _stage_run(in_tmp / "b", {"bing": ""}, params(source="bing", bing={"endpoint": f"{web.base}/search"}))
    for d in ("a", "b"):
        for f in (in_tmp / d / "data").rglob("*"):
            if f.is_file():
                data = f.read_bytes()
                for secret in (b"hunter2", b"swordfish", b"opensesame", b"alice", b"bob:", b"carol"):
                    assert secret not in data, (f, secret)
    cands = pd.read_parquet(in_tmp / "a" / catalog.entry("candidates").path).set_index("concept")
    assert cands.loc["user", "url"] == f"http://***@127.0.0.1:{web.port}/x.jpg"
    assert cands.loc["user", "status"] == cands.loc["hop", "status"] == "refused_url"
    assert web.n("/x.jpg") == 0
    assert redact("http://u:p@h\\@x/") == "http://***@x/" and redact("https://h/p@q") == "https://h/p@q"


def test_addresses_that_are_not_global_are_refused(in_tmp, web, monkeypatch):
    web.routes["/x.jpg"] = serve(picture(1))
    port = web.port
    dns = FakeDns(
        monkeypatch,
        {
            "cgnat.test": [["100.100.100.200"]],
            "metadata.test": [["169.254.169.254"]],
            "mapped.test": [["::ffff:10.0.0.1"]],
            "sixtofour.test": [["2002:7f00:1::"]],
            "nat64.test": [["64:ff9b::7f00:1"]],
            "multicast.test": [["224.0.0.251"]],
            "sitelocal.test": [["fec0::1"]],
            "mixed.test": [["93.184.216.34", "10.1.2.3"]],
        },
        route={},
    )
    disguised = [
        f"http://2130706433:{port}/x.jpg",
        f"http://0x7f.0.0.1:{port}/x.jpg",
        f"http://0177.0.0.1:{port}/x.jpg",
        f"http://127.1:{port}/x.jpg",
        f"http://0:{port}/x.jpg",
        f"http://localhost:{port}/x.jpg",
        f"http://[::ffff:127.0.0.1]:{port}/x.jpg",
        f"http://[::1]:{port}/x.jpg",
        f"http://[fe80::1%25lo]:{port}/x.jpg",
        "http://100.100.100.200/latest/meta-data/",
        *[f"http://{h}:{port}/x.jpg" for h in dns.names],
    ]
    cands, df = run({f"c{i}": u for i, u in enumerate(disguised)}, allow_private_hosts=False)
    assert (df["status"] == "refused_url").all(), df[["status", "reason"]]
    assert web.total() == 0 and dns.connects == []
    assert (
        "100.100.100.200 (not globally routable"
        in df.loc[f"c{disguised.index('http://100.100.100.200/latest/meta-data/')}", "reason"]
    )
    for address, problem in {
        "100.64.0.1": "not globally routable",
        "fe80::1%2": "IPv6 address with a zone id",
        "2002:a00:1::": "embeds 10.0.0.1",
        "64:ff9b::a9fe:a9fe": "embeds 169.254.169.254",
        "ff0e::1": "multicast",
        "93.184.216.34": None,
        "2606:4700::1111": None,
    }.items():
        got = address_problem(address)
        assert (got is None) if problem is None else (problem in (got or "")), (address, got)


def test_dns_is_resolved_once_and_connections_go_to_the_checked_address(in_tmp, web, monkeypatch):
    """DNS rebinding: rebind.test answers public, then 127.0.0.1. The crawler checks the first answer
    and must connect to it (routed to the loopback server here), never ask again and reach 127.0.0.1."""
    web.routes.update(
        {
            "/direct.jpg": serve(picture(1)),
            "/hop": redirect(f"http://rebind.test:{web.port}/via.jpg"),
            "/via.jpg": serve(picture(2)),
        }
    )
    public = ["93.184.216.34", "93.184.216.35"]
    dns = FakeDns(
        monkeypatch,
        {"public.test": [[public[0]]], "rebind.test": [[public[1]], ["127.0.0.1"]]},
        route={a: web.port for a in public},
    )
    url_map = {
        "direct": f"http://rebind.test:{web.port}/direct.jpg",
        "via redirect": f"http://public.test:{web.port}/hop",
    }
    _, df = run(url_map, allow_private_hosts=False, respect_robots=True)
    assert (df["status"] == "ok").all(), df[["status", "reason"]]
    assert dns.lookups == {"public.test": 1, "rebind.test": 1}
    assert {h for h, _ in dns.connects} <= set(public)


@pytest.mark.slow
def test_https_connects_to_the_checked_address_with_the_name_for_sni_and_certificate(in_tmp, monkeypatch):
    """The address is pinned, the name is not lost: TLS asks for public.test (SNI) and checks the
    certificate against it, while the socket goes to the address the guard checked."""
    pytest.importorskip("cryptography")
    from contextlib import nullcontext

    from stages.crawl_images.client import Client, FetchFailed
    from stages.crawl_images.urlguard import Resolver

    cert, key = self_signed("public.test", in_tmp)
    tls = HostileWeb(tls=(cert, key))
    try:
        tls.routes["/x.jpg"] = serve(picture(1))
        dns = FakeDns(monkeypatch, {"public.test": [["93.184.216.34"], ["127.0.0.1"]]}, {"93.184.216.34": tls.port})
        client = Client(
            Resolver(False),
            lambda origin: nullcontext(),
            user_agent="winogavil-pipeline/test",
            timeout_s=5,
            deadline_s=10,
            retries=0,
            backoff_s=0,
            max_retry_after_s=1,
            max_redirects=2,
            pool_size=2,
        )
        with pytest.raises(FetchFailed, match="TLS error"):  # certifi does not know our test CA
            client.fetch(f"https://public.test:{tls.port}/x.jpg", max_bytes=10**6, too_large="")
        client.pm.connection_pool_kw["ca_certs"] = cert  # trust it: the name must now match
        client.pm.clear()
        r = client.fetch(f"https://public.test:{tls.port}/x.jpg", max_bytes=10**6, too_large="")
        assert r.status == 200 and r.body == picture(1)
        assert set(tls.sni) == {"public.test"} and dns.lookups == {"public.test": 1}
        assert {h for h, _ in dns.connects} == {"93.184.216.34"}
        assert tls.hits["/x.jpg"][-1][2]["Host"] == f"public.test:{tls.port}"
    finally:
        tls.close()


def test_a_slow_or_failing_resolver_is_a_transient_failure(in_tmp, web, monkeypatch):
    web.routes["/x.jpg"] = serve(picture(1))
    names = {"slow.test": [["127.0.0.1"]], "fine.test": [["127.0.0.1"]], "nxdomain.test": [[]]}
    dns = FakeDns(monkeypatch, names, {}, delays={"slow.test": 3})
    url_map = {
        "slow": f"http://slow.test:{web.port}/x.jpg",
        "nxdomain": "http://nxdomain.test/x.jpg",
        "padded": f"  http://fine.test:{web.port}/x.jpg\n",  # surrounding whitespace is dropped, as browsers do
    }
    cands, df = run(url_map, timeout_s=0.5)
    assert (
        df.loc["slow", "status"] == "download_failed"
        and "DNS lookup of slow.test timed out" in df.loc["slow", "reason"]
    )
    assert df.loc["nxdomain", "status"] == "download_failed" and "DNS lookup" in df.loc["nxdomain", "reason"]
    assert df.loc["padded", "status"] == "ok" and dns.lookups["fine.test"] == 1
    _, downloads = Journal(JOURNAL).load()
    assert downloads[url_map["slow"]]["transient"] and downloads[url_map["nxdomain"]]["transient"]


def test_every_redirect_hop_is_checked(in_tmp, web, monkeypatch):
    web.routes["/secret.jpg"] = serve(picture(1))
    targets = {
        "loopback": f"http://127.0.0.1:{web.port}/secret.jpg",
        "localhost": f"http://localhost:{web.port}/secret.jpg",
        "cgnat": "http://100.100.100.200/latest/meta-data/",
        "rebound": f"http://private.test:{web.port}/secret.jpg",
        "credentials": f"http://eve:pw@public.test:{web.port}/secret.jpg",
        "backslash": f"http://public.test:{web.port}\\@127.0.0.1/secret.jpg",
        "file": "file:///etc/passwd",
    }
    for name, target in targets.items():
        web.routes[f"/to-{name}"] = redirect(target, status=307)
    web.routes["/chain"] = redirect("/chain-2", status=301)
    web.routes["/chain-2"] = redirect(targets["loopback"], status=308)
    dns = FakeDns(
        monkeypatch, {"public.test": [["93.184.216.34"]], "private.test": [["10.0.0.7"]]}, {"93.184.216.34": web.port}
    )
    url_map = {name: f"http://public.test:{web.port}/to-{name}" for name in targets} | {
        "chain": f"http://public.test:{web.port}/chain"
    }
    _, df = run(url_map, allow_private_hosts=False)
    assert (df["status"] == "refused_url").all(), df[["status", "reason"]]
    assert all("redirect to" in r for r in df["reason"])
    assert web.n("/secret.jpg") == 0 and {h for h, _ in dns.connects} == {"93.184.216.34"}
    assert "pw@" not in " ".join(df["reason"])


# ============================================================================ 3. time and size bounds
def test_a_whole_download_is_bounded_by_the_deadline(in_tmp, web):
    body_slow = Trickle(picture(1), delay=0.05)  # ~1 byte per 50 ms: never a read timeout, minutes in all
    head_slow = Trickle(picture(2), delay=0.05, slow_headers=True)
    web.routes.update(
        {
            "/slow-body.jpg": body_slow,
            "/slow-headers.jpg": head_slow,
            "/long-wait.jpg": fail_first(503, serve(picture(3)), Retry_After="4"),  # wait 4 s > the deadline
            "/ok.jpg": serve(picture(4)),
        }
    )
    url_map = {k: f"{web.base}/{k}.jpg" for k in ("slow-body", "slow-headers", "long-wait", "ok")}
    _, df = run(url_map, timeout_s=0.5, deadline_s=1.0, retries=2)
    for k in ("slow-body", "slow-headers", "long-wait"):
        assert (
            df.loc[k, "status"] == "download_failed"
            and "took longer than crawl.deadline_s (1 s)" in df.loc[k, "reason"]
        )
    assert df.loc["ok", "status"] == "ok"
    assert body_slow.hung_up.wait(5) and head_slow.hung_up.wait(5)  # the crawler hung up on both
    assert body_slow.sent < len(picture(1)) and web.n("/long-wait.jpg") == 1  # no retry past the deadline
    _, downloads = Journal(JOURNAL).load()
    assert downloads[url_map["slow-body"]]["transient"]  # tried again next run


@pytest.mark.slow
def test_a_tls_handshake_that_never_ends_is_bounded_by_the_deadline(in_tmp):
    """TLS takes the socket over for its handshake; the watchdog must still end it at the deadline
    (1 s), long before the per-read timeout (60 s) would."""
    silent = SilentServer()  # accepts, then never answers the ClientHello
    out: dict = {}
    url_map = {"silent": f"https://127.0.0.1:{silent.port}/x.jpg"}
    t = threading.Thread(target=lambda: out.update(df=run(url_map, timeout_s=60, deadline_s=1.0, retries=0)[1]))
    try:
        t.start()
        t.join(30)
        assert not t.is_alive(), "the handshake outlived the deadline"
    finally:
        silent.close()
        t.join()
    df = out["df"]
    assert silent.accepted == 1
    assert df.loc["silent", "status"] == "download_failed" and "crawl.deadline_s (1 s)" in df.loc["silent", "reason"]


def test_search_pages_and_robots_txt_are_read_only_up_to_their_caps(in_tmp, web):
    bomb = gzip_bomb(64 << 20)  # 64 MiB of spaces in ~64 KiB
    web.routes.update(
        {
            "/search": gzipped(bomb),
            "/robots.txt": endless(  # rules, 660 KB of comments, a rule past the parsing limit, comments for ever
                b"User-agent: *\nDisallow: /private/\n" + b"# padding\n" * 66_000 + b"Disallow: /late/\n",
                b"# an endless robots.txt\n" * 2700,
            ),
            "/ok.jpg": serve(picture(1)),
            "/private/x.jpg": serve(picture(2)),
            "/late/x.jpg": serve(picture(3)),
        }
    )
    web.routes["/warm-up"] = serve(b"<html></html>", "text/html")
    run({"warm up": ""}, source="bing", bing={"endpoint": f"{web.base}/warm-up"})  # imports are not the bomb's
    tracemalloc.start()
    try:
        _, df = run({"bombed": ""}, source="bing", bing={"endpoint": f"{web.base}/search"}, max_page_bytes=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert df.loc["bombed", "status"] == "search_failed"
    assert "larger than crawl.max_page_bytes 1000000" in df.loc["bombed", "reason"]
    assert peak < 16 << 20  # bytes: never the 64 MiB the page decodes to

    _, df = run(
        {"ok": f"{web.base}/ok.jpg", "private": f"{web.base}/private/x.jpg", "late": f"{web.base}/late/x.jpg"},
        respect_robots=True,
    )
    assert df.loc["ok", "status"] == "ok" and df.loc["late", "status"] == "ok"  # "Disallow: /late/" lies past 512 KB
    assert df.loc["private", "status"] == "opted_out" and web.n("/private/x.jpg") == 0
    assert web.n("/robots.txt") == 1


@pytest.mark.slow
def test_a_slow_robots_txt_holds_only_its_own_host(in_tmp):
    """Host A's robots.txt answers only once host B served an image (or after 10 s): with one global
    lock held during robots fetches, B could not even ask for its robots.txt, and A would time out."""
    a, b = HostileWeb(), HostileWeb()
    a_asked, b_served = threading.Event(), threading.Event()
    waited = {}

    def slow_robots(req):
        a_asked.set()
        waited["b first"] = b_served.wait(10)
        send(req, b"User-agent: *\nAllow: /\n", "text/plain")

    def b_robots(req):
        a_asked.wait(10)  # B's robots.txt is asked for only after A's
        send(req, b"", "text/plain", 404)

    def b_image(req):
        send(req, picture(2))
        b_served.set()

    try:
        a.routes.update({"/robots.txt": slow_robots, "/a.jpg": serve(picture(1))})
        b.routes.update({"/robots.txt": b_robots, "/b.jpg": b_image})
        _, df = run({"a": f"{a.base}/a.jpg", "b": f"{b.base}/b.jpg"}, respect_robots=True, timeout_s=15, deadline_s=30)
    finally:
        a.close()
        b.close()
    assert (df["status"] == "ok").all() and waited["b first"]


# ============================================================================ 4. robots.txt and X-Robots-Tag
ROBOTS = {
    "longest.test": b"User-agent: *\nAllow: /\nDisallow: /longest/img/\n",
    "allowlonger.test": b"User-agent: *\nDisallow: /allowlonger/img\nAllow: /allowlonger/img/ok\n",
    "wild.test": b"User-agent: *\nDisallow: /*.jpg$\n",
    "ours.test": b"User-agent: winogavil-pipeline\nDisallow: /ours/mine/\n\nUser-agent: *\nDisallow: /\n",
    "redirected.test": b"",  # -> /real-robots.txt
}


def test_robots_txt_follows_rfc_9309(in_tmp, web, monkeypatch):
    hosts = [*ROBOTS, "gone.test", "forbidden.test", "unauthorized.test", "broken.test", "busy.test", "slow.test"]
    FakeDns(monkeypatch, {h: [["127.0.0.1"]] for h in hosts}, {})

    def robots(req):
        host = req.headers["Host"].split(":")[0]
        if host == "redirected.test":
            return send(req, b"", "text/plain", 301, Location="/real-robots.txt")
        status = {
            "gone.test": 404,
            "forbidden.test": 403,
            "unauthorized.test": 401,
            "broken.test": 500,
            "busy.test": 429,
        }
        if host == "slow.test":
            time.sleep(1.0)
        send(req, ROBOTS.get(host, b"User-agent: *\nDisallow: /\n"), "text/plain", status.get(host, 200))

    web.routes["/robots.txt"] = robots
    web.routes["/real-robots.txt"] = serve(b"User-agent: *\nDisallow: /redirected/no/\n", "text/plain")
    expect = {
        "longest.test/longest/img/a.jpg": "opted_out",  # Allow: / loses to the longer Disallow
        "longest.test/longest/ok.jpg": "ok",
        "allowlonger.test/allowlonger/img/ok/a.jpg": "ok",  # the longer Allow wins
        "allowlonger.test/allowlonger/img/no.jpg": "opted_out",
        "wild.test/wild/a.jpg": "opted_out",  # Disallow: /*.jpg$
        "wild.test/wild/a.png": "ok",
        "wild.test/wild/b.jpg?w=1": "ok",  # $ anchors the end
        "ours.test/ours/mine/a.jpg": "opted_out",  # our group applies ...
        "ours.test/ours/other.jpg": "ok",  # ... not the * group's Disallow: /
        "redirected.test/redirected/no/a.jpg": "opted_out",
        "redirected.test/redirected/ok.jpg": "ok",
        "gone.test/gone/a.jpg": "ok",  # 4xx: unavailable, everything allowed
        "forbidden.test/forbidden/a.jpg": "ok",
        "unauthorized.test/unauthorized/a.jpg": "ok",
        "broken.test/broken/a.jpg": "download_failed",  # 5xx: unreachable, everything disallowed
        "busy.test/busy/a.jpg": "download_failed",  # 429: overloaded, as 5xx
        "slow.test/slow/a.jpg": "download_failed",  # timeout: unreachable
    }
    for i, path in enumerate(expect):
        web.routes["/" + path.split("/", 1)[1].split("?")[0]] = serve(picture(i, fmt="PNG"), "image/png")
    url_map = {path: f"http://{path.split('/', 1)[0]}:{web.port}/{path.split('/', 1)[1]}" for path in expect}
    _, df = run(url_map, respect_robots=True, timeout_s=0.5)
    assert df["status"].to_dict() == expect, df[["status", "reason"]]
    for path, status in expect.items():
        if status != "ok":
            assert web.n("/" + path.split("/", 1)[1].split("?")[0]) == 0, path
    assert "RFC 9309" in df.loc["broken.test/broken/a.jpg", "reason"]
    _, downloads = Journal(JOURNAL).load()
    assert downloads[url_map["slow.test/slow/a.jpg"]]["transient"]
    assert not downloads[url_map["wild.test/wild/a.jpg"]]["transient"]


def test_x_robots_tag_on_any_hop_opts_out_and_respect_robots_false_switches_off_both(in_tmp, web):
    web.routes.update(
        {
            "/robots.txt": serve(b"User-agent: *\nDisallow: /private/\n", "text/plain"),
            "/hop-noai": redirect("/plain.jpg", X_Robots_Tag="noai"),
            "/plain.jpg": serve(picture(1)),
            "/final.jpg": serve(picture(2), X_Robots_Tag="noindex, noimageai"),
            "/scoped.jpg": serve(picture(3), X_Robots_Tag="otherbot: noai"),
            "/private/x.jpg": serve(picture(4)),
            "/fine.jpg": serve(picture(5), X_Robots_Tag="nofollow, noarchive, otherbot: nosnippet"),
        }
    )
    url_map = {
        k: f"{web.base}/{p}"
        for k, p in [
            ("hop", "hop-noai"),
            ("final", "final.jpg"),
            ("scoped", "scoped.jpg"),
            ("private", "private/x.jpg"),
            ("fine", "fine.jpg"),
        ]
    }
    _, on = run(url_map, respect_robots=True)
    assert on["status"].to_dict() == {
        "hop": "opted_out",
        "final": "opted_out",
        "scoped": "opted_out",
        "private": "opted_out",
        "fine": "ok",
    }
    assert "X-Robots-Tag: noai (on the HTTP 302 response" in on.loc["hop", "reason"] and web.n("/plain.jpg") == 0
    robots_hits = web.n("/robots.txt")
    _, off = run(url_map, respect_robots=False)
    assert (off["status"] == "ok").all() and web.n("/robots.txt") == robots_hits


def test_every_x_robots_tag_opt_out_the_ecosystem_honours_opts_out_with_its_reason(in_tmp, web):
    """img2dataset's default list (noai, noimageai, noindex, noimageindex) and ``none`` (= noindex,
    nofollow), in any case, spacing, position or user-agent scope, each make the image ``opted_out``
    with the directive in its reason; other directives do not."""
    values = {}
    for token in ("noai", "noimageai", "noindex", "noimageindex", "none"):
        for i, form in enumerate([token, token.upper(), f"nofollow,  {token}", f"somebot: {token}", f"x ; {token}"]):
            values[f"{token}-{i}"] = (form, token)
    for i, other in enumerate(["nofollow", "noarchive", "index, follow", "max-image-preview:large", "noindexer"]):
        values[f"other-{i}"] = (other, None)
    web.routes.update({f"/{k}.jpg": serve(picture(n), X_Robots_Tag=v) for n, (k, (v, _)) in enumerate(values.items())})
    _, df = run({k: f"{web.base}/{k}.jpg" for k in values}, respect_robots=True)
    for key, (header, token) in values.items():
        if token is None:
            assert df.loc[key, "status"] == "ok", (header, df.loc[key, "reason"])
        else:
            assert df.loc[key, "status"] == "opted_out", header
            assert f"X-Robots-Tag: {token}" in df.loc[key, "reason"], (header, df.loc[key, "reason"])


# ============================================================================ 5. deterministic outputs
KILL_AND_RUN = """
import json, sys
sys.path.insert(0, {root!r})
from gavil.params import parse_params
from gavil.pipeline.runner import run_stage
run_stage("crawl_images", parse_params(json.loads(open("params.json").read())))
"""


def _faulty_web(web: HostileWeb) -> dict[str, str]:
    """A map whose every candidate meets a fault that does not depend on time or on earlier requests."""
    full = picture(7, (200, 150))

    def slow(body: bytes):
        def fn(req):
            time.sleep(PACE.hold)
            send(req, body)

        return fn

    web.routes.update(
        {
            "/robots.txt": serve(b"User-agent: *\nDisallow: /private/\n", "text/plain"),
            "/html.jpg": serve(b"<html><body>not an image</body></html>", "text/html"),
            "/trunc.jpg": serve(full[: len(full) // 2]),
            "/empty.jpg": serve(b""),
            "/ppm": serve(picture(8, fmt="PPM"), "image/x-portable-pixmap"),
            "/gone.jpg": serve(b"", "text/plain", 404),
            "/down.jpg": serve(b"", "text/plain", 500),
            "/noai.jpg": serve(picture(9), X_Robots_Tag="noai"),
            "/private/x.jpg": serve(picture(10)),
            "/moved": redirect("/img/3.jpg"),
            "/red.png": serve(flat((200, 0, 0), fmt="PNG"), "image/png"),
            "/blue.png": serve(flat((0, 0, 200), fmt="PNG"), "image/png"),
        }
    )
    url_map: dict[str, str | list[str]] = {}
    for i in range(24):
        web.routes[f"/img/{i}.jpg"] = slow(picture(i + 20))
        url_map[f"concept {i:02d}"] = f"{web.base}/img/{i}.jpg"
    for name in (
        "html.jpg",
        "trunc.jpg",
        "empty.jpg",
        "ppm",
        "gone.jpg",
        "down.jpg",
        "noai.jpg",
        "private/x.jpg",
        "moved",
    ):
        url_map[f"fault {name}"] = [f"{web.base}/{name}", f"{web.base}/red.png"]
    url_map["blue"] = f"{web.base}/blue.png"
    url_map["credentials"] = f"http://u:secret@127.0.0.1:{web.port}/img/1.jpg"
    return url_map  # type: ignore[return-value]


def test_outputs_are_byte_identical_across_runs_and_after_kill_and_resume(in_tmp, web, pace):
    url_map = _faulty_web(web)
    p = params(threads=2, respect_robots=True)
    first = _stage_run(in_tmp / "a", url_map, p)
    assert _stage_run(in_tmp / "b", url_map, p) == first  # two clean runs
    pace.hold = 0.15  # slow enough to kill half-way

    d = in_tmp / "killed"
    d.mkdir()
    (d / "map.json").write_text(json.dumps(url_map))
    (d / "params.json").write_text(json.dumps({"crawl": p.crawl.model_dump()}))
    os.chdir(d)
    catalog.write_table(cf(*url_map), "concept_filter")
    proc = subprocess.Popen([sys.executable, "-c", KILL_AND_RUN.format(root=str(ROOT))], cwd=d)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        lines = sum(f.read_text().count("\n") for f in (d / JOURNAL).glob("*.jsonl")) if (d / JOURNAL).is_dir() else 0
        if lines >= 8:
            break
        time.sleep(0.02)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert not (d / catalog.entry("images").path).exists()  # killed before its tables
    assert list((d / STORE).glob(".staging-*"))  # it left its staging behind ...
    pace.hold = 0.0
    assert _stage_run(d, url_map, p) == first  # ... the resumed run cleans it and writes the same bytes
    assert not list((d / STORE).glob(".*staging*"))

    cands = pd.read_parquet(in_tmp / "a" / catalog.entry("candidates").path)
    reasons = " ".join(cands["reason"].dropna())
    assert "staging" not in reasons and "/tmp" not in reasons and "0x" not in reasons and str(in_tmp) not in reasons
    fates = dict(zip(cands["url"], cands["status"]))
    assert fates[f"{web.base}/ppm"] == "unsupported_format" and fates[f"{web.base}/trunc.jpg"] == "invalid_image"
    images = pd.read_parquet(in_tmp / "a" / catalog.entry("images").path).set_index("concept")
    assert images.loc["blue", "status"] == "ok" and images.loc["fault down.jpg", "source_url"] == f"{web.base}/red.png"


# ============================================================================ 6. no candidate lost on the way in
def _bing_page(murls: list[str]) -> bytes:
    divs = "".join(
        f'<div class="imgpt"><a class="iusc" m="{json.dumps({"murl": u, "t": "x"}).replace(chr(34), "&quot;")}">x</a></div>'
        for u in murls
    )
    return f"<html><body>{divs}</body></html>".encode()


def test_bing_keeps_every_image_url_of_the_result_metadata(in_tmp, web):
    paths = ["/a.png", "/b.webp", "/c.jpeg", "/d.JPG", "/e.jpg?w=300&h=200", "/f?id=7", "/g.gif", "/h.jpg"]
    murls = [f"{web.base}{p}" for p in paths] + ["/relative.png"]
    web.routes["/search"] = serve(_bing_page(murls), "text/html")
    for i, p in enumerate([*paths, "/relative.png"]):
        web.routes[p.split("?")[0]] = serve(picture(i, fmt="PNG"), "image/png")
    cands, df = run({"many": ""}, source="bing", bing={"endpoint": f"{web.base}/search"}, top_n=20)
    assert list(cands["url"]) == [*murls[:-1], f"{web.base}/relative.png"]
    assert (cands["status"] == "kept").all() and df.loc["many", "candidates_kept"] == len(murls)
    _, top3 = run({"many": ""}, source="bing", bing={"endpoint": f"{web.base}/search"}, top_n=3)
    assert top3.loc["many", "candidates_kept"] == 3 and top3.loc["many", "source_url"] == murls[0]


def test_greedy_resolves_relative_images_against_the_page(in_tmp, web):
    web.routes.update(
        {
            "/site/moon": serve(
                f"""<html><body><img src="img/a.jpg"><img src=" /abs/b.png "><img src="//127.0.0.1:{web.port}/proto/c.webp">
                <img src="data:image/png;base64,iVBORw0KGgo="><a href="big/d.JPG?size=xl">big</a><a href="/next">next</a>
                </body></html>""".encode(),
                "text/html",
            ),
            "/site/sun": serve(
                b'<html><head><base href="/based/"></head><body><img src="e.jpg"></body></html>', "text/html"
            ),
            "/robots.txt": serve(b"User-agent: *\nDisallow: /site/blocked\n", "text/plain"),
        }
    )
    for i, p in enumerate(["/site/img/a.jpg", "/abs/b.png", "/proto/c.webp", "/site/big/d.JPG", "/based/e.jpg"]):
        web.routes[p] = serve(picture(i, fmt="PNG"), "image/png")
    cands, df = run(
        {"moon": "", "sun": "", "blocked": ""},
        source="greedy",
        greedy={"url_template": f"{web.base}/site/{{concept}}"},
        respect_robots=True,
    )
    urls = cands.groupby("concept")["url"].apply(list).to_dict()
    b = web.base
    assert urls["moon"] == [f"{b}/site/img/a.jpg", f"{b}/abs/b.png", f"{b}/proto/c.webp", f"{b}/site/big/d.JPG?size=xl"]
    assert urls["sun"] == [f"{b}/based/e.jpg"] and (cands["status"] == "kept").all()
    assert df.loc["blocked", "status"] == "search_failed" and "robots.txt" in df.loc["blocked", "reason"]
    assert web.n("/site/blocked") == 0 and web.n("/next") == 0


def test_urllist_names_are_normalised_on_both_sides_and_collisions_reported(in_tmp, web):
    for i in range(6):
        web.routes[f"/{i}.jpg"] = serve(picture(i))
    u = [f"{web.base}/{i}.jpg" for i in range(6)]
    Path("map.json").write_text(
        json.dumps({"Dog": u[0], "dog ": [u[1], u[0]], "DOG": u[2], "Café": u[3], "Cafe\u0301": u[4], "CAT": u[5]})
    )
    cands, df = crawl(cf("dog", "café", "Cat", "cow"), params())
    df = validate(df, Images).set_index("concept")
    urls = cands.groupby("concept")["url"].apply(list).to_dict()
    # colliding keys merge in key (code point) order, not file order: a reordered map crawls the same
    assert urls == {"dog": [u[2], u[0], u[1]], "café": [u[4], u[3]], "Cat": [u[5]]}
    assert "'DOG', 'Dog', 'dog ' are one name after normalisation" in df.loc["dog", "reason"]
    assert "are one name" in df.loc["café", "reason"] and pd.isna(df.loc["Cat", "reason"])
    assert df.loc["Cat", "status"] == "ok" and df.loc["cow", "status"] == "no_results"
    assert candidate_url("e.jpg", base="http://h/a/b") == "http://h/a/e.jpg"


# ============================================================================ 7. the format policy
def test_only_web_image_formats_are_kept(in_tmp, web):
    formats = {"JPEG": "jpeg", "PNG": "png", "WEBP": "webp", "GIF": "gif"}
    others = ["PPM", "ICO", "TGA", "PCX", "SGI", "BMP", "TIFF"]
    for i, fmt in enumerate([*formats, *others]):
        web.routes[f"/{fmt}"] = serve(picture(i, fmt=fmt), "image/whatever")  # the Content-Type is not trusted
    frames = [Image.new("RGB", (100, 100), c) for c in ((250, 0, 0), (0, 250, 0))]
    buf = io.BytesIO()
    frames[0].save(buf, "GIF", save_all=True, append_images=frames[1:])
    web.routes["/animated"] = serve(buf.getvalue(), "image/gif")
    url_map = {fmt: f"{web.base}/{fmt}" for fmt in [*formats, *others, "animated"]}
    cands, df = run(url_map)
    assert set(df.index[df["status"] == "ok"]) == {*formats, "animated"}
    for fmt in others:
        assert (
            df.loc[fmt, "status"] == "unsupported_format"
            and f"{fmt} image: not in crawl.accept_formats" in df.loc[fmt, "reason"]
        )
    assert {Path(p).suffix for p in df["path"].dropna()} == {".jpg", ".png", ".webp", ".gif"}
    assert df.loc["animated", "format"] == "GIF"
    _, png_only = run(url_map, accept_formats=["PNG"])  # the param decides; changing it validates again
    assert set(png_only.index[png_only["status"] == "ok"]) == {"PNG"}
    assert png_only.loc["JPEG", "status"] == "unsupported_format"


def test_flat_images_are_not_perceptual_duplicates_of_each_other(in_tmp, web):
    colours = {"red": (220, 10, 10), "green": (10, 200, 10), "blue": (10, 10, 230), "black": (0, 0, 0)}
    for name, c in colours.items():
        web.routes[f"/{name}.png"] = serve(flat(c), "image/png")
    web.routes["/red-again.png"] = serve(flat(colours["red"]), "image/png")  # same bytes
    photo = (IMAGES / "cat.png").read_bytes()
    web.routes["/photo.jpg"] = serve(photo, "image/png")
    web.routes["/photo-small.png"] = serve(_resized(photo, (300, 200)), "image/png")  # same picture, other bytes
    url_map = {n: f"{web.base}/{n}.png" for n in colours} | {
        "red again": f"{web.base}/red-again.png",
        "photo": f"{web.base}/photo.jpg",
        "photo small": f"{web.base}/photo-small.png",
    }
    _, df = run(url_map)
    assert (df.loc[list(colours), "status"] == "ok").all()  # four colours, four images
    assert df.loc["red again", "status"] == "duplicate" and "sha256" in df.loc["red again", "reason"]
    assert (
        df.loc["photo small", "status"] == "duplicate"
        and "near-duplicate of 'photo'" in df.loc["photo small", "reason"]
    )
    _, no_guard = run(url_map, phash_min_std=0.0)  # what the guard prevents: every flat image alike
    assert (no_guard.loc[["green", "red"], "status"] == "duplicate").all()


def _resized(jpeg: bytes, size: tuple[int, int]) -> bytes:
    out = io.BytesIO()
    Image.open(io.BytesIO(jpeg)).resize(size).save(out, "PNG")
    return out.getvalue()


# ============================================================================ 8. retries
def test_unusable_retry_after_falls_back_to_the_backoff(in_tmp, web):
    odd = {"soon": "soon", "negative": "-5", "past": "Wed, 21 Oct 2015 07:28:00 GMT", "float": "1.5e9"}
    for i, (name, value) in enumerate(odd.items()):
        web.routes[f"/{name}.jpg"] = fail_first(503, serve(picture(i)), Retry_After=value)
    url_map = {n: f"{web.base}/{n}.jpg" for n in ("soon", "negative", "past", "float")}
    _, df = run(url_map, retries=2, backoff_s=0.05)
    assert (df["status"] == "ok").all(), df[["status", "reason"]]
    assert all(web.n(f"/{n}.jpg") == 2 for n in url_map)


def test_malformed_urls_are_permanent_failures(in_tmp, web):
    url_map = {
        "port": "http://127.0.0.1:99999/x.jpg",
        "ipv6": "http://[::1/x.jpg",
        "host": "http://exa mple.com/x.jpg",
        "label": f"http://{'a' * 70}.example/x.jpg",  # a DNS label has at most 63 characters
        "two ports": "http://127.0.0.1:80:80/x.jpg",
    }
    _, df = run(url_map)
    assert (df["status"] == "refused_url").all()
    cfg = CrawlConfig.from_params(params().crawl)
    _, downloads = Journal(JOURNAL).load()
    assert all(reusable(downloads[u], cfg.check_key) for u in url_map.values())  # settled: not tried again
    segments = len(list(JOURNAL.glob("*.jsonl")))
    run(url_map)
    assert len(list(JOURNAL.glob("*.jsonl"))) == segments  # the re-run journaled nothing new
