/* test_engine_sign.c - signed engines (nr_build_options.sign_key, AUTH section): the
 * right key loads, another key, an unsigned engine under a key, and a file edited after
 * signing with its checksum recomputed are refused; without a key a signed engine
 * loads as any other. Built on examples/tiny_cnn. */
#include "nnroute.h"
#include "rng.h"
#include "unit.h"
#include "util/sha256.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TINY_CNN NR_SOURCE_DIR "/examples/tiny_cnn/model.onnx"

static const char key_a[] = "a key of thirty-two bytes, exact", key_b[] = "another key";

/* Builds tiny_cnn (signed with key when not NULL) and saves it to path. */
static bool save_tiny(nr_test_state *t, const char *key, const char *path) {
  nr_model *m = NULL;
  nr_engine *e = NULL;
  nr_error err = {0};
  nr_build_options o = {sizeof o, "", 1, NR_DEVICE_CPU, NULL, key, key ? strlen(key) : 0};
  bool ok = !nr_model_load(TINY_CNN, NULL, &m, &err) && !nr_engine_build(m, &o, &e, &err) &&
            !nr_engine_save(e, path, &err);
  CHECK(ok, "build and save: %s", err.message);
  nr_engine_destroy(e);
  nr_model_destroy(m);
  return ok;
}

static nr_status load_with(const char *path, const char *key, nr_error *err) {
  nr_engine_load_options o = {sizeof o, 0, key, key ? strlen(key) : 0};
  nr_engine *e = NULL;
  nr_status st = nr_engine_load(path, &o, &e, err);
  nr_engine_destroy(e);
  return st;
}

static char *temp_path(const char *tag) {
  char *p = malloc(64);
  snprintf(p, 64, "/tmp/nr_sign_%s_%ld", tag, (long)getpid());
  return p;
}

NR_TEST(engine_sign_keys_are_checked) {
  char *signed_path = temp_path("s"), *plain_path = temp_path("u");
  REQUIRE(save_tiny(t, key_a, signed_path) && save_tiny(t, NULL, plain_path));
  nr_error err = {0};
  CHECK(load_with(signed_path, key_a, &err) == NR_OK, "right key: %s", err.message);
  CHECK(load_with(signed_path, NULL, &err) == NR_OK, "no key: %s", err.message);
  CHECK(load_with(signed_path, key_b, &err) == NR_ERR_INVALID_MODEL &&
            strstr(err.message, "signature mismatch"),
        "another key: %s", err.message);
  CHECK(load_with(plain_path, key_a, &err) == NR_ERR_INVALID_MODEL &&
            strstr(err.message, "not signed"),
        "unsigned engine under a key: %s", err.message);
  CHECK(load_with(plain_path, NULL, &err) == NR_OK, "unsigned, no key: %s", err.message);
  remove(signed_path);
  remove(plain_path);
  free(signed_path);
  free(plain_path);
}

/* Any byte changed after signing, checksum recomputed, fails the key check. */
NR_TEST(engine_sign_edits_after_signing_are_refused) {
  char *path = temp_path("e");
  REQUIRE(save_tiny(t, key_a, path));
  FILE *f = fopen(path, "rb");
  REQUIRE(f);
  fseek(f, 0, SEEK_END);
  long len = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t *d = malloc((size_t)len), *c = malloc((size_t)len);
  REQUIRE(d && c && fread(d, 1, (size_t)len, f) == (size_t)len);
  fclose(f);
  nr_rng r = nr_rng_make(0x51a9);
  for (int i = 0; i < 40; i++) {
    memcpy(c, d, (size_t)len);
    size_t at = nr_rng_u32(&r) % (uint32_t)(len - 32);
    c[at] ^= (uint8_t)(1u << (nr_rng_u32(&r) % 8));
    nr_sha256(c, (size_t)len - 32, c + len - 32);
    f = fopen(path, "wb");
    REQUIRE(f && fwrite(c, 1, (size_t)len, f) == (size_t)len);
    fclose(f);
    nr_error err = {0};
    CHECK(load_with(path, key_a, &err) == NR_ERR_INVALID_MODEL,
          "byte %zu flipped: loaded under the key (%s)", at, err.message);
  }
  remove(path);
  free(path);
  free(d);
  free(c);
}
