/* nnroute.h - the public API of nnroute, an inference compiler for ONNX models.
 *
 * This is the only public header: everything under src/ is internal and may change.
 * Handles are opaque. Every function that can fail returns an nr_status and, when an
 * nr_error is passed, leaves a message there that names what is wrong and where
 * (file, offset, node, tensor). Destroying NULL is a no-op. The library never aborts
 * or exits on bad input.
 *
 * Stages follow what changes: load a model (nr_model_load) -> fix the input shapes
 * (nr_model_set_input_shape, nr_model_prepare) -> either run it with the reference
 * executor (nr_model_run, the semantic oracle) or compile it along a build route into
 * an engine (nr_engine_build; slow) -> save/load the engine -> create a context per
 * concurrent user -> run. */
#ifndef NNROUTE_H
#define NNROUTE_H

#include <stddef.h>
#include <stdint.h>

/* NR_API marks the functions libnnroute.so exports. The library is compiled with
 * -fvisibility=hidden: a function without NR_API stays internal to the library. */
#if defined(__GNUC__) || defined(__clang__)
#define NR_API __attribute__((visibility("default")))
#else
#define NR_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The version of this build: the release number, then the commit it was built from
 * when built from a git checkout ("0.1.0-g385e44b1c2d3", "-dirty" with uncommitted
 * changes). A static string. NR_VERSION_STRING is the same call. */
NR_API const char *nr_version(void);
#define NR_VERSION_STRING (nr_version())
#define NR_MAX_RANK 8

typedef enum nr_status {
  NR_OK = 0,
  NR_ERR_INVALID_ARGUMENT, /* a caller passed something unusable */
  NR_ERR_INVALID_MODEL,    /* the model file breaks the ONNX rules */
  NR_ERR_UNSUPPORTED,      /* valid ONNX that nnroute documents as unsupported */
  NR_ERR_SHAPE,            /* shapes or dtypes do not fit an operator */
  NR_ERR_IO,               /* a file could not be read or written */
  NR_ERR_NOMEM,            /* an allocation failed or a size is absurd */
  NR_ERR_RUNTIME,          /* an operator failed on the data it was given */
  NR_ERR_INTERNAL,         /* a bug in nnroute */
} nr_status;

/* Human-readable name of a status ("invalid model", ...); static storage. */
NR_API const char *nr_status_str(nr_status status);

/* Error detail filled by failing calls. Plain storage, owned by the caller. */
typedef struct nr_error {
  nr_status status;
  char message[1024];
} nr_error;

/* Element types, numbered as ONNX's TensorProto.DataType. */
typedef enum nr_dtype {
  NR_DTYPE_UNDEFINED = 0,
  NR_DTYPE_FLOAT = 1,
  NR_DTYPE_UINT8 = 2,
  NR_DTYPE_INT8 = 3,
  NR_DTYPE_UINT16 = 4,
  NR_DTYPE_INT16 = 5,
  NR_DTYPE_INT32 = 6,
  NR_DTYPE_INT64 = 7,
  NR_DTYPE_STRING = 8,
  NR_DTYPE_BOOL = 9,
  NR_DTYPE_FLOAT16 = 10,
  NR_DTYPE_DOUBLE = 11,
  NR_DTYPE_UINT32 = 12,
  NR_DTYPE_UINT64 = 13,
  NR_DTYPE_COMPLEX64 = 14,
  NR_DTYPE_COMPLEX128 = 15,
  NR_DTYPE_BFLOAT16 = 16,
} nr_dtype;

/* Name of a dtype ("float32", "int64", ...); static storage. */
NR_API const char *nr_dtype_name(nr_dtype dtype);
/* Size in bytes of one element; 0 for types nnroute cannot store (string, ...). */
NR_API size_t nr_dtype_size(nr_dtype dtype);

/* A dense tensor in C order. A buffer passed in stays owned by the caller; one
 * returned by nnroute is owned by the caller too and released with nr_buffer_free(). */
typedef struct nr_buffer {
  nr_dtype dtype;
  int rank;
  int64_t dims[NR_MAX_RANK];
  void *data;
} nr_buffer;

