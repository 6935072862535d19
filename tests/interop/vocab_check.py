#!/usr/bin/python3
"""Python's side of the vocabulary interop tests (tests/test_vocab.c).

  vocab_check.py check-vse FILE WORD [WORD ...]
      Loads FILE, written by vtr, as the VSE reference does (json.load, then
      deserialize_vocab + add_word('<mask>')) and checks that the ids are WORD... in
      order, that idx2word and word2idx agree, and that <mask> gets the next id.
  vocab_check.py write-vse FILE
      Writes a reference vocabulary with json.dump as serialize_vocab does, with
      non-ASCII words (json.dump escapes them as \\u....).
  vocab_check.py write-hgr DIR
      Writes HGR's word2int.json and int2word.npy (np.save of a list of str, which numpy
      stores as a '<U..' unicode array) for the words <BOS> <EOS> <UNK> a man caf\u00e9.
Exit status 0 when every check passes; otherwise 1 with the reason on stderr.
"""
import json
import os
import sys

VSE_WORDS = ["<pad>", "<start>", "<end>", "<unk>", "a", "man", "caf\u00e9", "na\u00efve",
             "\u732b", "dog"]
HGR_WORDS = ["<BOS>", "<EOS>", "<UNK>", "a", "man", "caf\u00e9"]


def fail(msg):
    print("vocab_check: " + msg, file=sys.stderr)
    sys.exit(1)


def check_vse(path, words):
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    if sorted(d) != ["idx", "idx2word", "word2idx"]:
        fail("%s: keys %s" % (path, sorted(d)))
    n = d["idx"]
    if n != len(words):
        fail("%s: idx %d, expected %d" % (path, n, len(words)))
    if sorted(d["idx2word"], key=int) != [str(i) for i in range(n)]:
        fail("%s: idx2word keys are not 0..%d" % (path, n - 1))
    for i, w in enumerate(words):
        if d["idx2word"][str(i)] != w:
            fail("%s: idx2word[%d] = %r, expected %r" % (path, i, d["idx2word"][str(i)], w))
        if d["word2idx"].get(w) != i:
            fail("%s: word2idx[%r] = %r, expected %d" % (path, w, d["word2idx"].get(w), i))
    if len(d["word2idx"]) != n:
        fail("%s: word2idx has %d entries" % (path, len(d["word2idx"])))
    # the reference appends <mask> after loading
    if "<mask>" in d["word2idx"]:
        fail("%s: <mask> is in the file" % path)
    with open(path, "rb") as f:
        raw = f.read()
    if any(b > 0x7F for b in raw):
        fail("%s: non-ASCII bytes (json.dump escapes them)" % path)


def write_vse(path):
    d = {"word2idx": {w: i for i, w in enumerate(VSE_WORDS)},
         "idx2word": {i: w for i, w in enumerate(VSE_WORDS)},  # int keys, as the reference
         "idx": len(VSE_WORDS)}
    with open(path, "w") as f:
        json.dump(d, f)


def write_hgr(directory):
    import numpy as np
    with open(os.path.join(directory, "word2int.json"), "w") as f:
        json.dump({w: i for i, w in enumerate(HGR_WORDS)}, f)
    np.save(os.path.join(directory, "int2word.npy"), HGR_WORDS)
    back = np.load(os.path.join(directory, "int2word.npy"))
    if back.dtype.kind != "U" or list(back) != HGR_WORDS:
        fail("int2word.npy: dtype %s" % back.dtype)


def main(argv):
    if len(argv) >= 3 and argv[1] == "check-vse":
        check_vse(argv[2], argv[3:])
    elif len(argv) == 3 and argv[1] == "write-vse":
        write_vse(argv[2])
    elif len(argv) == 3 and argv[1] == "write-hgr":
        write_hgr(argv[2])
    else:
        fail("usage: see the top of this file")


if __name__ == "__main__":
    main(sys.argv)
