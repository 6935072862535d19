#!/usr/bin/python3
"""Writes the fuzz seed corpora into tests/fuzz/corpus/TARGET/: small valid and edge-case
inputs for each target of tests/fuzz/ (multi-file inputs in the form tests/fuzz/fuzz_util.h
describes). Run from the top of the tree after `make` (the catalog, feature store and
media seeds are written by bin/vtr-import and bin/vtr-synth); the output is checked in.
Files named regress_* in the corpora are not written here: they are inputs on which a
fuzzer found a bug, kept as they were found.

usage: make_fuzz_corpus.py [TARGET]...   (no TARGET: all of them)
"""
import io
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import numpy as np
import numpy.lib.format as npf

from import_fixtures import role_graph
from pattern import pattern
from safetensors_ref import REF_METADATA, REF_TENSORS, serialize

NPY_DIR = "tests/fuzz/corpus/npy"
ST_DIR = "tests/fuzz/corpus/safetensors"


def npy_corpus(tmp):
    os.makedirs(NPY_DIR, exist_ok=True)
    for name, dtype, shape, version in [
        ("f4_2x3_v1", "float32", (2, 3), 1), ("f2_5_v3", "float16", (5,), 3),
        ("u1_scalar_v1", "uint8", (), 1), ("i4_0x4_v2", "int32", (0, 4), 2),
        ("i8_1x1x2_v1", "int64", (1, 1, 2), 1),
    ]:
        buf = io.BytesIO()
        npf.write_array(buf, pattern(dtype, shape), version=(version, 0))
        with open(os.path.join(NPY_DIR, name + ".npy"), "wb") as f:
            f.write(buf.getvalue())
    with open(os.path.join(NPY_DIR, "fortran.npy"), "wb") as f:
        np.save(f, np.asfortranarray(pattern("float32", (2, 2))))


def safetensors_corpus(tmp):
    os.makedirs(ST_DIR, exist_ok=True)
    with open(os.path.join(ST_DIR, "ref.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS, REF_METADATA))
    with open(os.path.join(ST_DIR, "unaligned.safetensors"), "wb") as f:
        f.write(serialize(REF_TENSORS[:3], None, reference_order=False, pad=False))
    with open(os.path.join(ST_DIR, "metadata_only.safetensors"), "wb") as f:
        f.write(serialize([], {"k": "v"}))


# ---- the corpora of the targets that read several files, SQLite files or media -------

CORPUS = "tests/fuzz/corpus"
BIN = "bin"


def multi(first, parts):
    """A multi-file input (tests/fuzz/fuzz_util.h): first's bytes (may be b""), then each
    (name, bytes) of parts after a line "%%file NAME"."""
    out = first
    for name, data in parts:
        if out:
            out += b"\n"
        out += b"%%file " + name.encode() + b"\n" + data
    return out


def npy_bytes(a, version=(1, 0)):
    buf = io.BytesIO()
    npf.write_array(buf, np.asarray(a), version=version)
    return buf.getvalue()


def json_bytes(obj):
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def read(path):
    with open(path, "rb") as f:
        return f.read()


def tree(root, skip=()):
    """(relative path, bytes) of every file under root, in name order."""
    out = []
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(d, f), root)
            if not any(rel.startswith(s) for s in skip):
                out.append((rel, read(os.path.join(d, f))))
    return out


def write_corpus(target, seeds):
    """Writes the seeds {file name: bytes} into tests/fuzz/corpus/TARGET/ (other files
    there, such as the regression inputs the fuzzers found, stay)."""
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)


def run(*args):
    subprocess.run(args, check=True, stdout=subprocess.DEVNULL)


def fixture(tmp, layout):
    d = os.path.join(tmp, layout)
    run(sys.executable, "tests/interop/import_fixtures.py", layout, d)
    return d


