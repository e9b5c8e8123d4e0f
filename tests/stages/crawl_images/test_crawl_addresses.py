"""The crawl's address rule (issue 24): IPv6 forms that carry an IPv4 address are judged by that
address, special-purpose blocks are refused outright, and a refusal is permanent wherever the
address turns up (a URL's host, a DNS answer, a redirect, a robots.txt fetch).

The special-purpose blocks below are written out here from the IANA registries, independently of
``urlguard``'s own tables, so a block missing there fails this test.
"""

from __future__ import annotations

import ipaddress
import random

import pytest

from stages.crawl_images.config import CrawlConfig
from stages.crawl_images.journal import Journal, reusable
from stages.crawl_images.urlguard import EMBEDDINGS, SPECIAL_V4, SPECIAL_V6, address_problem
from tests.stages.crawl_images.hostile_web import FakeDns, picture, redirect, send, serve
from tests.stages.crawl_images.test_crawl_hostile import JOURNAL, params, run, web  # noqa: F401 - the fixture

# IANA IPv4 Special-Purpose Address Registry (+ multicast, RFC 5771)
IANA_V4 = """0.0.0.0/8 10.0.0.0/8 100.64.0.0/10 127.0.0.0/8 169.254.0.0/16 172.16.0.0/12 192.0.0.0/24
192.0.0.0/29 192.0.0.8/32 192.0.0.9/32 192.0.0.10/32 192.0.0.170/32 192.0.0.171/32 192.0.2.0/24
192.31.196.0/24 192.52.193.0/24 192.88.99.0/24 192.168.0.0/16 192.175.48.0/24 198.18.0.0/15
198.51.100.0/24 203.0.113.0/24 240.0.0.0/4 255.255.255.255/32 224.0.0.0/4""".split()
# IANA IPv6 Special-Purpose Address Registry, without the forms that embed IPv4
# (judged by that address: see EMBED below), plus multicast, site-local and reserved space
IANA_V6 = """::1/128 ::/128 64:ff9b:1::/48 100::/64 100:0:0:1::/64 2001::/23 2001:1::1/128 2001:1::2/128
2001:1::3/128 2001:2::/48 2001:3::/32 2001:4:112::/48 2001:10::/28 2001:20::/28 2001:30::/28
2001:db8::/32 2620:4f:8000::/48 3fff::/20 5f00::/16 fc00::/7 fe80::/10 fec0::/10 ff00::/8
4000::/2 8000::/1 200::/7 400::/6 800::/5 1000::/4""".split()


EMBEDDED_IN_SPECIAL = [ipaddress.ip_network("::/96"), ipaddress.ip_network("2001::/32")]


def _embed(form: str, v4: ipaddress.IPv4Address, rnd: random.Random) -> list[ipaddress.IPv6Address]:
    """``v4`` carried by IPv6 form ``form`` (the rest of the address random)."""
    a = int(v4)
    glob = int(ipaddress.IPv4Address("8.8.4.4"))
    r16, r64 = rnd.getrandbits(16), rnd.getrandbits(64)
    if form == "mapped":
        return [ipaddress.IPv6Address(0xFFFF << 32 | a)]
    if form == "translated":
        return [ipaddress.IPv6Address(0xFFFF << 48 | a)]
    if form == "compatible":
        return [ipaddress.IPv6Address(a)]
    if form == "nat64":
        return [ipaddress.IPv6Address(0x64FF9B << 96 | a)]
    if form == "6to4":
        return [ipaddress.IPv6Address(0x2002 << 112 | a << 80 | r16 << 64 | r64)]
    if form == "teredo":  # the server, and the client (stored inverted), each in turn
        flags_port = rnd.getrandbits(32)
        return [
            ipaddress.IPv6Address(0x20010000 << 96 | a << 64 | flags_port << 32 | (~glob & 0xFFFFFFFF)),
            ipaddress.IPv6Address(0x20010000 << 96 | glob << 64 | flags_port << 32 | (~a & 0xFFFFFFFF)),
        ]
    if form == "isatap":  # in a routable prefix (Google's), both u/g variants
        prefix = 0x2001_4860_0000_0000 | rnd.getrandbits(16)
        return [ipaddress.IPv6Address(prefix << 64 | ug << 56 | 0x5EFE << 32 | a) for ug in (0, 2)]
    raise AssertionError(form)


FORMS = ["mapped", "translated", "compatible", "nat64", "6to4", "teredo", "isatap"]


def _random_v4(rnd: random.Random) -> ipaddress.IPv4Address:
    """Half the time an address inside a random special block, else anywhere."""
    if rnd.random() < 0.5:
        net = ipaddress.ip_network(rnd.choice(IANA_V4))
        return net[rnd.randrange(net.num_addresses)]
    return ipaddress.IPv4Address(rnd.getrandbits(32))


@pytest.mark.parametrize("block", IANA_V4 + IANA_V6)
def test_every_special_purpose_block_is_refused_throughout(block):
    rnd = random.Random(block)
    net = ipaddress.ip_network(block)
    picks = {net[0], net[-1], *(net[rnd.randrange(net.num_addresses)] for _ in range(200))}
    for ip in picks:
        if any(ip in n for n in EMBEDDED_IN_SPECIAL) and net.prefixlen < 128:
            continue  # IPv4-compatible ::/96 and Teredo 2001::/32: judged by what they carry (below)
        assert address_problem(str(ip)), (block, str(ip))


