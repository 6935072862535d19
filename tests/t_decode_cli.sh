#!/bin/sh
# vtr-decode from the command line: record streams, --out-dir, manifests and stdin, audio,
# a bad item among good ones, exit codes. Inputs come from vtr-synth in a temporary dir.
set -u
for p in vtr-decode vtr-synth vtr-inspect; do
    command -v $p >/dev/null 2>&1 || { echo "$p not built"; exit 77; }
done
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() {
    echo "FAIL: $*"
    exit 1
}

vtr-synth --frames 30 --gop 10 --bframes 2 --audio aac "$dir/a.mp4" || fail "vtr-synth a.mp4"
vtr-synth --frames 20 --gop 5 "$dir/b.webm" || fail "vtr-synth b.webm"
vtr-synth --first-index 7 "$dir/c.png" || fail "vtr-synth c.png"
: >"$dir/empty.mp4"
printf 'clip_a\t%s\n%s\n# a comment\n\nbad\t%s\nimg\t%s\n' "$dir/a.mp4" "$dir/b.webm" \
    "$dir/missing.mp4" "$dir/c.png" >"$dir/list.tsv"

# 1. a record stream; the missing file fails alone: exit 2, one line naming it
vtr-decode --frames 4 -m "$dir/list.tsv" -o "$dir/out.rec" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] || fail "exit $rc with a bad item, expected 2"
[ "$(wc -l <"$dir/err")" -eq 1 ] || fail "expected one error line, got: $(cat "$dir/err")"
grep -q "missing.mp4" "$dir/err" || fail "the error does not name the file: $(cat "$dir/err")"
vtr-inspect --json "$dir/out.rec" >"$dir/inspect" || fail "vtr-inspect out.rec"
[ "$(grep -c '"kind":"record"' "$dir/inspect")" -eq 3 ] || fail "expected 3 records: $(cat "$dir/inspect")"
for key in clip_a b img; do
    grep "\"key\":\"$key\"" "$dir/inspect" | grep -q '"shape":\[4,120,160,3\]' ||
        fail "record $key missing or of the wrong shape"
done
grep '"key":"clip_a"' "$dir/inspect" | grep -q '"timestamps":\[' || fail "no timestamps"
grep '"key":"clip_a"' "$dir/inspect" | grep -q '"sampler":{"mode":"frames","n":4}' ||
    fail "no sampler in the metadata"

# 2. --out-dir: NPY and JSON per good item, nothing for the bad one, no temporary files
vtr-decode --fps 5 --size 64x64 --out-dir "$dir/npy" -m "$dir/list.tsv" 2>/dev/null
[ $? -eq 2 ] || fail "--out-dir: expected exit 2"
for key in clip_a b img; do
    [ -s "$dir/npy/$key.npy" ] && [ -s "$dir/npy/$key.json" ] || fail "no $key.npy/.json"
done
[ ! -e "$dir/npy/bad.npy" ] && [ ! -e "$dir/npy/bad.json" ] || fail "files for the bad item"
ls "$dir/npy" | grep -q '\.tmp\.' && fail "temporary files left in --out-dir"
vtr-inspect "$dir/npy/b.npy" | grep -q 'uint8 (4, 64, 64, 3)' ||
    fail "b.npy: $(vtr-inspect "$dir/npy/b.npy")"

# 2b. two files of one name in different folders (key x): the second fails in one line
#     naming both, the first's files stay (never overwritten silently); the same with -o
mkdir -p "$dir/a" "$dir/b" && cp "$dir/c.png" "$dir/a/x.png" && cp "$dir/b.webm" "$dir/b/x.webm" ||
    fail "x in a/ and b/"
vtr-decode --frames 2 --out-dir "$dir/twice" "$dir/a/x.png" "$dir/b/x.webm" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "^vtr-decode: x: $dir/a/x.png and $dir/b/x.webm have the same key; the second is not written\$" "$dir/err" ||
    fail "one key twice, --out-dir: exit $rc: $(cat "$dir/err")"
grep -q "\"source\": \"$dir/a/x.png\"" "$dir/twice/x.json" || fail "one key twice: x.json is not a/x.png's"
vtr-decode --frames 2 -o "$dir/twice.rec" "$dir/a/x.png" "$dir/b/x.webm" 2>/dev/null
[ $? -eq 2 ] && [ "$(vtr-inspect --json "$dir/twice.rec" | grep -c '"key":"x"')" -eq 1 ] ||
    fail "one key twice, -o"

# 3. paths on stdin, all good: exit 0
printf '%s\n' "$dir/b.webm" | vtr-decode --keyframes - >"$dir/stdin.rec" ||
    fail "paths on stdin: exit $?"
