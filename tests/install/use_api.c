/* use_api.c - a program written against the installed nnroute (header + pkg-config
 * file only): loads a model, fills its inputs with a constant, runs it and prints each
 * output's shape. The install test compiles and runs it. */
#include <nnroute.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: use_api MODEL\n");
    return 2;
  }
  nr_error err = {0};
  nr_model *m = NULL;
  if (nr_model_load(argv[1], NULL, &m, &err)) {
    fprintf(stderr, "load: %s\n", err.message);
    return 1;
  }
  int ni = nr_model_input_count(m), no = nr_model_output_count(m);
  nr_buffer *in = calloc((size_t)ni, sizeof *in), *out = calloc((size_t)no, sizeof *out);
  for (int i = 0; i < ni; i++) {
    nr_io_info info;
    nr_model_input_info(m, i, &info);
    in[i].dtype = info.dtype;
    in[i].rank = info.rank;
    for (int d = 0; d < info.rank; d++)
      in[i].dims[d] = info.dims[d] < 0 ? 1 : info.dims[d];
    nr_model_set_input_shape(m, info.name, in[i].rank, in[i].dims, NULL);
    in[i].data = calloc(nr_buffer_count(&in[i]), nr_dtype_size(info.dtype));
  }
  int rc = 0;
  if (nr_model_run(m, in, out, &err)) {
    fprintf(stderr, "run: %s\n", err.message);
    rc = 1;
  }
  for (int o = 0; !rc && o < no; o++) {
    printf("output %d: %s rank %d, %zu elements\n", o, nr_dtype_name(out[o].dtype),
           out[o].rank, nr_buffer_count(&out[o]));
    nr_buffer_free(&out[o]);
  }
  for (int i = 0; i < ni; i++)
    free(in[i].data);
  free(in);
  free(out);
  nr_model_destroy(m);
  return rc;
}