def test_the_guard_tables_cover_the_iana_registries():
    """Every block of the registries lies inside a block the guard names (or outside 2000::/3)."""
    guard = [n for n, _ in SPECIAL_V4 + SPECIAL_V6]
    for block in IANA_V4 + IANA_V6:
        net = ipaddress.ip_network(block)
        inside = any(net.version == g.version and net.subnet_of(g) for g in guard)  # type: ignore[arg-type]
        outside_unicast = net.version == 6 and not net.overlaps(ipaddress.ip_network("2000::/3"))
        assert inside or outside_unicast, block
    assert {str(n) for n, _ in EMBEDDINGS} == {
        "::ffff:0:0/96",
        "::ffff:0:0:0/96",
        "::/96",
        "64:ff9b::/96",
        "2002::/16",
        "2001::/32",
    }


@pytest.mark.parametrize("form", FORMS)
def test_an_embedded_ipv4_address_decides_as_it_would_alone(form):
    rnd = random.Random(form)
    seen = {True: 0, False: 0}
    for _ in range(2000):
        v4 = _random_v4(rnd)
        alone = address_problem(str(v4)) is None
        seen[alone] += 1
        for ip in _embed(form, v4, rnd):
            got = address_problem(str(ip))
            assert (got is None) == alone, (form, str(v4), str(ip), got)
            if got:
                assert f"embeds {v4}" in got, got
    assert seen[True] > 100 and seen[False] > 100  # both decisions were exercised


def test_python_is_global_is_not_the_rule():
    """The addresses issue 24 measured: ``ipaddress`` calls them global, the crawler must not."""
    for a in ("::127.0.0.1", "::169.254.169.254", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe"):
        assert ipaddress.ip_address(a).is_global
        assert "embeds" in (address_problem(a) or ""), a


MEASURED = ["::127.0.0.1", "::169.254.169.254", "::ffff:0:7f00:1", "::ffff:0:a9fe:a9fe"]


def test_refused_addresses_are_permanent_wherever_they_turn_up(in_tmp, web, monkeypatch):  # noqa: F811
    """Direct literals, DNS answers, redirect hops and robots.txt redirects to the measured
    addresses (and 6to4 / Teredo / NAT64 forms of loopback) are never connected to, are
    ``refused_url`` (not transient), and a second run neither looks them up nor connects."""
    port = web.port
    web.routes["/x.jpg"] = serve(picture(1))
    forms = MEASURED + ["2002:7f00:1::1", "2001:0:808:808::80ff:fffe", "64:ff9b::7f00:1", "::ffff:127.0.0.1"]
    names = {f"n{i}.test": [[a]] for i, a in enumerate(forms)}
    names["public.test"] = [["93.184.216.34"]]
    names["robots.test"] = [["93.184.216.35"]]
    dns = FakeDns(monkeypatch, names, {"93.184.216.34": port, "93.184.216.35": port})

    def robots(req):
        if req.headers["Host"].startswith("robots.test"):
            return send(req, b"", "text/plain", 301, Location=f"http://[::127.0.0.1]:{port}/robots.txt")
        return send(req, b"User-agent: *\nAllow: /\n", "text/plain")

    web.routes["/robots.txt"] = robots
    url_map = {}
    for i, a in enumerate(forms):
        url_map[f"literal {a}"] = f"http://[{a}]:{port}/x.jpg"
        url_map[f"dns {a}"] = f"http://n{i}.test:{port}/x.jpg"
        web.routes[f"/to-{i}"] = redirect(f"http://[{a}]:{port}/x.jpg", status=302)
        url_map[f"redirect {a}"] = f"http://public.test:{port}/to-{i}"
    url_map["robots redirect"] = f"http://robots.test:{port}/x.jpg"
    url_map["control"] = f"http://public.test:{port}/x.jpg"
    p = params(allow_private_hosts=False, respect_robots=True)
    _, df = run(url_map, p)
    refused = df.drop(index="control")
    assert (refused["status"] == "refused_url").all(), refused[["status", "reason"]]
    assert df.loc["control", "status"] == "ok"
    assert all("embeds" in r for r in refused["reason"]), refused["reason"]
    assert "robots.txt of http://robots.test" in df.loc["robots redirect", "reason"]
    assert {h for h, _ in dns.connects} <= {"93.184.216.34", "93.184.216.35"}  # nothing else
    cfg = CrawlConfig.from_params(p.crawl)
    _, downloads = Journal(JOURNAL).load()
    for name, url in url_map.items():
        assert not downloads[url]["transient"] and reusable(downloads[url], cfg.check_key), name
    lookups, connects = dict(dns.lookups), len(dns.connects)
    _, again = run(url_map, p)
    assert again["status"].to_dict() == df["status"].to_dict()
    assert dns.lookups == lookups and len(dns.connects) == connects  # settled: not tried again
