#!/bin/sh
# slurm-array.sh: run a pipeline fragment's per-item targets as a Slurm job array, then
# its final goal (the store) as a job that waits for the whole array; or, in the shard
# form, N shards of one program (--shard i/N in task i, docs/sharding.md), then a job
# that joins their parts.
#
#   pipeline/slurm-array.sh [OPTION]... FRAGMENT [VAR=VALUE]...
#   pipeline/slurm-array.sh [OPTION]... --shards N PROGRAM [ARG]...
#
# Writes DIR/targets.txt, DIR/task.sh (array task i runs `make -k -f FRAGMENT VARS` on
# lines i*K+1 .. i*K+K of targets.txt) and DIR/final.sh (`make -f FRAGMENT VARS GOAL`),
# then submits task.sh with sbatch --array=0-(TASKS-1) and final.sh with
# --dependency=afterok:ARRAY_JOB. Both run in the current directory. A task's items are
# restartable like any make run: resubmitting skips what is built.
# The shard form writes DIR/task.sh (array task i runs `PROGRAM ARG... --shard i/N`) and,
# with --then CMD, DIR/final.sh (CMD, e.g. vtr-merge of the parts) submitted after the
# array (afterok).
set -u
prog=slurm-array.sh
usage() {
    cat <<'USAGE'
Usage: slurm-array.sh [OPTION]... FRAGMENT [VAR=VALUE]...
       slurm-array.sh [OPTION]... --shards N PROGRAM [ARG]...
Runs FRAGMENT's per-item targets as a Slurm job array and then its final goal as a
job that depends on the array (afterok). VAR=VALUE pairs are passed to every make.
The shard form runs PROGRAM ARG... --shard i/N in array task i (0 <= i < N; vtr-features,
vtr-aggregate and vtr-index each write OUT.shard-i-of-N) and then, with --then, CMD.

  -t, --targets FILE   per-item targets, one a line ['make -s -f FRAGMENT VARS
                       list-targets']
  -n, --tasks N        array tasks; each takes a contiguous chunk of the targets
                       [targets / --chunk, at most 1000]
  -c, --chunk K        targets per task when --tasks is not given [100]
  -j, --jobs J         make -j inside a task [$SLURM_CPUS_PER_TASK, else 1]
  -d, --dir DIR        where the scripts, the target list and the logs go [slurm]
  -o, --sbatch OPT     an option for both sbatch calls (repeat it), e.g.
                       -o --partition=gpu -o --gres=gpu:1 -o --time=4:00:00
      --goal GOAL      the final job's make goal [all]
  -s, --shards N       the shard form: N array tasks, task i runs PROGRAM ARG...
                       --shard i/N
      --then CMD       with --shards: a job after the array runs the shell command
                       CMD, e.g. 'vtr-merge ix ix.shard-*-of-4' [none]
      --no-submit      write the scripts and print the sbatch commands only
  -h, --help           this text

-t, -n, -c, -j and --goal are for a fragment, not --shards.
Test a task without Slurm: SLURM_ARRAY_TASK_ID=0 sh DIR/task.sh
Exit status: 0 submitted (or written); 1 bad usage or a failed sbatch.
USAGE
}
. "$(dirname "$0")/slurm-lib.sh"

targets='' tasks='' chunk=100 jobs='' dir=slurm goal=all submit=yes sbatch_opts=''
shards='' then='' make_opt=''
while [ $# -gt 0 ]; do
    case $1 in
    -t | --targets | -n | --tasks | -c | --chunk | -j | --jobs | --goal) make_opt=$1 ;;
    esac
    case $1 in
    -t | --targets) [ $# -ge 2 ] || die "$1 needs a file"; targets=$2; shift 2 ;;
    -n | --tasks) [ $# -ge 2 ] || die "$1 needs a count"; tasks=$2; shift 2 ;;
    -c | --chunk) [ $# -ge 2 ] || die "$1 needs a count"; chunk=$2; shift 2 ;;
    -j | --jobs) [ $# -ge 2 ] || die "$1 needs a count"; jobs=$2; shift 2 ;;
    -s | --shards) [ $# -ge 2 ] || die "$1 needs a count"; shards=$2; shift 2 ;;
    --then) [ $# -ge 2 ] || die "$1 needs a command"; then=$2; shift 2 ;;
    -d | --dir) [ $# -ge 2 ] || die "$1 needs a directory"; dir=$2; shift 2 ;;
    -o | --sbatch) [ $# -ge 2 ] || die "$1 needs an sbatch option"
        sbatch_opts="$sbatch_opts $(quote "$2")"; shift 2 ;;
    --goal) [ $# -ge 2 ] || die "$1 needs a goal"; goal=$2; shift 2 ;;
    --no-submit) submit=no; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) break ;;
    esac
