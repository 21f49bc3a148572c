/* engine_sign.c - optional authenticity of engine files: the AUTH section's
 * HMAC-SHA-256 (OpenSSL's EVP_MAC), written when an engine is built with a signing
 * key and checked when it is loaded with a verification key. The layout is specified
 * at the top of engine_format.c.
 *
 * Key decision: the MAC covers every byte before the file's checksum, the weights
 * included, with the MAC's own 32 bytes read as zeros, so one key check answers for
 * the whole file, and a file is verified before any of its sections is parsed. The
 * unkeyed SHA-256 checksum stays, for integrity without a key. Comparison is in
 * constant time (CRYPTO_memcmp). */
#include "engine/engine_internal.h"
#include "util/error.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdlib.h>
#include <string.h>

nr_status nr_engine_mac(const nr_bytes *parts, int n, const uint8_t *key, size_t key_len,
                        uint8_t out[32], nr_error *err) {
  EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  size_t len = 0;
  bool ok = ctx && EVP_MAC_init(ctx, key, key_len, params);
  for (int i = 0; ok && i < n; i++)
    ok = !parts[i].len || EVP_MAC_update(ctx, parts[i].p, parts[i].len);
  ok = ok && EVP_MAC_final(ctx, out, &len, 32) && len == 32;
  EVP_MAC_CTX_free(ctx);
  EVP_MAC_free(mac);
  return ok ? NR_OK : nr_errorf(err, NR_ERR_INTERNAL, "OpenSSL could not compute HMAC-SHA-256");
}

bool nr_engine_mac_equal(const uint8_t a[32], const uint8_t b[32]) {
  return CRYPTO_memcmp(a, b, 32) == 0;
}

nr_status nr_engine_set_sign_key(nr_engine *e, const void *key, size_t len, nr_error *err) {
  if (!key || !len)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "the signing key is empty");
  uint8_t *copy = malloc(len);
  if (!copy)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory copying the signing key");
  memcpy(copy, key, len);
  nr_engine_clear_sign_key(e);
  e->sign_key = copy;
  e->sign_key_len = len;
  return NR_OK;
}

void nr_engine_clear_sign_key(nr_engine *e) {
  if (!e || !e->sign_key)
    return;
  OPENSSL_cleanse(e->sign_key, e->sign_key_len);
  free(e->sign_key);
  e->sign_key = NULL;
  e->sign_key_len = 0;
}
