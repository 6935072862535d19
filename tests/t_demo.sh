#!/bin/sh
# make demo's pipeline (pipeline/demo.sh) on a small archive: 120 clips (84 train, 12 val,
# 24 test), 10 epochs. Every stage's output exists, the truncated file is reported and
# skipped, the four runs (VSE++, VSE∞, HGR, HGR∞) and their evaluations are there, the
# eval JSONs parse, and the table has the four rows under one protocol (VSE's); the plots
# (training curves, GPO coefficients of VSE∞ and HGR∞) are written as SVG that parses and
# PNG, and the final printout lists them. What they
# learn, against chance computed from the test split's clips and captions (24 and 120:
# text -> video R@10 41.7, RSUM 126.1):
#   VSE∞          text -> video R@10 >= chance + 20, RSUM >= chance + 80;
#   HGR and HGR∞  (fused score) text -> video R@10 >= chance + 15, RSUM >= chance + 50,
#                 and RSUM >= VSE∞'s - 100 (not far below VSE∞ on the same data).
# The bounds are below the worst of archive seeds 1-8 (this test runs seed 1):
#   VSE∞  R@10 78.3 80.8 73.3 65.8 75.0 62.5 65.0 75.8;
#         RSUM 253.3 259.2 251.7 255.0 293.3 226.7 231.7 288.3
#   HGR   R@10 69.2 71.7 65.0 70.8 64.2 64.2 68.3 68.3;
#         RSUM 220.0 272.5 242.5 299.2 219.2 212.5 191.7 220.8 (VSE∞'s - 74.1 at worst)
#   HGR∞  R@10 75.0 77.5 67.5 71.7 69.2 69.2 65.8 77.5;
#         RSUM 291.7 311.7 320.8 282.5 265.8 270.0 265.8 295.8 (VSE∞'s - 27.5 at worst)
# An HGR whose scores collapse to one value (as with the hardest negative on this archive)
# sits at chance and fails. The bounds were set on random features of an untrained
# ResNet-18 (vtr-backbone-init), the demo's fallback; its default backbone, nsfwjs's
# MobileNetV2, clears them by more (bench/demo_search in bench/RESULTS.md).
set -u
for p in vtr-synth vtr-import vtr-decode vtr-backbone-init vtr-features vtr-train vtr-eval \
    vtr-index vtr-search; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
[ -f pipeline/demo.sh ] || { echo "run from the top of the source tree"; exit 77; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}
out=$dir/demo
VTR_DEMO_DIR=$out VTR_DEMO_CLIPS=120 VTR_DEMO_EPOCHS=10 VTR_DEMO_SEED=1 \
    sh pipeline/demo.sh >"$dir/log" 2>&1 || {
    tail -20 "$dir/log"
    fail "demo.sh: exit status $?"
}

# 1-2: the archive, its annotations and the catalog
[ "$(ls "$out/archive" | grep -c '^video[0-9]*\.mp4$')" -eq 120 ] || fail "expected 120 clips"
[ -s "$out/archive/videodatainfo.json" ] || fail "no annotations"
grep -q 'demo: 120 items (120 new), 600 captions; splits: train 84, val 12, test 24' "$dir/log" ||
    fail "import summary: $(grep 'vtr-import' "$dir/log")"
[ -s "$out/vtr.db" ] || fail "no catalog"
# the role graphs beside the annotations, one per caption, in the catalog (for HGR)
[ -s "$out/archive/sent2rolegraph.augment.json" ] || fail "no role graphs"
grep -q 'demo: 120 items .*; role graphs for 600 captions, 0 without one' "$dir/log" ||
    fail "import summary of role graphs: $(grep 'vtr-import' "$dir/log")"
