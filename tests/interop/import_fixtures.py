"""Tiny fixtures in exactly the layouts vtr-import reads (import/import.h), written with
numpy, h5py and json as the releases are.

usage: import_fixtures.py LAYOUT DIR [VARIANT]

Feature value of item g, row r, column c: g * 1000 + r * 10 + c (exact in float16 too for
the small g used here, except where noted). Dim 8 everywhere. What each fixture holds is
listed in its function; tests/test_import.c and tests/t_import.sh check those counts.
"""
import json
import os
import sys

import numpy as np

DIM = 8


def rows(g, n, dtype=np.float32):
    r = np.arange(n).reshape(n, 1) * 10 + np.arange(DIM).reshape(1, DIM)
    return (g * 1000 + r).astype(dtype)


def write_json(path, obj):
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f)


def npy_dir(d, variant):
    """a/: v0 (2, 8) float16 [g 0], v1 (3, 8) [g 1], v2 (8,) [g 2, one row], plus files
    that are ignored (notes.txt, .hidden.npy, a directory sub.npy); b/: v3 (4, 8) [g 3].
    Variants add b/v4.npy: bad-dim (2, 5), bad-npy (truncated), dup: b/v1.npy."""
    a, b = os.path.join(d, "a"), os.path.join(d, "b")
    os.makedirs(a)
    os.makedirs(b)
    os.makedirs(os.path.join(a, "sub.npy"))
    np.save(os.path.join(a, "v0.npy"), rows(0, 2, np.float16))
    np.save(os.path.join(a, "v1.npy"), rows(1, 3))
    np.save(os.path.join(a, "v2.npy"), rows(2, 1)[0])
    np.save(os.path.join(a, ".hidden.npy"), rows(9, 1))
    with open(os.path.join(a, "notes.txt"), "w") as f:
        f.write("not a feature file\n")
    np.save(os.path.join(b, "v3.npy"), rows(3, 4))
    if variant == "bad-dim":
        np.save(os.path.join(b, "v4.npy"), np.zeros((2, 5), np.float32))
    elif variant == "bad-npy":
        np.save(os.path.join(b, "v4.npy"), rows(4, 2))
        with open(os.path.join(b, "v4.npy"), "r+b") as f:
            f.truncate(100)
    elif variant == "dup":
        np.save(os.path.join(b, "v1.npy"), rows(1, 3))


def precomp(d, variant):
    """train: 4 images (4, 3, 8) [g 10..13], no ids (keys train_0 .. train_3);
    dev: 2 images [g 20, 21], dev_ids.txt one id per caption (501 x5, 502 x5);
    test: 2 images [g 30, 31], ids 601 602; testall: 3 images, ids 601 602 603 [g 30 31 32].
    5 captions per image, "SPLIT image I caption J". Items 9, captions 45, rows 27.
    Variants: caps-mismatch (test_caps.txt has 9 lines), no-caps (test_caps.txt missing)."""
    os.makedirs(d)

    def split(name, gs, ids=None, per_caption_ids=False, ncaps=None):
        np.save(os.path.join(d, name + "_ims.npy"), np.stack([rows(g, 3) for g in gs]))
        lines = ["%s image %d caption %d" % (name, i, j) for i in range(len(gs)) for j in range(5)]
        if ncaps is not None:
            lines = lines[:ncaps]
        with open(os.path.join(d, name + "_caps.txt"), "w") as f:
            f.write("\n".join(lines) + "\n")
        if ids is not None:
            out = [i for i in ids for _ in range(5)] if per_caption_ids else ids
            with open(os.path.join(d, name + "_ids.txt"), "w") as f:
                f.write("\n".join(out) + "\n")

    split("train", [10, 11, 12, 13])
    split("dev", [20, 21], ["501", "502"], per_caption_ids=True)
    split("test", [30, 31], ["601", "602"], ncaps=9 if variant == "caps-mismatch" else None)
    split("testall", [30, 31, 32], ["601", "602", "603"])
    if variant == "no-caps":
        os.remove(os.path.join(d, "test_caps.txt"))


HGR_NAMES = {"trn": ["video0", "video1", "clips/v2"], "val": ["video3"],
             "tst": ["video4", "vid\u00e95"]}
HGR_FRAMES = {"video0": 5, "video1": 3, "clips/v2": 2, "video3": 4, "video4": 1,
              "vid\u00e95": 6}
HGR_CAPTIONS = {"video0": 2, "video1": 3, "clips/v2": 1, "video3": 2, "video4": 2,
                "vid\u00e95": 3, "extra": 1}