NR_API size_t nr_buffer_count(const nr_buffer *buf); /* product of dims (1 for rank 0) */
NR_API void nr_buffer_free(nr_buffer *buf);          /* frees data, keeps the struct */

typedef struct nr_model nr_model;

typedef struct nr_load_options {
  size_t size;            /* sizeof(nr_load_options): lets the struct grow */
  const char *base_dir;   /* where external data lives; NULL: the model's folder */
  size_t max_bytes;       /* refuse models whose tensors exceed this; 0: 16 GiB */
} nr_load_options;

/* Loads an ONNX model. On success *out owns everything it needs; the file may be
 * deleted afterwards. opts may be NULL. */
NR_API nr_status nr_model_load(const char *path, const nr_load_options *opts,
                               nr_model **out, nr_error *err);
/* The same from memory; external data is looked up under opts->base_dir. */
NR_API nr_status nr_model_load_bytes(const void *data, size_t len,
                                     const nr_load_options *opts, nr_model **out,
                                     nr_error *err);
NR_API void nr_model_destroy(nr_model *model);

/* Graph inputs (initializers excluded) and outputs. The description's name pointer
 * lives as long as the model. Unknown dims are -1 until nr_model_prepare(). */
typedef struct nr_io_info {
  const char *name;
  nr_dtype dtype;
  int rank;
  int64_t dims[NR_MAX_RANK];
} nr_io_info;

NR_API int nr_model_input_count(const nr_model *model);
NR_API int nr_model_output_count(const nr_model *model);
NR_API nr_status nr_model_input_info(const nr_model *model, int index, nr_io_info *info);
NR_API nr_status nr_model_output_info(const nr_model *model, int index, nr_io_info *info);

/* Fixes the shape of one graph input (replacing dynamic or default dims). */
NR_API nr_status nr_model_set_input_shape(nr_model *model, const char *name, int rank,
                                          const int64_t *dims, nr_error *err);
/* Resolves shapes and dtypes through the graph and folds shape-computing subgraphs
 * into constants. Called implicitly by nr_model_run() when needed. */
NR_API nr_status nr_model_prepare(nr_model *model, nr_error *err);

/* Runs the model with the reference executor. inputs[i] matches graph input i (in
 * nr_model_input_info order). outputs must have room for nr_model_output_count()
 * buffers; each is filled with newly allocated data the caller frees. */
NR_API nr_status nr_model_run(nr_model *model, const nr_buffer *inputs,
                              nr_buffer *outputs, nr_error *err);

/* ---- compiling: routes, engines, contexts --------------------------------------- */

typedef struct nr_engine nr_engine;
typedef struct nr_context nr_context;

/* Where an engine runs. */
typedef enum nr_device { NR_DEVICE_CPU = 0, NR_DEVICE_CUDA = 1 } nr_device;

/* Activation statistics from calibration inputs, for int8 nodes (precision@NODE=int8).
 * Built once per model and shape; any number of builds may share it. */
typedef struct nr_calibration nr_calibration;

/* Runs the reference executor on n_sets input sets and records every float tensor's
 * range and histogram. inputs holds n_sets * nr_model_input_count() buffers, set by
 * set, each in nr_model_input_info order. */
NR_API nr_status nr_calibration_collect(nr_model *model, int n_sets,
                                        const nr_buffer *inputs, nr_calibration **out,
                                        nr_error *err);
NR_API void nr_calibration_destroy(nr_calibration *calib);
/* A calibration table as a file (the format engines embed), and back. */
NR_API nr_status nr_calibration_save(const nr_calibration *calib, const char *path,
                                     nr_error *err);
NR_API nr_status nr_calibration_load(const char *path, nr_calibration **out,
                                     nr_error *err);

typedef struct nr_build_options {
  size_t size;            /* sizeof(nr_build_options) */
  const char *route;      /* build route ("-knob=value ..."); NULL or "": default */
  int threads;            /* threads the engine will run with; 0: all CPUs */
  nr_device device;       /* NR_DEVICE_CPU unless set */
  const nr_calibration *calibration; /* needed when a route puts a node in int8 */
  /* Optional: a key (copied) whose HMAC-SHA-256 signs the engine's file when it is
   * saved, for engines that cross a trust boundary; load with the same key in
   * nr_engine_load_options.verify_key. NULL or length 0: unsigned (integrity only,
   * by the file's SHA-256). */
  const void *sign_key;
  size_t sign_key_len;
} nr_build_options;