# 3: the truncated file named in one line, the others decoded
grep -q 'vtr-decode: .*broken.mp4: ' "$dir/log" || fail "broken.mp4 not reported"
grep -q 'vtr-decode exit status: 2' "$dir/log" || fail "vtr-decode did not exit 2"
# 4: the backbone says what it is; the store has every clip, 10 frames each
# (nsfwjs's MobileNetV2 where pipeline/nsfwjs.sh can fetch it, else the untrained ResNet-18)
if grep -q 'The backbone is MobileNetV2' "$dir/log"; then
    grep -q '"arch":"mobilenet_v2"' "$out/backbone.safetensors" &&
        grep -q '"pretrained":"true"' "$out/backbone.safetensors" || fail "backbone metadata"
    dim=1280
else
    grep -q 'NOT a pretrained network' "$dir/log" || fail "no word on the backbone"
    grep -q '"pretrained":"false"' "$out/backbone.safetensors" || fail "backbone metadata"
    dim=512
fi
for f in rows.npy offsets.npy keys.txt meta.json; do
    [ -s "$out/store/$f" ] || fail "store: no $f"
done
[ "$(wc -l <"$out/store/keys.txt")" -eq 120 ] || fail "store: expected 120 keys"
grep -q '"rows": 1200' "$out/store/meta.json" || fail "store: expected 1200 rows"
grep -q "\"dim\": $dim" "$out/store/meta.json" || fail "store: expected dim $dim"
# 5-6: the five runs, their evaluations, the table
for m in vsepp vse-inf hgr hgr-inf set; do
    for f in best.safetensors last.safetensors metrics.jsonl config.yaml vocab.json; do
        [ -s "$out/runs/$m/$f" ] || fail "run $m: no $f"
    done
    [ "$(wc -l <"$out/runs/$m/metrics.jsonl")" -eq 10 ] || fail "run $m: expected 10 epochs"
    [ -s "$out/eval-$m.json" ] || fail "no eval-$m.json"
done
for row in 'VSE++ (mean)' 'VSE∞ (GPO)' 'HGR (attention)' 'HGR∞ (GPO)' 'Sets (K=4)' 'chance'; do
    grep -q "^$row " "$dir/log" || fail "table row '$row' missing"
done
grep -q 'VSE protocol for all rows' "$dir/log" || fail "the table does not name its protocol"
/usr/bin/python3 - "$out" >"$dir/learned" 2>&1 <<'EOF' || fail "evaluations: $(cat "$dir/learned")"
import json, sys
out = sys.argv[1]
ev = {m: json.load(open(f"{out}/eval-{m}.json"))
      for m in ("vsepp", "vse-inf", "hgr", "hgr-inf", "set")}
for m, e in ev.items():
    assert e["split"] == "test" and e["items"] == 24 and e["captions"] == 120, (m, e)
    # one protocol for the five: VSE's, every caption a query (HGR's de-duplicates)
    assert not e["protocol"]["dedup"], (m, e["protocol"])
    assert (e.get("score") == "fused") == m.startswith("hgr"), (m, e.get("score"))
# the HGR runs' vocabulary: built from the training captions, HGR's specials first
for m in ("hgr", "hgr-inf"):
    words = json.load(open(f"{out}/runs/{m}/vocab.json"))
    assert words[:3] == ["<BOS>", "<EOS>", "<UNK>"] and "circle" in words, (m, words[:8])