def small_sqlite(path):
    """Rewrites the SQLite file at path with 512-byte pages and no journal file."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode = DELETE")
    db.execute("PRAGMA page_size = 512")
    db.execute("VACUUM")
    db.close()


def catalog_corpus(tmp):
    """A catalog of the current schema written by vtr-import (the MSR-VTT fixture's test
    file, plus a run, a vocabulary, a feature store entry and a role graph); the same as
    schema version 1 (the tables of version 2 dropped), which opening migrates; an SQLite
    file of another application; an empty file; a catalog header with schema version -1
    (which once indexed the migrations before their start)."""
    fx = fixture(tmp, "msrvtt")
    cur = os.path.join(tmp, "catalog.sqlite")
    run(os.path.join(BIN, "vtr-import"), "msrvtt", os.path.join(fx, "test_videodatainfo.json"),
        "--catalog", cur, "--dataset", "d")
    db = sqlite3.connect(cur, isolation_level=None)
    db.execute("INSERT INTO runs (kind, config, seed, code_version, data_hashes, status, "
               "result, host) VALUES ('train', 'seed: 1\n', 1, 'v', '{\"a\": \"00\"}', "
               "'done', '{\"rsum\": 1.5}', 'h')")
    db.execute("INSERT INTO vocabularies (dataset_id, name, words) VALUES "
               "(1, 'hgr', '[\"<BOS>\", \"<EOS>\", \"<UNK>\", \"video3\"]')")
    db.execute("INSERT INTO feature_stores (dataset_id, name, path, extractor, dim, dtype, "
               "rows, items) VALUES (1, 'store', '/s', 'x', 8, 'float16', 1, 1)")
    graph = json.dumps(role_graph(["video3", "caption", "0"]), separators=(",", ":"))
    db.execute("INSERT INTO caption_graphs (caption_id, graph) VALUES (1, ?)", (graph,))
    db.close()
    small_sqlite(cur)
    old = os.path.join(tmp, "v1.sqlite")
    shutil.copy(cur, old)
    db = sqlite3.connect(old, isolation_level=None)
    db.execute("DROP TRIGGER caption_graphs_follow_text")
    db.execute("DROP TABLE caption_graphs")
    db.execute("DROP TABLE vocabularies")
    db.execute("PRAGMA user_version = 1")
    db.close()
    small_sqlite(old)
    other = os.path.join(tmp, "other.sqlite")
    db = sqlite3.connect(other, isolation_level=None)
    db.execute("PRAGMA page_size = 512")
    db.execute("CREATE TABLE t (x)")
    db.close()
    negative = os.path.join(tmp, "negative.sqlite")
    db = sqlite3.connect(negative, isolation_level=None)
    db.execute("PRAGMA page_size = 512")
    db.execute("PRAGMA application_id = 1987342881")
    db.execute("PRAGMA user_version = -1")
    db.execute("CREATE TABLE t (x)")
    db.close()
    write_corpus("catalog", {"current.sqlite": read(cur), "v1.sqlite": read(old),
                             "other_app.sqlite": read(other), "empty.sqlite": b"",
                             "negative_version.sqlite": read(negative)})


# docs/index.md: the manifest of an embedding index, version 2
INDEX_SCHEMA = """
CREATE TABLE meta (id INTEGER PRIMARY KEY CHECK (id = 1), format TEXT NOT NULL,
  dim INTEGER NOT NULL CHECK (dim > 0), model TEXT NOT NULL, generation INTEGER NOT NULL,
  next_segment INTEGER NOT NULL, created_at TEXT NOT NULL, committed_at TEXT NOT NULL);
CREATE TABLE segments (id INTEGER PRIMARY KEY, rows INTEGER NOT NULL CHECK (rows > 0),
  generation INTEGER NOT NULL);
CREATE TABLE entries (segment INTEGER NOT NULL REFERENCES segments(id),
  row INTEGER NOT NULL, key TEXT NOT NULL, vector INTEGER NOT NULL,
  live INTEGER NOT NULL CHECK (live IN (0, 1)), norm REAL,
  PRIMARY KEY (segment, row)) WITHOUT ROWID;
