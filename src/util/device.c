/* device.c - device names (device.h): one table of the two devices nnroute builds for,
 * read both ways. */
#include "util/device.h"

#include <string.h>

const char *nr_device_name(nr_device d) {
  return d == NR_DEVICE_CPU ? "cpu" : d == NR_DEVICE_CUDA ? "cuda" : "?";
}

bool nr_device_parse(const char *name, nr_device *out) {
  for (nr_device d = NR_DEVICE_CPU; name && d <= NR_DEVICE_CUDA; d++)
    if (!strcmp(name, nr_device_name(d))) {
      *out = d;
      return true;
    }
  return false;
}