def role_graph(words, noun_role="ARG0"):
    """HGR's [nodes, edges] for a caption of >= 3 words: ROOT, verb words[2], nouns
    words[0:2] (noun_role) and words[3:]."""
    n = len(words)
    nodes = {
        "ROOT": {"role": "ROOT", "spans": list(range(n)), "words": words},
        "1": {"role": "V", "spans": [2], "words": [words[2]]},
        "2": {"role": noun_role, "spans": [0, 1], "words": words[0:2]},
        "3": {"role": "ARG1", "spans": list(range(3, n)), "words": words[3:]},
    }
    return [nodes, [["1", "2", noun_role], ["1", "3", "ARG1"]]]


def hgr_annotations(anno, caps, variant):
    """sent2rolegraph.augment.json: a graph for every caption but "a video1 caption number
    2" and "a video4 caption number 1" (so 11 of the 13 imported captions have one); "a
    video0 caption number 0" twice, first with an invalid graph (a negative span), last
    with a valid one whose node "2" has role ARGM-LOC (Python's json keeps the last); an
    invalid graph for "extra"'s caption, which is not imported. word2int.json and
    int2word.npy: <BOS> <EOS> <UNK>, then the caption words in first-seen order (16 ids).
    Variants: bad-graph (video3's caption 1 has spans [-3]), bad-vocab (int2word.npy with
    two words swapped), no-int2word."""
    without = {"a video1 caption number 2", "a video4 caption number 1"}
    entries = []
    for v, texts in caps.items():
        for t in texts:
            if t in without:
                continue
            g = role_graph(t.split())
            if t == "a video0 caption number 0":
                bad = role_graph(t.split())
                bad[0]["2"]["spans"] = [-1, 1]
                entries.append((t, bad))
                g = role_graph(t.split(), "ARGM-LOC")
            if v == "extra" or (variant == "bad-graph" and t == "a video3 caption number 1"):
                g[0]["3"]["spans"] = [-3]
            entries.append((t, g))
    # json.dump cannot write a key twice: the object is written entry by entry
    with open(os.path.join(anno, "sent2rolegraph.augment.json"), "w", encoding="utf-8") as f:
        f.write("{" + ", ".join("%s: %s" % (json.dumps(k), json.dumps(g)) for k, g in entries)
                + "}")
    words = ["<BOS>", "<EOS>", "<UNK>"]
    for texts in caps.values():
        for t in texts:
            words += [w for w in t.split() if w not in words]
    write_json(os.path.join(anno, "word2int.json"), {w: i for i, w in enumerate(words)})
    if variant == "bad-vocab":
        words[4], words[5] = words[5], words[4]
    if variant != "no-int2word":
        np.save(os.path.join(anno, "int2word.npy"), np.array(words))


def hgr(d, variant):
    """names trn [video0 video1 clips/v2], val [video3], tst [video4 vidé5] (g = position
    in that order, 0..5); frames 5 3 2 4 1 6; captions 2 3 1 2 2 3 (and 1 for "extra",
    named nowhere). SA/resnet152.pth/{set}_ft.hdf5 with datasets named with '/' -> '_';
    MP/resnet152.pth/{set}_ft.npy the per-video means; role graphs and the vocabulary as
    hgr_annotations writes them. Variants: missing-video (vidé5 not in tst_ft.hdf5),
    no-caption (video4 absent from ref_captions.json), object-names (tst_names.npy an
    object array), two-features (a second SA directory), and those of hgr_annotations."""
    import h5py

    anno = os.path.join(d, "annotation", "RET")
    split_dir = os.path.join(d, "public_split")
    sa = os.path.join(d, "ordered_feature", "SA", "resnet152.pth")
    mp = os.path.join(d, "ordered_feature", "MP", "resnet152.pth")
    for p in (anno, split_dir, sa, mp):
        os.makedirs(p)
    caps = {v: ["a %s caption number %d" % (v, j) for j in range(n)]
            for v, n in HGR_CAPTIONS.items()}
    if variant == "no-caption":
        del caps["video4"]
    write_json(os.path.join(anno, "ref_captions.json"), caps)
    hgr_annotations(anno, caps, variant)
    g = 0
    for s in ("trn", "val", "tst"):
        names = HGR_NAMES[s]
        if variant == "object-names" and s == "tst":
            np.save(os.path.join(split_dir, s + "_names.npy"), np.array(names, dtype=object),
                    allow_pickle=True)
        else:
            np.save(os.path.join(split_dir, s + "_names.npy"), np.array(names))
        means = []
        with h5py.File(os.path.join(sa, s + "_ft.hdf5"), "w") as f:
            for name in names:
                ft = rows(g, HGR_FRAMES[name])
                if not (variant == "missing-video" and name == "vid\u00e95"):
                    f.create_dataset(name.replace("/", "_"), data=ft)
                means.append(ft.mean(axis=0))
                g += 1
        np.save(os.path.join(mp, s + "_ft.npy"), np.stack(means).astype(np.float32))
    if variant == "two-features":
        os.makedirs(os.path.join(d, "ordered_feature", "SA", "i3d"))


