/* device.h - the names of the devices a build targets ("cpu", "cuda"), as --device
 * spells them and as engine files and error messages print them.
 *
 * Key decision: the names sit on the lowest floor, beside nothing but the public
 * nr_device enum, so the commands, the tuner, the engine format and the knob tables
 * all read the same two strings without including each other's headers. */
#ifndef NR_UTIL_DEVICE_H
#define NR_UTIL_DEVICE_H

#include "nnroute.h"

#include <stdbool.h>

/* "cpu", "cuda" (as --device spells them); "?" for others. Static storage. */
const char *nr_device_name(nr_device d);
/* Parses a --device value; false (and *out untouched) when unknown. */
bool nr_device_parse(const char *name, nr_device *out);

#endif
