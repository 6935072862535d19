"""tests/gpu/emulate/cu_to_cc.py: rewrites one of vtr's .cu files as C++ for the CPU emulation
of CUDA (tests/gpu/emulate/run.sh), which g++ compiles with include/cuda_runtime.h first.

    python3 tests/gpu/emulate/cu_to_cc.py IN.cu OUT.cc

Three rewrites, each on its own lines, so that the #line at the top keeps the compiler's and
the sanitizer's line numbers those of IN.cu:
  kernel[<T>]<<<grid, block[, shared_bytes]>>>(args)
      -> emu_launch(grid, block, shared_bytes, [&] { kernel(args); })
  extern __shared__ T name[];   ->  T *name = (T *)emu_dynamic_shared;
  __shared__ T name[N]...; (or a scalar)  ->  the same, then emu_poison_shared(&name, sizeof name);
A launch on a stream (a fourth argument) stops the rewrite with an error: the emulation runs
kernels on the default stream only, as vtr launches them.
"""
import re
import sys

LAUNCH = re.compile(r"(\w+(?:<[\w\s,:*]*>)?)\s*<<<")
DYNAMIC_SHARED = re.compile(r"extern\s+__shared__\s+(\w+)\s+(\w+)\s*\[\s*\]\s*;")
STATIC_SHARED = re.compile(r"(__shared__\s+[\w\s]+?\b(\w+)\s*(?:\[[^\]]*\])*\s*;)")


def closing_paren(text, open_at):
    """The index of the ')' that closes the '(' at text[open_at]."""
    depth = 0
    for i in range(open_at, len(text)):
        if text[i] == "(":
            depth += 1
        elif text[i] == ")":
            depth -= 1
            if depth == 0:
                return i
    raise ValueError("unclosed '(' at offset %d" % open_at)


def top_level_commas(text):
    """text split at its commas outside brackets."""
    parts = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def rewrite_launches(source, path):
    out = []
    done = 0
    for launch in LAUNCH.finditer(source):
        if launch.start() < done:
            continue
        kernel = launch.group(1)
        config_end = source.index(">>>", launch.end())
        config = top_level_commas(source[launch.end():config_end])
        if len(config) > 3:
            line = source.count("\n", 0, launch.start()) + 1
            sys.exit("%s:%d: %s launched on a stream: the emulation runs kernels on the "
                     "default stream only" % (path, line, kernel))
        shared_bytes = config[2] if len(config) == 3 else "0"
        args_open = source.index("(", config_end)
        args_close = closing_paren(source, args_open)
        out.append(source[done:launch.start()])
        out.append("emu_launch(%s, %s, %s, [&] { %s%s; })" %
                   (config[0], config[1], shared_bytes, kernel,
                    source[args_open:args_close + 1]))
        done = args_close + 1
    out.append(source[done:])
    return "".join(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: python3 cu_to_cc.py IN.cu OUT.cc")
    path, out_path = sys.argv[1], sys.argv[2]
    with open(path) as f:
        source = f.read()
    source = DYNAMIC_SHARED.sub(r"\1 *\2 = (\1 *)emu_dynamic_shared;", source)
    source = STATIC_SHARED.sub(r"\1 emu_poison_shared(&\2, sizeof \2);", source)
    source = rewrite_launches(source, path)
    with open(out_path, "w") as f:
        f.write('#line 1 "%s"\n' % path)
        f.write(source)


main()
