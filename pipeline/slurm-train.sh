#!/bin/sh
# slurm-train.sh: vtr-train across nodes and GPUs as one Slurm job: an sbatch script that
# starts one vtr-train rank per task with srun (Open MPI through PMIx: srun --mpi=pmix;
# lib/dist.h makes rank R of N from it), then submits it.
#
#   pipeline/slurm-train.sh [OPTION]... CONFIG [VTR-TRAIN-OPTION]...
#
# Writes DIR/train.sh and submits it with sbatch; with --no-submit it writes the script
# and prints the sbatch command only.
set -u
prog=slurm-train.sh
usage() {
    cat <<'USAGE'
Usage: slurm-train.sh [OPTION]... CONFIG [VTR-TRAIN-OPTION]...
Trains CONFIG with vtr-train on several nodes and GPUs: writes DIR/train.sh, an sbatch
script running `srun --mpi=pmix vtr-train CONFIG [VTR-TRAIN-OPTION]...` with one rank
per task (a build with MPI: ./configure --with-mpi), and submits it.

  -N, --nodes N          nodes [1]
  -n, --tasks-per-node T ranks per node, usually one per GPU [1]
  -g, --gpus-per-node G  GPUs per node (sbatch --gpus-per-node) [T; 0: none]
  -c, --cpus-per-task C  CPU cores per rank [none given: Slurm's default]
  -t, --time T           wall-clock limit, e.g. 12:00:00 [none given]
  -p, --partition P      the partition [none given]
  -J, --job-name NAME    [vtr-train]
  -d, --dir DIR          where the script and the log go [slurm]
  -o, --sbatch OPT       another sbatch option (repeat it), e.g. -o --account=proj
  -x, --program PATH     the vtr-train to run [vtr-train]
      --no-submit        write the script and print the sbatch command only
  -h, --help             this text

Example: slurm-train.sh -N 2 -n 4 -t 24:00:00 -p gpu configs/msrvtt-vse-inf.yaml -o runs/a \
             --device cuda     (a rank per GPU; NCCL between them where it loads)
Exit status: 0 submitted (or written); 1 bad usage or a failed sbatch.
USAGE
}
. "$(dirname "$0")/slurm-lib.sh"

nodes=1 tasks=1 gpus='' cpus='' time='' partition='' name=vtr-train dir=slurm
program=vtr-train submit=yes sbatch_opts=''
while [ $# -gt 0 ]; do
    case $1 in
    -N | --nodes) [ $# -ge 2 ] || die "$1 needs a count"; nodes=$2; shift 2 ;;
    -n | --tasks-per-node) [ $# -ge 2 ] || die "$1 needs a count"; tasks=$2; shift 2 ;;
    -g | --gpus-per-node) [ $# -ge 2 ] || die "$1 needs a count"; gpus=$2; shift 2 ;;
    -c | --cpus-per-task) [ $# -ge 2 ] || die "$1 needs a count"; cpus=$2; shift 2 ;;
    -t | --time) [ $# -ge 2 ] || die "$1 needs a time"; time=$2; shift 2 ;;
    -p | --partition) [ $# -ge 2 ] || die "$1 needs a partition"; partition=$2; shift 2 ;;
    -J | --job-name) [ $# -ge 2 ] || die "$1 needs a name"; name=$2; shift 2 ;;
    -d | --dir) [ $# -ge 2 ] || die "$1 needs a directory"; dir=$2; shift 2 ;;
    -o | --sbatch) [ $# -ge 2 ] || die "$1 needs an sbatch option"
        sbatch_opts="$sbatch_opts $(quote "$2")"; shift 2 ;;
    -x | --program) [ $# -ge 2 ] || die "$1 needs a path"; program=$2; shift 2 ;;
    --no-submit) submit=no; shift ;;
    -h | --help) usage; exit 0 ;;
    --) shift; break ;;
    -*) die "unknown option '$1' (see --help)" ;;
    *) break ;;
    esac
done
[ $# -ge 1 ] || die "name the training config, e.g. configs/msrvtt-vse-inf.yaml (see --help)"
[ -f "$1" ] || die "$1: no such file"
is_count "$nodes" 1 || die "--nodes needs a count >= 1 (got '$nodes')"
is_count "$tasks" 1 || die "--tasks-per-node needs a count >= 1 (got '$tasks')"
[ -n "$gpus" ] || gpus=$tasks
is_count "$gpus" 0 || die "--gpus-per-node needs a count >= 0 (got '$gpus')"
[ -z "$cpus" ] || is_count "$cpus" 1 || die "--cpus-per-task needs a count >= 1 (got '$cpus')"
for v in "$name" "$time" "$partition"; do
    case $v in *[![:alnum:]_.:,+-]*) die "'$v': not a Slurm name or time" ;; esac
done

command=$(quote "$program")
for a in "$@"; do command="$command $(quote "$a")"; done
mkdir -p "$dir" || die "$dir: cannot create"
dir=$(cd "$dir" && pwd) || die "$dir: cannot enter"
cwd=$(pwd)
header="#SBATCH --job-name=$name
#SBATCH --nodes=$nodes
#SBATCH --ntasks-per-node=$tasks
#SBATCH --output=$dir/train-%j.log"
[ "$gpus" -eq 0 ] || header="$header
#SBATCH --gpus-per-node=$gpus"
[ -z "$cpus" ] || header="$header
#SBATCH --cpus-per-task=$cpus"
[ -z "$time" ] || header="$header
#SBATCH --time=$time"
[ -z "$partition" ] || header="$header
#SBATCH --partition=$partition"
script=$dir/train.sh
write_script "$script" "#!/bin/sh
$header
# $((nodes * tasks)) ranks: $nodes nodes x $tasks tasks, one vtr-train rank each (lib/dist.h)
set -u
cd $(quote "$cwd") || exit 1
exec srun --mpi=pmix $command"

submit_cmd="sbatch --parsable$sbatch_opts $(quote "$script")"
if [ $submit = no ]; then
    echo "$submit_cmd"
    exit 0
fi
command -v sbatch >/dev/null 2>&1 || die "sbatch not found (--no-submit writes the script only)"
job=$(eval "$submit_cmd") || die "sbatch failed"
echo "$prog: $((nodes * tasks)) ranks on $nodes nodes: job ${job%%;*}; log in $dir"