CREATE UNIQUE INDEX entries_live_key ON entries(key, vector) WHERE live = 1;
CREATE INDEX entries_dead ON entries(segment, row) WHERE live = 0;
"""


def unit_rows(n, dim, seed):
    x = pattern("float32", (n, dim)) + seed
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype("<f2")


def index_seed(tmp, name, version, segments, entries, dim=4):
    """A multi-file input: index.sqlite (segments: {id: rows}; entries: (segment, row,
    key, vector, live)) and the segment files."""
    path = os.path.join(tmp, name + ".sqlite")
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA page_size = 512")
    schema = INDEX_SCHEMA if version >= 2 else INDEX_SCHEMA.replace(", norm REAL", "")
    db.executescript(schema)
    db.execute("PRAGMA application_id = 1987342921")
    db.execute("PRAGMA user_version = %d" % version)
    db.execute("INSERT INTO meta VALUES (1, 'vtr-embedding-index', ?, 'sha256:00', ?, ?, "
               "'2024-05-01T12:34:56.789Z', '2024-05-01T12:34:56.789Z')",
               (dim, len(segments), max(segments, default=0) + 1))
    for i, (sid, rows) in enumerate(sorted(segments.items())):
        db.execute("INSERT INTO segments VALUES (?, ?, ?)", (sid, rows, i + 1))
    for seg, row, key, vector, live in entries:
        values = (seg, row, key, vector, live) + ((1.5 + row,) if version >= 2 else ())
        db.execute("INSERT INTO entries VALUES (%s)" % ", ".join("?" * len(values)), values)
    db.close()
    parts = [("seg-%06d.npy" % sid, npy_bytes(unit_rows(rows, dim, sid)))
             for sid, rows in sorted(segments.items())]
    return multi(read(path), parts)


def embedding_index_corpus(tmp):
    """Two segments: item a (1 vector) replaced in the second, b (2 vectors); the same as
    a version 1 index (no norms); an index without segments."""
    entries = [(1, 0, "a", 0, 0), (1, 1, "b", 0, 1), (1, 2, "b", 1, 1), (2, 0, "a", 0, 1)]
    write_corpus("embedding_index", {
        "two_segments": index_seed(tmp, "two", 2, {1: 3, 2: 1}, entries),
        "version1": index_seed(tmp, "v1", 1, {1: 3, 2: 1}, entries),
        "empty": index_seed(tmp, "empty", 2, {}, []),
    })


def import_json_corpus(tmp):
    """The importer fixtures: MSR-VTT (with a role graph file beside it), VATEX,
    Karpathy."""
    fx = fixture(tmp, "msrvtt")
    graphs = {"video0 caption 0 x": role_graph(["video0", "caption", "0", "x"])}
    tv = json.loads(read(os.path.join(fx, "train_val_videodatainfo.json")))
    tv["sentences"].append({"caption": "video0 caption 0 x", "video_id": "video0"})
    write_corpus("import_json", {
        "msrvtt.json": read(os.path.join(fx, "test_videodatainfo.json")),
        "msrvtt_graphs": multi(json_bytes(tv),
                               [("sent2rolegraph.augment.json", json_bytes(graphs))]),
        "vatex.json": read(os.path.join(fixture(tmp, "vatex"), "vatex_training_v1.0.json")),
        "karpathy.json": read(os.path.join(fixture(tmp, "karpathy"), "dataset_coco.json")),
    })


def h5_recipe(path):
    """The recipe (tests/fuzz/fuzz_import_features.c) of the float datasets of an HDF5 file:
    per dataset its name, kind 0 (float32), rank 2, its shape, its values."""
    import h5py
    out = b""
    with h5py.File(path, "r") as f:
        for name in sorted(f):
            a = np.asarray(f[name], dtype="<f4")
            out += bytes([len(name.encode())]) + name.encode() + bytes([0, 2]) + bytes(a.shape)
            out += a.tobytes()
    return out


def import_features_corpus(tmp):
    """The importer fixtures, packed: npy-dir (a/, b/), precomp, and the HGR release with
    mean-pooled features, with and without role graphs and vocabulary, and with its
    per-video HDF5 frames as the target's recipes (see there)."""
    npy_dir = fixture(tmp, "npy-dir")
    hgr = fixture(tmp, "hgr")
    mean = [p for p in tree(hgr, ("ordered_feature/SA",))
            if "sent2rolegraph" not in p[0] and "word2int" not in p[0] and "int2word" not in p[0]]
    mp = "ordered_feature/MP/resnet152.pth/"
    graphs = tree(hgr, ("ordered_feature/SA", "public_split/val", "public_split/tst",
                        mp + "val", mp + "tst"))
    sa = "ordered_feature/SA/"
    frames = [p for p in tree(hgr, ("ordered_feature/MP",))
              if "sent2rolegraph" not in p[0] and "word2int" not in p[0] and "int2word" not in p[0]]
    frames = [(n + ".recipe", h5_recipe(os.path.join(hgr, n))) if n.startswith(sa) else (n, b)
              for n, b in frames]
    write_corpus("import_features", {
        "npy_dir": multi(b"", tree(npy_dir)),
        "precomp": multi(b"", tree(fixture(tmp, "precomp"))),
        "hgr_mean": multi(b"", mean),
        "hgr_graphs": multi(b"", graphs),
        "hgr_frames": multi(b"", frames),
    })