def msrvtt(d, variant):
    """train_val_videodatainfo.json: video0 video1 (train), video2 (validate); captions
    3 2 2, interleaved in "sentences"; test_videodatainfo.json: video3 (test), 2 captions.
    Variants: bad-json (the test file cut short), unknown-video (a sentence of video9)."""
    os.makedirs(d)
    tv = {
        "info": {"year": 2016},
        "videos": [
            {"category": 9, "url": "u0", "video_id": "video0", "start time": 1.0,
             "end time": 9.0, "split": "train", "id": 0},
            {"category": 3, "url": "u1", "video_id": "video1", "split": "train", "id": 1},
            {"category": 1, "url": "u2", "video_id": "video2", "split": "validate", "id": 2},
        ],
        "sentences": [
            {"caption": "video0 caption 0", "video_id": "video0", "sen_id": 0},
            {"caption": "video1 caption 0", "video_id": "video1", "sen_id": 1},
            {"caption": "video0 caption 1", "video_id": "video0", "sen_id": 2},
            {"caption": "video2 caption 0", "video_id": "video2", "sen_id": 3},
            {"caption": "video1 caption 1", "video_id": "video1", "sen_id": 4},
            {"caption": "video2 caption 1", "video_id": "video2", "sen_id": 5},
            {"caption": "video0 caption 2 \u2014 caf\u00e9", "video_id": "video0", "sen_id": 6},
        ],
    }
    if variant == "unknown-video":
        tv["sentences"].append({"caption": "lost", "video_id": "video9", "sen_id": 7})
    write_json(os.path.join(d, "train_val_videodatainfo.json"), tv)
    test = {
        "videos": [{"video_id": "video3", "split": "test", "id": 3}],
        "sentences": [
            {"caption": "video3 caption 0", "video_id": "video3", "sen_id": 8},
            {"caption": "video3 caption 1", "video_id": "video3", "sen_id": 9},
        ],
    }
    path = os.path.join(d, "test_videodatainfo.json")
    write_json(path, test)
    if variant == "bad-json":
        with open(path, "r+b") as f:
            f.truncate(60)


def vatex(d, variant):
    """vatex_training_v1.0.json: a, b (3 English captions each); vatex_validation_v1.0.json:
    c, d (2 each); other.json: e (1 caption), f (no enCap)."""
    os.makedirs(d)

    def entry(vid, n):
        return {"videoID": vid, "enCap": ["%s english %d" % (vid, j) for j in range(n)],
                "chCap": ["%s \u4e2d\u6587 %d" % (vid, j) for j in range(n)]}

    write_json(os.path.join(d, "vatex_training_v1.0.json"),
               [entry("a_000001_000011", 3), entry("b_000002_000012", 3)])
    write_json(os.path.join(d, "vatex_validation_v1.0.json"),
               [entry("c_000003_000013", 2), entry("d_000004_000014", 2)])
    write_json(os.path.join(d, "other.json"), [entry("e_000005_000015", 1), {"videoID": "f"}])


def karpathy(d, variant):
    """dataset_coco.json: 5 images, splits train, restval, val, test, test; 5 captions
    each, the last image 6 with one given only as tokens. Variant bad-split: a "holdout"
    split."""
    os.makedirs(d)
    files = [("train2014", "COCO_train2014_000000000009.jpg", "train"),
             ("val2014", "COCO_val2014_000000000042.jpg", "restval"),
             ("val2014", "COCO_val2014_000000000073.jpg", "val"),
             ("val2014", "COCO_val2014_000000000074.jpg", "test"),
             ("val2014", "COCO_val2014_000000000133.jpg", "test")]
    images = []
    sid = 0
    for i, (fp, fn, split) in enumerate(files):
        sents = []
        for j in range(5):
            raw = "Image %d, caption %d." % (i, j)
            sents.append({"tokens": ["image", str(i), "caption", str(j)], "raw": raw,
                          "imgid": i, "sentid": sid})
            sid += 1
        if i == 4:
            sents.append({"tokens": ["only", "tokens", "here"], "imgid": i, "sentid": sid})
        if variant == "bad-split" and i == 2:
            split = "holdout"
        images.append({"filepath": fp, "sentids": [s["sentid"] for s in sents],
                       "filename": fn, "imgid": i, "split": split, "sentences": sents,
                       "cocoid": int(fn[-10:-4])})
    write_json(os.path.join(d, "dataset_coco.json"), {"images": images, "dataset": "coco"})


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    layout, d = sys.argv[1], sys.argv[2]
    variant = sys.argv[3] if len(sys.argv) > 3 else ""
    {"npy-dir": npy_dir, "precomp": precomp, "hgr": hgr, "msrvtt": msrvtt, "vatex": vatex,
     "karpathy": karpathy}[layout](d, variant)


if __name__ == "__main__":
    main()