# chance, a random ranking of n clips with c captions (c / n each): text -> video R@K =
# K / n; video -> text R@K = 1 - C(c - c/n, K) / C(c, K)
n, c = ev["vse-inf"]["items"], ev["vse-inf"]["captions"]
def none(k):
    p = 1.0
    for i in range(k):
        p *= (c - c // n - i) / (c - i)
    return p
t2v = {k: 100 * k / n for k in (1, 5, 10)}
rsum = sum(t2v.values()) + sum(100 * (1 - none(k)) for k in (1, 5, 10))
print(f"chance t2v R@10 {t2v[10]:.1f} RSUM {rsum:.1f};", end="")
for m, e in ev.items():
    print(f" {m} {e['t2v']['r10']:.1f} {e['rsum']:.1f};", end="")
print()
bad = []
vse = ev["vse-inf"]
if vse["t2v"]["r10"] < t2v[10] + 20 or vse["rsum"] < rsum + 80:
    bad.append("VSE∞: t2v R@10 < chance + 20 or RSUM < chance + 80")
for m in ("hgr", "hgr-inf"):
    e = ev[m]
    if e["t2v"]["r10"] < t2v[10] + 15 or e["rsum"] < rsum + 50:
        bad.append(f"{m}: t2v R@10 < chance + 15 or RSUM < chance + 50")
    if e["rsum"] < vse["rsum"] - 100:
        bad.append(f"{m}: RSUM < VSE∞'s - 100")
e = ev["set"]
if e["t2v"]["r10"] < t2v[10] + 15 or e["rsum"] < rsum + 50:
    bad.append("sets: t2v R@10 < chance + 15 or RSUM < chance + 50")
if bad:
    sys.exit("; ".join(bad))
EOF
# 11: the plots, SVG and PNG, listed in the printout
for f in curves gpo-vse-inf gpo-hgr-inf; do
    [ -s "$out/plots/$f.svg" ] && [ -s "$out/plots/$f.png" ] || fail "no plots/$f.svg and .png"
    grep -q "^  $out/plots/$f.svg$" "$dir/log" || fail "the printout does not list plots/$f.svg"
    [ "$(head -c 4 "$out/plots/$f.png" | od -An -tx1 | tr -d ' ')" = 89504e47 ] ||
        fail "plots/$f.png is not a PNG"
done
/usr/bin/python3 -c 'import sys, xml.dom.minidom; [xml.dom.minidom.parse(f) for f in sys.argv[1:]]' \
    "$out"/plots/*.svg || fail "an SVG of plots/ does not parse"
grep -q 'vtr-index: .*broken.mp4: ' "$dir/log" || fail "vtr-index did not report broken.mp4"
grep -q 'vtr-index exit status: 2' "$dir/log" || fail "first vtr-index run did not exit 2"
grep -q 'vtr-index exit status: 0' "$dir/log" || fail "second vtr-index run did not exit 0"
# every clip is searchable: the first query's table has 5 ranked rows naming clips
[ "$(grep -c 'video[0-9]*\.mp4' "$dir/log")" -ge 15 ] || fail "searches did not list clips"
grep -q '^query: a red circle' "$dir/log" || fail "no search output"
# the HGR∞ index: every clip but the broken one; a caption searched with its role graph is
# scored by all three levels, without one by the global level alone
grep -q "index-hgr: 120 added, 0 updated, 0 removed, 1 failed" "$dir/log" ||
    fail "the HGR index: $(grep 'index-hgr' "$dir/log")"
grep -q '^levels: global, verb ([1-9] phrases*), noun ([1-9] phrases*)$' "$dir/log" ||
    fail "HGR search with a role graph: $(sed -n '/== 9\./,$p' "$dir/log")"
grep -q '^levels: global only (no role graph' "$dir/log" || fail "HGR search without a graph"
[ "$(sed -n '/== 9\./,$p' "$dir/log" | grep -Ec '^ +[1-5] +-?0\.[0-9]{4} +-?0\.[0-9]{4} +-?0\.[0-9]{4} +-?0\.[0-9]{4} .*video[0-9]+\.mp4$')" -eq 10 ] ||
    fail "HGR search tables: $(sed -n '/== 9\./,$p' "$dir/log")"
# the sets' index: 4 rows per clip, searched by smooth-Chamfer
grep -q "index-set: 120 added, 0 updated, 0 removed, 1 failed" "$dir/log" ||
    fail "the sets' index: $(grep 'index-set' "$dir/log")"
[ "$(sed -n '/== 10\./,$p' "$dir/log" | grep -Ec '^ +[1-5] +-?0\.[0-9]{4} .*video[0-9]+\.mp4$')" -eq 5 ] ||
    fail "search with the sets: $(sed -n '/== 10\./,$p' "$dir/log")"
# the last line: how to search the archive in a browser, with the index just built
grep -q "^search the archive in a browser: vtr-serve $out/index " "$dir/log" ||
    fail "no vtr-serve line: $(tail -2 "$dir/log")"
echo "ok: text -> video R@10 and RSUM, $(cat "$dir/learned")"
