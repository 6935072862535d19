#!/bin/sh
# Pretrained MobileNetV2 and InceptionV3 (ImageNet backbones fine-tuned by nsfwjs, MIT)
# in the standard TensorFlow.js layers format, for vtr's importer:
#   DIR/mobilenet_v2/{model.json,group1-shard*}  DIR/inception_v3/{...}  DIR/LICENSE
# nsfwjs ships them as UMD JavaScript bundles; `npm pack` fetches the package (npm's cache
# serves it offline once fetched), the tarball is checked against the SHA-256 below and
# pipeline/tfjs_unwrap.js decodes the bundles.
# Usage: sh pipeline/nsfwjs.sh DIR
# A complete DIR is left as it is; DIR appears whole or not at all (built in DIR.tmp.PID).
# Any failure: one line on stderr, exit status 1.
set -eu
version=4.3.0
sha256=4496790efc9bdc6f3e85a826a8e482c1fa1e9db4b3d18c095e98cc0c73cfb12f
models="mobilenet_v2 inception_v3"

die() { echo "nsfwjs: $*" >&2; exit 1; }
[ $# -eq 1 ] || die "usage: sh pipeline/nsfwjs.sh DIR"
dir=${1%/}
unwrap=$(cd "$(dirname "$0")" && pwd)/tfjs_unwrap.js

is_complete() {
    [ -f "$dir/LICENSE" ] || return 1
    for m in $models; do [ -f "$dir/$m/model.json" ] || return 1; done
}
if [ -e "$dir" ]; then
    is_complete || die "$dir exists but is not a complete nsfwjs $version unpack; remove it"
    echo "nsfwjs: $dir already complete"
    exit 0
fi
command -v node >/dev/null 2>&1 || die "node not found"
command -v npm >/dev/null 2>&1 || die "npm not found"
command -v sha256sum >/dev/null 2>&1 || die "sha256sum not found"

tmp=$(mktemp -d)
out=$dir.tmp.$$
trap 'rm -rf "$tmp" "$out"' EXIT
trap 'exit 1' HUP INT TERM

if ! (cd "$tmp" && npm pack --loglevel=error "nsfwjs@$version" >/dev/null 2>npm.err); then
    if grep -Eq 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ECONNRESET|ETIMEDOUT|ENETUNREACH' "$tmp/npm.err"; then
        die "npm cannot reach the registry (and nsfwjs@$version is not in npm's cache)"
    fi
    why=$(sed -n 's/^npm error //p' "$tmp/npm.err" | grep -Ev '^(code|syscall|errno) ' | head -n 1)
    die "npm pack nsfwjs@$version failed: ${why:-no message from npm}"
fi
got=$(sha256sum "$tmp/nsfwjs-$version.tgz" | cut -d' ' -f1)
[ "$got" = "$sha256" ] || die "checksum mismatch for nsfwjs-$version.tgz: expected $sha256, got $got"
tar -xzf "$tmp/nsfwjs-$version.tgz" -C "$tmp" || die "cannot extract nsfwjs-$version.tgz"

mkdir -p "$(dirname "$dir")"
mkdir "$out"
for m in $models; do
    node "$unwrap" "$tmp/package/dist/models/$m" "$out/$m" > "$tmp/$m.info" || exit 1
done
cp "$tmp/package/LICENSE" "$out/LICENSE"
[ ! -e "$dir" ] || die "$dir appeared while unpacking (another run?); left it as it is"
mv "$out" "$dir"
for m in $models; do echo "nsfwjs: wrote $dir/$m: $(cat "$tmp/$m.info")"; done