/* Compiles a model (prepared implicitly) along a route into an engine. The engine
 * does not refer to the model afterwards. */
NR_API nr_status nr_engine_build(nr_model *model, const nr_build_options *opts,
                                 nr_engine **out, nr_error *err);
/* Writes the engine file. The bytes go to a new temporary file with a random name in
 * path's directory, which is renamed over path once complete: path holds the old
 * file or the new one, never part of one, and a failure leaves no temporary behind.
 * nr_calibration_save writes its file the same way. */
NR_API nr_status nr_engine_save(const nr_engine *engine, const char *path, nr_error *err);

typedef struct nr_engine_load_options {
  size_t size;            /* sizeof(nr_engine_load_options) */
  int unsafe_ignore_environment; /* load an engine built for another machine,
                                    nnroute version or knob schema (results may be
                                    wrong or the process may crash) */
  /* Optional: the key the engine must have been signed with (nr_build_options
   * sign_key). The file's HMAC is checked before any of it is parsed; an unsigned
   * engine, or one signed with another key or changed since, is refused
   * (NR_ERR_INVALID_MODEL). NULL or length 0: no check. Not kept after the call. */
  const void *verify_key;
  size_t verify_key_len;
} nr_engine_load_options;

/* Loads an engine file, refusing one built for another environment (the message
 * names what differs) and any corrupt or truncated file. opts may be NULL. */
NR_API nr_status nr_engine_load(const char *path, const nr_engine_load_options *opts,
                                nr_engine **out, nr_error *err);
NR_API void nr_engine_destroy(nr_engine *engine);

NR_API int nr_engine_input_count(const nr_engine *engine);
NR_API int nr_engine_output_count(const nr_engine *engine);
NR_API nr_status nr_engine_input_info(const nr_engine *engine, int index,
                                      nr_io_info *info);
NR_API nr_status nr_engine_output_info(const nr_engine *engine, int index,
                                       nr_io_info *info);
/* The canonical route the engine was built with ("" for the default); lives as long
 * as the engine. */
NR_API const char *nr_engine_route(const nr_engine *engine);

/* What runs one step of an engine. The strings live as long as the engine. */
typedef struct nr_step_info {
  const char *node;    /* the graph node's name; "" for a layout reorder */
  const char *op_type; /* its op type ("EltwiseChain" for fused nnroute ops); "" for a
                          reorder */
  const char *tactic;  /* the kernel's name, as `nnroute inspect` prints it */
  int reference;       /* 1 when the step runs on the reference tactic: no fast kernel
                          took the node, so it runs one element at a time */
} nr_step_info;

/* Steps of the engine, in run order; nr_engine_step_info fills info for step index
 * (NR_ERR_INVALID_ARGUMENT out of range). nr_engine_reference_steps counts the steps
 * on the reference tactic, which `nnroute build` warns about. */
NR_API int nr_engine_step_count(const nr_engine *engine);
NR_API nr_status nr_engine_step_info(const nr_engine *engine, int index, nr_step_info *info);
NR_API int nr_engine_reference_steps(const nr_engine *engine);

/* A context holds the memory and threads of one run at a time; many contexts may
 * share one engine and run on different threads at once. threads <= 0: the engine's. */
NR_API nr_status nr_context_create(const nr_engine *engine, int threads, nr_context **out,
                                   nr_error *err);
NR_API void nr_context_destroy(nr_context *ctx);
/* Runs the engine. inputs[i] matches engine input i (shape and dtype must match).
 * An output buffer with data == NULL gets newly allocated data (caller frees with
 * nr_buffer_free); one with data set must have the output's shape and dtype and is
 * written in place. */
NR_API nr_status nr_context_run(nr_context *ctx, const nr_buffer *inputs,
                                nr_buffer *outputs, nr_error *err);

#ifdef __cplusplus
}
#endif

#endif /* NNROUTE_H */
