/* Values of command-line options, parsed strictly: the whole string, in range. */
#ifndef VTR_ARGS_H
#define VTR_ARGS_H

/* A decimal integer in lo..hi. 0 on success, -1 otherwise (*out untouched). */
int vtr_parse_int(const char *s, long long lo, long long hi, long long *out);

/* A finite decimal number. 0 on success, -1 otherwise. */
int vtr_parse_double(const char *s, double *out);

/* Exactly n comma-separated numbers ("0.485,0.456,0.406"). 0 on success, -1 otherwise. */
int vtr_parse_floats(const char *s, int n, float *out);

/* Exactly n comma-separated decimal integers, each in lo..hi ("1,40,95"). 0 on success, -1
 * otherwise (out may then be partly written). */
int vtr_parse_ints(const char *s, int n, long long lo, long long hi, long long *out);

/* A size "WxH" (e.g. "224x224"), each side a decimal integer in 1..max. 0 on success, -1
 * otherwise (*width and *height untouched). */
int vtr_parse_size(const char *s, int max, int *width, int *height);

#endif