vtr-inspect --json "$dir/stdin.rec" | grep -q '"key":"b"' || fail "stdin: no record b"

# 4. audio: written for the video with a track, reported as absent for the other
vtr-decode --frames 2 --audio-dir "$dir/aud" --audio-format flac -o "$dir/aud.rec" \
    "$dir/a.mp4" "$dir/b.webm" || fail "--audio-dir: exit $?"
[ -s "$dir/aud/a.flac" ] || fail "no a.flac"
[ ! -e "$dir/aud/b.flac" ] || fail "b.flac written for a video without audio"
vtr-inspect --json "$dir/aud.rec" | grep '"key":"b"' |
    grep -q '"audio":null,"audio_reason":"no audio stream"' || fail "b: audio not reported absent"
vtr-decode --frames 1 --audio "$dir/single.wav" -o "$dir/single.rec" "$dir/a.mp4" ||
    fail "--audio: exit $?"
[ -s "$dir/single.wav" ] || fail "no single.wav"

# 4b. a key that cannot name a file in --audio-dir fails its item before anything is
#     written: nothing outside the directory is written or removed
mkdir -p "$dir/deep" && echo precious >"$dir/victim.wav"
printf '../../victim\t%s\nclip_a\t%s\n' "$dir/a.mp4" "$dir/a.mp4" >"$dir/escape.tsv"
printf '../../victim\t%s\n' "$dir/b.webm" >"$dir/escape2.tsv"
vtr-decode --frames 1 --audio-dir "$dir/deep/aud" -m "$dir/escape.tsv" -o "$dir/esc.rec" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -q "key '../../victim' cannot name a file in --audio-dir" "$dir/err" ||
    fail "a key with '/' in --audio-dir: exit $rc: $(cat "$dir/err")"
[ -s "$dir/deep/aud/clip_a.wav" ] || fail "a key with '/': the good item's audio"
# the same key with --out-dir (refused there too) and a video without audio: the file
# outside is not removed
vtr-decode --frames 1 --audio-dir "$dir/deep/aud" -m "$dir/escape2.tsv" --out-dir "$dir/esc" 2>/dev/null
[ $? -eq 2 ] || fail "a key with '/', --out-dir: exit status"
[ "$(cat "$dir/victim.wav")" = precious ] || fail "a file outside --audio-dir was written or removed"

# 5. float output
vtr-decode --frames 2 --mean 0.5,0.5,0.5 --std 0.25,0.25,0.25 -o "$dir/f.rec" "$dir/c.png" ||
    fail "--mean/--std: exit $?"
vtr-inspect "$dir/f.rec" | grep -q 'float32 (2, 120, 160, 3)' || fail "not float32"

# 6. only bad items: exit 2, the output still a valid (empty) stream
vtr-decode -o "$dir/none.rec" "$dir/empty.mp4" 2>"$dir/err"
[ $? -eq 2 ] || fail "only bad items: expected exit 2"
grep -q "empty.mp4: empty file" "$dir/err" || fail "empty file: $(cat "$dir/err")"

# 6a. a file name that is not UTF-8 cannot be a record key: with -o it fails alone (the
#     others written, exit 2), in one line that shows the name escaped, not as raw bytes
bad=$(printf 'bad\377')
cp "$dir/c.png" "$dir/$bad.png" || fail "a non-UTF-8 name"
vtr-decode --frames 1 -o "$dir/bad.rec" "$dir/$bad.png" "$dir/c.png" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$dir/err")" -eq 1 ] &&
    grep -qF "vtr-decode: bad\xff: $dir/bad.rec: record key 'bad\xff' is not valid UTF-8" "$dir/err" ||
    fail "a non-UTF-8 name with -o: exit $rc: $(cat "$dir/err")"
LC_ALL=C grep -q "$(printf '\377')" "$dir/err" && fail "a raw non-UTF-8 byte on stderr"
vtr-inspect --json "$dir/bad.rec" | grep -q '"key":"c"' || fail "a non-UTF-8 name: the good item"

# 6b. a FIFO is refused, not opened (which would wait for a writer for ever); a device too
mkfifo "$dir/pipe.mp4" || fail "mkfifo"
timeout 20 vtr-decode --frames 2 -o "$dir/fifo.rec" "$dir/pipe.mp4" /dev/zero "$dir/c.png" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] || fail "a FIFO and a device: exit $rc, expected 2: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" -eq 2 ] &&
    grep -q "^vtr-decode: pipe: $dir/pipe.mp4: not a regular file (a FIFO)\$" "$dir/err" &&
    grep -q "^vtr-decode: zero: /dev/zero: not a regular file (a character device)\$" "$dir/err" ||
    fail "a FIFO and a device: $(cat "$dir/err")"
