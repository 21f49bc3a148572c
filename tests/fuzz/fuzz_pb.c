/* fuzz_pb.c - libFuzzer harness for the TensorProto reader (nr_pb_parse), the format
 * of the ONNX backend tests' input_K.pb / output_K.pb and of `--inputs-dir`.
 *
 * Key decision: external data is looked up under a folder that does not exist, so
 * the reader's own checks are fuzzed and no input reaches the file system. */
#include "io/tensor_io.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  nr_value v = {0};
  char *name = NULL;
  if (!nr_pb_parse(data, size, "fuzz.pb", "/nonexistent/nnroute-fuzz", &v, &name, NULL)) {
    nr_value_count(&v);
    nr_value_free(&v);
  }
  free(name);
  return 0;
}
