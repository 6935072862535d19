/* The code version that programs print and runs, checkpoints and outputs record: the
 * release (the file VERSION, e.g. 0.1.0) and the commit it was built from,
 * "0.1.0+g1a2b3c4" ("-dirty" after it for uncommitted changes). make regenerates
 * build/version.c whenever that changes (so a commit never leaves a stale version in the
 * binaries); outside a git checkout it is the version configure saw. */
#ifndef VTR_VERSION_H
#define VTR_VERSION_H

extern const char vtr_version[];

#endif
