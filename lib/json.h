/* How vtr writes JSON (jansson): compact, and reals with 15 significant digits, so
 * that a timestamp of 0.24 s reads "0.24" rather than "0.23999999999999999". 15 digits
 * round-trip every decimal of up to 15 digits; values that must survive bit for bit
 * (parameters, RNG states) never travel as JSON reals. */
#ifndef VTR_JSON_H
#define VTR_JSON_H

#include <jansson.h>

#define VTR_JSON_FLAGS (JSON_COMPACT | JSON_REAL_PRECISION(15))

#endif
