#!/bin/sh
# The layout stays true: the stage folders in the order data flows (README, "Layout"),
#     lib decode features text import aggregate match index tools
# and a source file (.c, .h, .cu, .cc) includes only headers of its own folder, of lib/, or of a
# folder earlier in that order; no two modules (NAME.c + NAME.h of one folder) include each
# other, directly or through others (a NAME.cu is a node of its own: it implements the
# CUDA declarations of NAME.h or lib/nn_cuda.h, which may need NAME.h's types). Read from the #include "..." lines; an include that
# names no file of the tree fails too, so the map cannot go stale. The checker first
# proves on two small trees of its own that it fails on a back-edge and on a circle.
set -eu
cd "$(dirname "$0")/.."
order="lib decode features text import aggregate match index tools"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# check_layout ROOT: prints one line per violation; exit status 1 if any.
check_layout() (
    cd "$1"
    files=$(for d in $order; do [ -d "$d" ] && find "$d" -name '*.[ch]' -o -name '*.cu' -o -name '*.cc'; done |
        sort)
    # "FILE INCLUDED" for every quoted include, INCLUDED resolved against the tree
    for f in $files; do
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r inc; do
                case $inc in
                */*) echo "$f $inc" ;;
                *) echo "$f $(dirname "$f")/$inc" ;;
                esac
            done
    done >edges.tmp
    bad=0
    while read -r f inc; do
        if [ ! -f "$inc" ]; then
            echo "$f: includes \"$inc\", which is not a file of the tree"
            bad=1
            continue
        fi
        from=${f%%/*} to=${inc%%/*} rf=-1 rt=-1 i=0
        for d in $order; do
            [ "$d" = "$from" ] && rf=$i
            [ "$d" = "$to" ] && rt=$i
            i=$((i + 1))
        done
        if [ "$rt" -lt 0 ] || [ "$rt" -gt "$rf" ]; then
            echo "$f: includes $inc, against the flow ($to/ comes after $from/)"
            bad=1
        fi
    done <edges.tmp
    # module graph (.c and .h dropped; a module including its own header is no edge)
    sed 's/\.[ch]\( \|$\)/\1/g' edges.tmp | awk '$1 != $2' | sort -u >modules.tmp
    if ! tsort modules.tmp >/dev/null 2>tsort.tmp; then
        echo "include circle between modules: $(grep -v 'input contains a loop' tsort.tmp |
            sed 's/^tsort: //' | tr '\n' ' ')"
        bad=1
    fi
    rm -f edges.tmp modules.tmp tsort.tmp
    [ $bad -eq 0 ]
)

# The checker fails on a back-edge: lib/ including a header of match/.
mkdir -p "$tmp/back/lib" "$tmp/back/match"
printf '#include "match/loss.h"\n' >"$tmp/back/lib/tensor.c"
printf '#include "lib/tensor.h"\n' >"$tmp/back/match/loss.h"
: >"$tmp/back/lib/tensor.h"
if out=$(check_layout "$tmp/back"); then
    echo "the checker passed a back-edge"
    exit 1
fi
echo "$out" | grep -q 'lib/tensor.c: includes match/loss.h, against the flow' ||
    { echo "back-edge reported as: $out"; exit 1; }

# ... and on a circle inside a folder: trainer.c -> model.h, model.c -> trainer.h.
mkdir -p "$tmp/circle/match"
printf '#include "trainer.h"\n#include "match/model.h"\n' >"$tmp/circle/match/trainer.c"
printf '#include "model.h"\n#include "match/trainer.h"\n' >"$tmp/circle/match/model.c"
: >"$tmp/circle/match/trainer.h"
: >"$tmp/circle/match/model.h"
if out=$(check_layout "$tmp/circle"); then
    echo "the checker passed a circle"
    exit 1
fi
echo "$out" | grep -q 'include circle between modules: .*match/model' ||
    { echo "circle reported as: $out"; exit 1; }

# ... and on an include of a file that is not there.
mkdir -p "$tmp/stale/index"
printf '#include "match/topk.h"\n' >"$tmp/stale/index/search.c"
if check_layout "$tmp/stale" >/dev/null; then
    echo "the checker passed a stale include"
    exit 1
fi

# The tree itself.
check_layout .
