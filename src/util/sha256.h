/* sha256.h - SHA-256 digests (OpenSSL's EVP) and their hex form, for model hashes,
 * calibration digests and tuning-database keys. */
#ifndef NR_UTIL_SHA256_H
#define NR_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

/* SHA-256 of data (for model hashes). */
void nr_sha256(const void *data, size_t len, uint8_t out[32]);
/* Lowercase hex of n bytes into out (2n + 1 chars, NUL-terminated). */
void nr_hex(const uint8_t *bytes, size_t n, char *out);

#endif
