"""Load on a running vtr-serve: CLIENTS threads, each with its own keep-alive HTTP
connection, send requests for SECONDS seconds, cycling through the kinds a page makes:
a text query (from QUERIES, one per line), "more like this" of an item, a thumbnail, and
a byte range of a video. Prints one JSON object: requests, errors (a status other than
200/206, or a failed connection: each kind of failure counted and the first few shown),
requests per second, and latency percentiles in ms, overall and per kind. Exit status 1
when any request failed.

usage: load.py URL CLIENTS SECONDS QUERIES KEY [KEY...]
"""
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

url, clients, seconds, queries_path = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
keys = sys.argv[5:]
host = urllib.parse.urlparse(url)
queries = [q.strip() for q in open(queries_path) if q.strip()]
lat = {"search": [], "similar": [], "thumb": [], "media": []}
errors = []
lock = threading.Lock()
stop = time.time() + seconds


def request(kind, rng):
    key = urllib.parse.quote(rng.choice(keys), safe="")
    headers = {}
    if kind == "search":
        path = "/api/search?k=20&q=" + urllib.parse.quote(rng.choice(queries))
    elif kind == "similar":
        path = "/api/similar?k=20&key=" + key
    elif kind == "thumb":
        path = "/thumb?frame=0&key=" + key
    else:
        path = "/media?key=" + key
        headers["Range"] = "bytes=0-65535"
    return path, headers


def client(i):
    rng = random.Random(i)
    conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
    kinds = list(lat)
    n = i
    while time.time() < stop:
        kind = kinds[n % len(kinds)]
        n += 1
        path, headers = request(kind, rng)
        t0 = time.perf_counter()
        try:
            conn.request("GET", path, headers=headers)
            r = conn.getresponse()
            r.read()
            ok = r.status in (200, 206)
            what = "HTTP %d on %s" % (r.status, path)
            if r.getheader("Connection", "").lower() == "close":
                conn.close()
                conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
        except Exception as e:  # a refused or dropped connection
            ok, what = False, "%s on %s" % (type(e).__name__, path)
            conn.close()
            conn = http.client.HTTPConnection(host.hostname, host.port, timeout=30)
        ms = 1000 * (time.perf_counter() - t0)
        with lock:
            if ok:
                lat[kind].append(ms)
            else:
                errors.append(what)
    conn.close()


threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
t0 = time.time()
for t in threads:
    t.start()
for t in threads:
    t.join()
wall = time.time() - t0


def pct(v, p):
    v = sorted(v)
    return round(v[min(len(v) - 1, int(p / 100 * len(v)))], 2) if v else None


every = [x for v in lat.values() for x in v]
out = {"clients": clients, "seconds": round(wall, 1), "requests": len(every) + len(errors),
       "errors": len(errors), "first_errors": errors[:5],
       "per_second": round((len(every) + len(errors)) / wall, 1),
       "p50_ms": pct(every, 50), "p99_ms": pct(every, 99),
       "kinds": {k: {"requests": len(v), "p50_ms": pct(v, 50), "p99_ms": pct(v, 99)}
                 for k, v in lat.items()}}
print(json.dumps(out))
sys.exit(1 if errors else 0)
