"""Drives vtr-serve's search page in headless Chromium, as a person would: types a query,
clicks Search, waits for the hits and their thumbnails, clicks the hit whose path ends
with PLAY, and waits for the video to play from the moment the server chose. With RUNS,
opens the runs page, expects RUNS runs in its table, ticks them all, plots their curves
and the first run's GPO coefficients, and waits for both figures. Writes screenshots of
the hits, the player and the runs page. Talks to Chromium over the DevTools protocol
(python3-websocket); exits 1 with one line saying what did not happen.

usage: check_page.py URL QUERY PLAY SCREENSHOT_DIR [RUNS]
"""
import base64
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import websocket

URL, QUERY, PLAY, SHOTS = sys.argv[1:5]
RUNS = int(sys.argv[5]) if len(sys.argv) > 5 else 0


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


class Browser:
    def __init__(self):
        self.profile = tempfile.mkdtemp(prefix="vtr-chromium-")
        self.proc = subprocess.Popen(
            ["chromium", "--headless=new", "--no-sandbox", "--disable-gpu",
             "--no-first-run", "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--autoplay-policy=no-user-gesture-required", "--window-size=1200,900",
             "--user-data-dir=" + self.profile, "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line and self.proc.poll() is not None:
                fail("chromium exited: status %s" % self.proc.returncode)
            m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
            if m:
                port = int(m.group(1))
        if port is None:
            fail("chromium did not open its DevTools port in 60 s")
        targets = json.load(urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=60,
                                              suppress_origin=True)
        self.next_id = 0

    def call(self, method, **params):
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                if "error" in msg:
                    fail("%s: %s" % (method, msg["error"]))
                return msg.get("result", {})

    def js(self, expr):
        r = self.call("Runtime.evaluate", expression=expr, returnByValue=True,
                      awaitPromise=True)
        if "exceptionDetails" in r:
            fail("page script %r: %s" % (expr, r["exceptionDetails"].get("text")))
        return r["result"].get("value")

    def wait(self, expr, what, seconds=30):
        deadline = time.time() + seconds
        while time.time() < deadline:
            v = self.js(expr)
            if v:
                return v
            time.sleep(0.1)
        fail("%s: not after %d s (status line: %r)" %
             (what, seconds, self.js("document.getElementById('status').textContent")))

    def click(self, expr, what):
        """A real mouse click at the middle of the element expr selects."""
        box = self.js("(() => { const e = %s; if (!e) return null; e.scrollIntoView();"
                      " const r = e.getBoundingClientRect();"
                      " return [r.x + r.width / 2, r.y + r.height / 2]; })()" % expr)
        if not box:
            fail("no %s on the page to click" % what)
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=box[0], y=box[1],
                      button="left", clickCount=1)

    def screenshot(self, path):
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as f:
            f.write(base64.b64decode(data))

    def close(self):
        self.ws.close()
        self.proc.kill()
        self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


b = Browser()
try:
    b.call("Page.enable")
    b.call("Page.navigate", url=URL)
    b.wait("document.readyState === 'complete' && "
           "/items/.test(document.getElementById('status').textContent)",
           "the page loads and names its index")
    # type the query into the box and press the button
    b.click("document.getElementById('q')", "query box")
    b.call("Input.insertText", text=QUERY)
    if b.js("document.getElementById('q').value") != QUERY:
        fail("the query box does not hold what was typed")
    b.click("document.getElementById('go')", "Search button")
    n = b.wait("document.querySelectorAll('#results .hit').length", "hits appear")
    b.wait("[...document.querySelectorAll('#results .hit img')]"
           ".every(i => i.complete && i.naturalWidth > 0) && "
           "document.querySelectorAll('#results .hit img').length > 0",
           "the thumbnails load")
    status = b.js("document.getElementById('status').textContent")
    if not re.search(r"\d+ results for", status):
        fail("status line: %r" % status)
    os.makedirs(SHOTS, exist_ok=True)
    b.screenshot(os.path.join(SHOTS, "hits.png"))
    # play the hit whose path ends with PLAY
    card = ("[...document.querySelectorAll('#results .hit')].find(h => "
            "h.querySelector('.path').textContent.endsWith(%s))" % json.dumps(PLAY))
    if not b.js("!!(%s)" % card):
        fail("no hit for %s among the %d" % (PLAY, n))
    b.click("(%s).querySelector('.thumb')" % card, "thumbnail of " + PLAY)
    b.wait("(() => { const v = document.getElementById('player-video');"
           " return v && !v.error && v.readyState >= 2; })()", "the video loads")
    played = b.wait("(() => { const v = document.getElementById('player-video');"
                    " return (v.ended || v.currentTime > 0) && !v.error"
                    " ? [v.currentTime, v.duration, Number(v.dataset.start)] : null; })()",
                    "the video plays")
    if played[0] < played[2] - 0.01:
        fail("the video is at %.3f s, before the best moment %.3f s" % (played[0], played[2]))
    err = b.js("(() => { const v = document.getElementById('player-video');"
               " return v.error ? v.error.message || String(v.error.code) : null; })()")
    if err:
        fail("the video failed: " + err)
    b.screenshot(os.path.join(SHOTS, "player.png"))
    print("ok: %d hits, %s played from %.2f s to %.2f s of %.2f" %
          (n, PLAY, played[2], played[0], played[1]))
    if RUNS:
        b.call("Page.navigate", url=URL.rstrip("/") + "/runs")
        rows = b.wait("document.readyState === 'complete' && "
                      "document.querySelectorAll('#runs tbody tr').length",
                      "the runs page lists the runs")
        if rows != RUNS:
            fail("the runs page lists %d runs, not %d" % (rows, RUNS))
        for i in range(rows):
            b.click("document.querySelectorAll('#runs tbody input')[%d]" % i, "run box")
        b.click("document.getElementById('plot-runs')", "Plot button")
        b.click("document.querySelector('#runs tbody button')", "GPO button")
        b.wait("document.querySelectorAll('#plots img').length === 2 && "
               "[...document.querySelectorAll('#plots img')]"
               ".every(i => i.complete && i.naturalWidth > 0)",
               "the curves and the GPO figure load")
        b.screenshot(os.path.join(SHOTS, "runs.png"))
        print("ok: the runs page shows %d runs, their curves and GPO's coefficients" % rows)
finally:
    b.close()
