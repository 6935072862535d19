# Sourced by the Slurm scripts of pipeline/ (slurm-array.sh, slurm-train.sh): their shell
# helpers. The script sets $prog, its name in messages, before using die.

die() {
    echo "$prog: $*" >&2
    exit 1
}
# a word quoted for sh
quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}
# is_count VALUE MIN: whether VALUE is a decimal count >= MIN
is_count() {
    case $1 in '' | *[!0-9]*) return 1 ;; esac
    [ "$1" -ge "$2" ]
}
# write_script FILE BODY: FILE written atomically, executable
write_script() {
    if ! { printf '%s\n' "$2" >"$1.tmp" && chmod +x "$1.tmp" && mv -f "$1.tmp" "$1"; }; then
        die "$1: cannot write"
    fi
}
