/* sha256.c - SHA-256 through OpenSSL's one-shot EVP_Digest, and lowercase hex. A
 * digest that OpenSSL cannot compute reads as 32 zero bytes, which matches no real
 * model or table, so a cache keyed by it never hits. */
#include "util/sha256.h"

#include <openssl/evp.h>
#include <string.h>

void nr_hex(const uint8_t *bytes, size_t n, char *out) {
  static const char digits[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = digits[bytes[i] >> 4];
    out[2 * i + 1] = digits[bytes[i] & 15];
  }
  out[2 * n] = '\0';
}

void nr_sha256(const void *data, size_t len, uint8_t out[32]) {
  unsigned n = 0;
  if (!EVP_Digest(len ? data : "", len, out, &n, EVP_sha256(), NULL))
    memset(out, 0, 32);
}
