/* A program's record output (record_output.h). */
#define _POSIX_C_SOURCE 200809L
#include "lib/record_output.h"

#include <string.h>
#include <unistd.h>

vtr_status vtr_record_output_open(vtr_record_output *o, const char *path,
                                  const char *alternatives, vtr_error *err)
{
    memset(o, 0, sizeof *o);
    if (path && strcmp(path, "-")) {
        size_t n = strlen(path);
        if (n >= 4 && strcmp(path + n - 4, ".npy") == 0)
            return vtr_fail(err, VTR_ERR_INVALID, "%s: -o writes a record stream, not NPY: "
                            "name it .vtr, or write KEY.npy files with --out-dir DIR", path);
        vtr_status st = vtr_atomic_open(&o->file, path, err);
        if (st != VTR_OK)
            return st;
        o->atomic = true;
        o->fp = o->file.fp;
        o->name = path;
        return VTR_OK;
    }
    if (isatty(STDOUT_FILENO))
        return vtr_fail(err, VTR_ERR_INVALID, "refusing to write records to a terminal: use %s",
                        alternatives);
    o->fp = stdout;
    o->name = "stdout";
    return VTR_OK;
}

vtr_status vtr_record_output_commit(vtr_record_output *o, vtr_error *err)
{
    if (o->atomic) {
        o->atomic = false;
        return vtr_atomic_commit(&o->file, err);
    }
    return o->fp ? vtr_output_flush(o->fp, o->name, err) : VTR_OK;
}

void vtr_record_output_abort(vtr_record_output *o)
{
    if (o && o->atomic) {
        o->atomic = false;
        vtr_atomic_abort(&o->file);
    }
}
