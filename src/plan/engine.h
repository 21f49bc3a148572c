/* engine.h - the engine record: a compiled plan plus everything it depends on (the
 * environment fingerprint, versions, the calibration it was built with) and the
 * device state a backend attaches to it.
 *
 * An engine is refused, never silently used, when anything it depends on differs:
 * the environment fingerprint (CPU vendor, model and ISA flags, core count, OpenBLAS
 * and oneDNN versions, compiler), the nnroute version or the knob schema. The record
 * sits below the backends so their function tables can take it; saving, loading and
 * fingerprinting are engine/'s (engine/engine.h). */
#ifndef NR_PLAN_ENGINE_H
#define NR_PLAN_ENGINE_H

#include "nnroute.h"
#include "plan/plan.h"

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
  uint8_t *sign_key;       /* HMAC key its file is signed with when saved, or NULL
                              (owned copy; engine/engine_sign.c) */
  size_t sign_key_len;
};

#endif
