/* engine.h - the engine: a compiled plan plus everything it depends on, and the
 * file format it is saved in.
 *
 * An engine is refused, never silently used, when anything it depends on differs:
 * the environment fingerprint (CPU vendor, model and ISA flags, core count, OpenBLAS
 * and oneDNN versions, compiler), the nnroute version or the knob schema. The file
 * format is specified at the top of engine_format.c; loading checks every length,
 * offset and the checksum before using a byte. */
#ifndef NR_ENGINE_ENGINE_H
#define NR_ENGINE_ENGINE_H

#include "plan/tactic.h"
#include "nnroute.h"

typedef struct nr_fingerprint {
  char cpu_vendor[16];
  char cpu_model[64];
  char isa[128];          /* space-separated flags nnroute cares about */
  int cores;
  char openblas[64];      /* library versions, "none" when not linked */
  char onednn[64];
  char compiler[64];
  /* Device engines (META keys 16-22): the device kind, and for CUDA the GPU's name,
   * compute capability, driver, CUDA runtime, cuBLAS and cuDNN versions. For such an
   * engine the CPU fields above are recorded but not compared: no step runs there. */
  nr_device device;
  char gpu[96];           /* "NVIDIA H200", or "none (why)" where no GPU answers */
  char gpu_cc[16];        /* "9.0" */
  char gpu_driver[32];    /* the CUDA version the driver supports, "13.0" */
  char cuda_runtime[32];
  char cublas[32];
  char cudnn[32];
} nr_fingerprint;

/* The fingerprint of this process's environment (for CPU engines). */
void nr_fingerprint_current(nr_fingerprint *fp);
/* The same for engines of device d: the device's fields filled by its backend (or
 * "none (...)" saying why they cannot be). */
void nr_fingerprint_current_for(nr_fingerprint *fp, nr_device d);
/* NR_OK when equal; otherwise a message naming each field that differs, with both
 * values ("cpu_model: engine 'X', this machine 'Y'"). */
nr_status nr_fingerprint_compare(const nr_fingerprint *engine, const nr_fingerprint *here,
                                 nr_error *err);

struct nr_engine {
  nr_plan *plan;
  nr_fingerprint fingerprint;
  char nnroute_version[32];
  char knob_schema[17];
  uint8_t model_sha256[32];
  uint64_t build_ms;       /* build time */
  int threads;             /* thread count the plan was built for */
  struct nr_calibration *calib; /* owned copy of the build's calibration, or NULL */
  void *device_state;      /* device engines: the backend's per-engine state (the
                              weights uploaded once), owned by the backend */
};

/* Serializes e into a malloc'ed buffer. */
nr_status nr_engine_serialize(const nr_engine *e, uint8_t **data, size_t *len,
                              nr_error *err);
/* Parses and validates an engine. With check_env, an engine built for another
 * fingerprint, nnroute version or knob schema is refused (NR_ERR_INVALID_ARGUMENT with
 * a message naming what differs); corrupt or truncated data gives NR_ERR_INVALID_MODEL
 * naming the section and offset. */
nr_status nr_engine_parse(const uint8_t *data, size_t len, bool check_env, nr_engine **out,
                          nr_error *err);
void nr_engine_free(nr_engine *e);

#endif