vtr-inspect --json "$dir/fifo.rec" | grep -q '"key":"c"' || fail "a FIFO: the good item"

# 6c. a few frames whose AVI header declares 400,000 s (dwLength of the stream header
#     patched to 10,000,000): --fps 5 fails as truncated at once; it used to give the last
#     frame to all 2 million targets, reserving and copying them first (6 GB at 32x32,
#     "out of memory" at 224x224; found by fuzz_decode)
vtr-synth --size 32x32 --frames 3 "$dir/long.avi" || fail "vtr-synth long.avi"
strh=$(grep -abo strh "$dir/long.avi" | head -n 1 | cut -d: -f1)
printf '\200\226\230\000' | dd of="$dir/long.avi" bs=1 seek=$((strh + 40)) conv=notrunc 2>/dev/null
timeout 60 vtr-decode --fps 5 --size 224x224 -o "$dir/long.rec" "$dir/long.avi" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && grep -q "before the declared end 400000.000 s (truncated?)" "$dir/err" ||
    fail "a header declaring days: exit $rc: $(cat "$dir/err")"

# 6d. a frame whose successor comes 335,544 s later, then an undecodable packet (an AVI
#     found by fuzz_decode, kept in its corpus): --fps 5 gave the first frame 1.7 million
#     slots, copied before the next packet failed (1 GB and 1.8 s at 32x32, "out of
#     memory" at 224x224). A frame is now kept once and copied when the item succeeds.
timeout 60 vtr-decode --fps 5 --size 224x224 -o "$dir/jump.rec" \
    tests/fuzz/corpus/decode/regress_pts_jump.avi 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && grep -q "decoding the packet at 335544.400 s" "$dir/err" ||
    fail "a pts jump of days before a bad packet: exit $rc: $(cat "$dir/err")"

# 6e. a valid variable-rate video with a gap of 100,000 s: --fps 0.001 gives 101 frames,
#     the second frame's copies in between; --max-frames refuses what --fps 5 asks
vtr-synth --size 32x32 --pts 0,40,100000000,100000040 "$dir/gap.mkv" || fail "vtr-synth gap.mkv"
vtr-decode --fps 0.001 --out-dir "$dir/gap" "$dir/gap.mkv" || fail "--fps 0.001 on gap.mkv"
tr -d ' \n' <"$dir/gap/gap.json" >"$dir/gap.flat"
grep -q '"frames":101,' "$dir/gap.flat" &&
    grep -q "\"frame_indices\":\[0,1,$(printf '1,%.0s' $(seq 98))2\]" "$dir/gap.flat" ||
    fail "gap.mkv at --fps 0.001: $(head -c 300 "$dir/gap.flat")"
vtr-decode --fps 5 --max-frames 1000 -o "$dir/gap.rec" "$dir/gap.mkv" 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && grep -q "asks for 500001 frames over the 100000 s the file declares, more than 1000" \
    "$dir/err" && [ ! -s "$dir/gap.rec" ] || fail "--max-frames 1000: exit $rc: $(cat "$dir/err")"

# 6f. a damaged FLV (found by fuzz_decode, kept in its corpus) whose index FFmpeg made
#     longer at every seek: measuring its end seeked to the last keyframe again and again,
#     for ever; now at most 4 times, and the bad packet fails the item at once
timeout 60 vtr-decode --frames 5 -o "$dir/grows.rec" \
    tests/fuzz/corpus/decode/regress_flv_index_grows.flv 2>"$dir/err"
rc=$?
[ $rc -eq 2 ] && grep -q "decoding the packet at 459.633 s" "$dir/err" ||
    fail "an FLV whose index grows at every seek: exit $rc: $(cat "$dir/err")"

# 7. usage errors: exit 1
for args in "--frames 2 --fps 1 $dir/a.mp4" "--mean 0,0,0 $dir/a.mp4" \
    "--audio $dir/x.wav $dir/a.mp4 $dir/b.webm" "--size 12 $dir/a.mp4" "--frames 0 $dir/a.mp4" \
    "--resize fill $dir/a.mp4" ""; do
    # shellcheck disable=SC2086
    vtr-decode $args -o "$dir/u.rec" 2>/dev/null
    rc=$?
    [ $rc -eq 1 ] || fail "'vtr-decode $args': exit $rc, expected 1"
done

# 8. the help states the formula and the exit codes
vtr-decode --help | grep -q 't_i = start + (i + 0.5) \* duration / N' || fail "--help: formula"
vtr-decode --help | grep -q 'Exit status: 0' || fail "--help: exit codes"
echo "ok"