def word_vectors_corpus(tmp):
    """GloVe text (D = 3): plain, with a word2vec header, with CRLF, empty lines and a
    word with spaces, and one with a word of the wrong width."""
    write_corpus("word_vectors", {
        "glove.txt": b"the 0.1 -0.2 0.3\ndog 1 2 3\nruns -1e-3 4.5 0\n",
        "header.vec": b"3 3\nthe 0.1 0.2 0.3\ncaf\xc3\xa9 1 1 1\nzebra 0 0 0\n",
        "crlf_spaces.txt": b"the 1 2 3 \r\n\r\nat . . . 4 5 6\r\ndog 7 8 9",
        "bad_width.txt": b"the 1 2 3\ndog 1 2\n",
    })


def vocab_corpus(tmp):
    """The reference vocabulary JSON of VSE (with and without <mask>) and HGR's release
    pair (word2int.json with int2word.npy), and a word2int.json alone."""
    words = ["<pad>", "<start>", "<end>", "<unk>", "a", "man", "caf\u00e9"]

    def vse(ws):
        return json_bytes({"word2idx": {w: i for i, w in enumerate(ws)},
                           "idx2word": {str(i): w for i, w in enumerate(ws)}, "idx": len(ws)})

    hgr = ["<BOS>", "<EOS>", "<UNK>", "a", "man", "runs"]
    w2i = json_bytes({w: i for i, w in enumerate(hgr)})
    write_corpus("vocab", {
        "vse.json": vse(words),
        "vse_mask.json": vse(words + ["<mask>"]),
        "hgr_release": multi(w2i, [("int2word.npy", npy_bytes(np.array(hgr)))]),
        "hgr_word2int.json": json_bytes({"the": 0, "end": 1, "unk": 2, "dog": 3}),
    })


def tokenizer_corpus(tmp):
    """Captions that take the tokenizer's rules: contractions, quotes, abbreviations and
    sentence ends, numbers, punctuation runs, non-ASCII letters, white space."""
    write_corpus("tokenizer", {
        "contractions": b"A man's dog doesn't run; they're gonna can't.",
        "quotes": b"She said \"hello (world)\" and [left] {now}!",
        "abbreviations": b"Mr. Smith met Dr. Who e.g. in the U.S. at 3 p.m. ok. Then left.",
        "numbers": b"It costs $1,000.50 at 10:30, 3.5% more... or ---",
        "unicode": ("Caf\u00e9 \u00c9COLE \u03a9\u03bc\u03ad\u03b3\u03b1 "
                    "\u041c\u043e\u0441\u043a\u0432\u0430 \u2014 na\u00efve").encode(),
        "whitespace": b" \t a  b\r\n\x0bc\x0c d \x1c e",
    })


def feature_store_corpus(tmp):
    """Stores written by vtr-import from the npy-dir fixture: float32 and float16."""
    npy_dir = fixture(tmp, "npy-dir")
    seeds = {}
    for name, half in (("f32", []), ("f16", ["--half"])):
        store = os.path.join(tmp, "store_" + name)
        run(os.path.join(BIN, "vtr-import"), "npy-dir", os.path.join(npy_dir, "a"),
            "--catalog", os.path.join(tmp, name + ".sqlite"), "--dataset", "d",
            "--store", store, *half)
        files = dict(tree(store))
        seeds[name] = multi(files.pop("meta.json"), sorted(files.items()))
    write_corpus("feature_store", seeds)


CKPT_MODEL = [("enc.weight", "F32", [2, 3]), ("enc.bias", "F32", [3]), ("steps", "I64", [1])]


def rng_state(seed, stream, counter, used):
    return {"seed": "%016x" % seed, "stream": "%016x" % stream, "counter": "%016x" % counter,
            "used": used}


def pth_corpus(tmp):
    """torch.save files as PyTorch writes them: the samples of tests/test_pth.c (every
    dtype, views sharing a storage, a Parameter; a transposed tensor), a module's
    state_dict (_metadata, num_batches_tracked) and a checkpoint nesting one."""
    import torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
    from make_backbone_fixtures import pth_samples
    pth_samples(tmp)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4))
    torch.save(module.state_dict(), os.path.join(tmp, "conv_bn.pth"))
    torch.save({"model": module.state_dict(), "epoch": 3, "lr": 0.1},
               os.path.join(tmp, "checkpoint.pth"))
    write_corpus("pth", {name: read(os.path.join(tmp, name))
                         for name in ["sample.pth", "transposed.pth", "conv_bn.pth",
                                      "checkpoint.pth"]})