done
if [ -n "$shards" ]; then
    # ---- the shard form ----
    is_count "$shards" 1 || die "--shards needs a count >= 1 (got '$shards')"
    [ -z "$make_opt" ] || die "$make_opt is for a fragment, not --shards (see --help)"
    [ $# -ge 1 ] || die "name the program of the shards, e.g. vtr-index (see --help)"
    command=
    for a in "$@"; do command="$command $(quote "$a")"; done
    mkdir -p "$dir" || die "$dir: cannot create"
    dir=$(cd "$dir" && pwd) || die "$dir: cannot enter"
    cwd=$(pwd)
    write_script "$dir/task.sh" "#!/bin/sh
#SBATCH --job-name=vtr-shards
#SBATCH --output=$dir/task-%A_%a.log
# array task i of $shards: shard i of $shards
set -u
cd $(quote "$cwd") || exit 1
i=\${SLURM_ARRAY_TASK_ID:?SLURM_ARRAY_TASK_ID is not set}
exec$command --shard \"\$i/$shards\""
    [ -z "$then" ] || write_script "$dir/final.sh" "#!/bin/sh
#SBATCH --job-name=vtr-final
#SBATCH --output=$dir/final-%j.log
set -u
cd $(quote "$cwd") || exit 1
$then"
    array_cmd="sbatch --parsable --array=0-$((shards - 1))$sbatch_opts $(quote "$dir/task.sh")"
    final_cmd="sbatch --parsable --dependency=afterok:ARRAY_JOB$sbatch_opts $(quote "$dir/final.sh")"
    if [ $submit = no ]; then
        echo "$array_cmd"
        [ -z "$then" ] || echo "$final_cmd"
        exit 0
    fi
    command -v sbatch >/dev/null 2>&1 || die "sbatch not found (--no-submit writes the scripts only)"
    array_job=$(eval "$array_cmd") || die "sbatch of the array failed"
    array_job=${array_job%%;*}
    final=
    if [ -n "$then" ]; then
        final_job=$(eval "sbatch --parsable --dependency=afterok:$array_job$sbatch_opts $(quote "$dir/final.sh")") ||
            die "sbatch of the final job failed (the array $array_job is submitted)"
        final=", final job ${final_job%%;*}"
    fi
    echo "$prog: $shards shards of $1: array job $array_job$final; logs in $dir"
    exit 0
fi
[ -z "$then" ] || die "--then goes with --shards (see --help)"

# ---- a fragment's targets ----
[ $# -ge 1 ] || die "name the fragment, e.g. pipeline/msrvtt.mk (see --help)"
fragment=$1
shift
[ -f "$fragment" ] || die "$fragment: no such file"
vars=
for v in "$@"; do
    case $v in
    [A-Za-z_]*=*) vars="$vars $(quote "$v")" ;;
    *) die "'$v' is not VAR=VALUE" ;;
    esac
done
[ -z "$tasks" ] || is_count "$tasks" 1 || die "--tasks needs a count >= 1 (got '$tasks')"
is_count "$chunk" 1 || die "--chunk needs a count >= 1 (got '$chunk')"
[ -z "$jobs" ] || is_count "$jobs" 1 || die "--jobs needs a count >= 1 (got '$jobs')"

mkdir -p "$dir" || die "$dir: cannot create"
dir=$(cd "$dir" && pwd) || die "$dir: cannot enter"
cwd=$(pwd)
list=$dir/targets.txt
if [ -n "$targets" ]; then
    [ -r "$targets" ] || die "$targets: cannot read"
    grep -v '^[[:space:]]*$' "$targets" >"$list.tmp" || :
else
    eval "make -s -f $(quote "$fragment") $vars list-targets" >"$list.tmp" ||
        die "make -f $fragment list-targets failed"
fi
mv -f "$list.tmp" "$list"
n=$(wc -l <"$list")
[ "$n" -gt 0 ] || die "no targets to build"
if [ -z "$tasks" ]; then
    tasks=$(((n + chunk - 1) / chunk))
    [ "$tasks" -le 1000 ] || tasks=1000
fi
[ "$tasks" -le "$n" ] || tasks=$n
per=$(((n + tasks - 1) / tasks))
tasks=$(((n + per - 1) / per)) # no empty task at the end
# shellcheck disable=SC2016 # expanded in the task, not here
jobs_line=${jobs:-'${SLURM_CPUS_PER_TASK:-1}'}

write_script "$dir/task.sh" "#!/bin/sh
#SBATCH --job-name=vtr-items
#SBATCH --output=$dir/task-%A_%a.log
# array task i: targets i*$per+1 .. i*$per+$per of $list ($n targets, $tasks tasks)
set -u
cd $(quote "$cwd") || exit 1
i=\${SLURM_ARRAY_TASK_ID:?SLURM_ARRAY_TASK_ID is not set}
first=\$((i * $per + 1))
last=\$((first + $per - 1))
share=\$(sed -n \"\${first},\${last}p\" $(quote "$list"))
[ -n \"\$share\" ] || { echo \"task \$i: no targets\"; exit 0; }
# shellcheck disable=SC2086
exec make -k -j $jobs_line -f $(quote "$fragment")$vars \$share"
write_script "$dir/final.sh" "#!/bin/sh
#SBATCH --job-name=vtr-final
#SBATCH --output=$dir/final-%j.log
set -u
cd $(quote "$cwd") || exit 1
exec make -j $jobs_line -f $(quote "$fragment")$vars $(quote "$goal")"

array_cmd="sbatch --parsable --array=0-$((tasks - 1))$sbatch_opts $(quote "$dir/task.sh")"
if [ $submit = no ]; then
    echo "$array_cmd"
    echo "sbatch --parsable --dependency=afterok:ARRAY_JOB$sbatch_opts $(quote "$dir/final.sh")"
    exit 0
fi
command -v sbatch >/dev/null 2>&1 || die "sbatch not found (--no-submit writes the scripts only)"
array_job=$(eval "$array_cmd") || die "sbatch of the array failed"
array_job=${array_job%%;*}
final_job=$(eval "sbatch --parsable --dependency=afterok:$array_job$sbatch_opts $(quote "$dir/final.sh")") ||
    die "sbatch of the final job failed (the array $array_job is submitted)"
final_job=${final_job%%;*}
echo "$prog: $n targets in $tasks tasks of up to $per: array job $array_job, final job $final_job ($goal); logs in $dir"
