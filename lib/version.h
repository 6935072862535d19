/* The code version that programs print and runs, checkpoints and outputs record:
 * `git describe --always --dirty` of the tree when it was built. make regenerates
 * build/version.c whenever that changes (so a commit never leaves a stale version in the
 * binaries); outside a git checkout it is the version configure saw. */
#ifndef VTR_VERSION_H
#define VTR_VERSION_H

extern const char vtr_version[];

#endif