def checkpoint_corpus(tmp):
    """docs/checkpoint.md, for fuzz_checkpoint's model: a full checkpoint (Adam's state and
    the training state with its two RNGs), a model-only one, a plain state_dict with F16
    weights and an extra tensor, and a full one of AdamW with an extra string."""
    full_meta = {
        "format": "vtr-checkpoint", "version": "1", "code_version": "v",
        "optimizer": "adam", "optimizer_step": "12", "step": "12", "epoch": "1",
        "iteration": "2", "config": "seed: 1\n",
        "rng": json.dumps({"data_order": rng_state(1, 2, 7, 4),
                           "dropout": rng_state(3, 4, 5, 1)}),
    }
    opt = [("optimizer.%s.%s" % (s, n), "F32", shape) for s in ("exp_avg", "exp_avg_sq")
           for n, _, shape in CKPT_MODEL[:2]]
    adamw = dict(full_meta, optimizer="adamw", dataset="d")
    write_corpus("checkpoint", {
        "full.safetensors": serialize(CKPT_MODEL + opt, full_meta),
        "model_only.safetensors": serialize(CKPT_MODEL, {"format": "vtr-checkpoint",
                                                         "version": "1", "code_version": "v"}),
        "plain.safetensors": serialize([("enc.weight", "F16", [2, 3]), ("enc.bias", "BF16", [3]),
                                        ("steps", "I64", [1]), ("head.x", "F32", [2])], None),
        "adamw.safetensors": serialize(CKPT_MODEL + opt, adamw),
    })


def npy_item_corpus(tmp):
    """An item with its metadata, one without, and one whose metadata is not an object."""
    a = npy_bytes(pattern("uint8", (2, 2, 2, 3)))
    meta = json_bytes({"source": "a.mp4", "fps": 25, "timestamps": [0.5, 1.5]})
    write_corpus("npy_item", {
        "with_meta": multi(a, [("item.json", meta)]),
        "alone.npy": npy_bytes(pattern("float16", (3, 4))),
        "list_meta": multi(npy_bytes(pattern("float32", (4,))), [("item.json", b"[1, 2]")]),
    })


def manifest_corpus(tmp):
    """Manifests: paths, keys, comments, CRLF; an empty key; a NUL byte."""
    write_corpus("manifest", {
        "paths": b"a.mp4\nvideos/b c.mkv\n\n# comment\n/abs/x.jpg",
        "keys": b"k1\ta.mp4\r\nk 2\tb\tc.mp4\r\n#\tnot\r\n",
        "empty_key": b"ok.mp4\n\tmissing.mp4\nnext.mp4\n",
        "nul": b"a.mp4\nb\x00c.mp4\nd.mp4\n",
    })


def decode_corpus(tmp):
    """Tiny media from vtr-synth (16x16, 4 frames, a keyframe every 2): H.264 in MP4 (one
    rotated, one with AAC audio), VP9 in Matroska and WebM, MPEG-4 with B-frames in AVI,
    and PNG, JPEG, BMP and WebP images."""
    seeds = {}
    for name, args in (("h264.mp4", []), ("rotated.mov", ["--rotate", "90"]),
                       ("audio.mp4", ["--audio", "aac", "--audio-rate", "8000",
                                      "--audio-channels", "1", "--frames", "2"]),
                       ("vp9.mkv", []), ("vp9.webm", ["--frames", "2"]),
                       ("mpeg4.avi", ["--bframes", "1", "--frames", "3"]),
                       ("image.png", []), ("image.jpg", []), ("image.bmp", []),
                       ("image.webp", [])):
        out = os.path.join(tmp, name)
        run(os.path.join(BIN, "vtr-synth"), "--size", "16x16", "--frames", "4", "--gop", "2",
            *args, out)
        seeds[name] = read(out)
    write_corpus("decode", seeds)



GENERATORS = {
    "npy": npy_corpus, "safetensors": safetensors_corpus, "catalog": catalog_corpus,
    "embedding_index": embedding_index_corpus, "import_json": import_json_corpus,
    "import_features": import_features_corpus, "word_vectors": word_vectors_corpus,
    "vocab": vocab_corpus, "tokenizer": tokenizer_corpus,
    "feature_store": feature_store_corpus, "checkpoint": checkpoint_corpus,
    "npy_item": npy_item_corpus, "manifest": manifest_corpus, "decode": decode_corpus,
    "pth": pth_corpus,
}


def main():
    targets = sys.argv[1:] or list(GENERATORS)
    for t in targets:
        if t not in GENERATORS:
            raise SystemExit("make_fuzz_corpus.py: no corpus generator for %s (%s)"
                             % (t, ", ".join(GENERATORS)))
    with tempfile.TemporaryDirectory() as tmp:
        for t in targets:
            d = os.path.join(tmp, t)
            os.makedirs(d)
            GENERATORS[t](d)


if __name__ == "__main__":
    main()
