/* fingerprint.c - what an engine depends on in its environment.
 *
 * Key decision: the fingerprint lists exactly what can make a built plan wrong or
 * slow elsewhere, as plain strings, so a refusal names the field and both values.
 * CPU vendor, model and ISA flags come from cpuid (the flags only when the OS also
 * saves the registers, per XGETBV), falling back to /proc/cpuinfo off x86; the ISA
 * list is the flags nnroute's kernels or its libraries' dispatch depend on. OpenBLAS
 * reports its version and the core it dispatched to; oneDNN its version and commit.
 * A device engine (CUDA) adds its device's fields, filled by the backend, and is
 * compared on those and the compiler only: none of its steps runs on the CPU. */
#include "backends/backend.h"
#include "engine/engine.h"
#include "util/threadpool.h"

#include <cblas.h>
#include <dnnl.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#define NR_HAVE_CPUID 1
#endif

static void copy_trimmed(char *dst, size_t cap, const char *src) {
  while (*src == ' ' || *src == '\t')
    src++;
  size_t n = strlen(src);
  while (n && (src[n - 1] == ' ' || src[n - 1] == '\n' || src[n - 1] == '\t'))
    n--;
  if (n >= cap)
    n = cap - 1;
  memcpy(dst, src, n);
  dst[n] = '\0';
}

#ifdef NR_HAVE_CPUID
static uint64_t xgetbv0(void) {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (uint64_t)hi << 32 | lo;
}

static void cpu_names(nr_fingerprint *fp) {
  unsigned a, b, c, d;
  char vendor[13] = {0};
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    memcpy(vendor, &b, 4);
    memcpy(vendor + 4, &d, 4);
    memcpy(vendor + 8, &c, 4);
    copy_trimmed(fp->cpu_vendor, sizeof fp->cpu_vendor, vendor);
  }
  char brand[49] = {0};
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) && a >= 0x80000004u) {
    for (unsigned i = 0; i < 3; i++) {
      __get_cpuid(0x80000002u + i, &a, &b, &c, &d);
      unsigned regs[4] = {a, b, c, d};
      memcpy(brand + 16 * i, regs, 16);
    }
    copy_trimmed(fp->cpu_model, sizeof fp->cpu_model, brand);
  }
}

/* Appends the flags this CPU has and the OS enables, in a fixed order. */
static void cpu_isa(nr_fingerprint *fp) {
  unsigned a, b, c, d, b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return;
  unsigned c1 = c;
  bool osxsave = c1 & (1u << 27);
  uint64_t xcr0 = osxsave ? xgetbv0() : 0;
  bool avx_os = (xcr0 & 0x6) == 0x6;
  bool avx512_os = avx_os && (xcr0 & 0xe0) == 0xe0;
  bool amx_os = (xcr0 & 0x60000) == 0x60000;
  if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7))
    __get_cpuid_count(7, 1, &a71, &b, &c, &d);
  const struct {
    const char *name;
    bool on;
  } flags[] = {
      {"sse4.2", c1 & (1u << 20)},
      {"avx", avx_os && (c1 & (1u << 28))},
      {"avx2", avx_os && (b7 & (1u << 5))},
      {"fma", avx_os && (c1 & (1u << 12))},
      {"f16c", avx_os && (c1 & (1u << 29))},
      {"avx_vnni", avx_os && (a71 & (1u << 4))},
      {"avx512f", avx512_os && (b7 & (1u << 16))},
      {"avx512bw", avx512_os && (b7 & (1u << 30))},
      {"avx512vl", avx512_os && (b7 & (1u << 31))},
      {"avx512_vnni", avx512_os && (c7 & (1u << 11))},
      {"avx512_bf16", avx512_os && (a71 & (1u << 5))},
      {"amx_tile", amx_os && (d7 & (1u << 24))},
      {"amx_int8", amx_os && (d7 & (1u << 25))},
      {"amx_bf16", amx_os && (d7 & (1u << 22))},
  };
  for (size_t i = 0; i < sizeof flags / sizeof flags[0]; i++) {
    if (!flags[i].on)
      continue;
    size_t n = strlen(fp->isa);
    snprintf(fp->isa + n, sizeof fp->isa - n, "%s%s", n ? " " : "", flags[i].name);
  }
}
#else
/* Off x86: the first "vendor_id"/"model name"-like lines of /proc/cpuinfo. */
static void cpu_names(nr_fingerprint *fp) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  char line[256];
  while (f && fgets(line, sizeof line, f)) {
    char *colon = strchr(line, ':');
    if (!colon)
      continue;
    if (!*fp->cpu_vendor && (!strncmp(line, "vendor_id", 9) || !strncmp(line, "CPU implementer", 15)))
      copy_trimmed(fp->cpu_vendor, sizeof fp->cpu_vendor, colon + 1);
    if (!*fp->cpu_model && (!strncmp(line, "model name", 10) || !strncmp(line, "CPU part", 8)))
      copy_trimmed(fp->cpu_model, sizeof fp->cpu_model, colon + 1);
  }
  if (f)
    fclose(f);
}

static void cpu_isa(nr_fingerprint *fp) {
  (void)fp;
}
#endif

/* "OpenBLAS 0.3.21 SkylakeX": the version (first two words of the build config) and
 * the core its dynamic dispatch chose, which decides the kernels it runs. */
static void openblas_version(char *out, size_t cap) {
  const char *cfg = openblas_get_config(), *core = openblas_get_corename();
  if (!cfg) {
    snprintf(out, cap, "none");
    return;
  }
  const char *sp = strchr(cfg, ' ');
  const char *end = sp ? strchr(sp + 1, ' ') : NULL;
  int n = end ? (int)(end - cfg) : (int)strlen(cfg);
  snprintf(out, cap, "%.*s %s", n, cfg, core ? core : "");
}

void nr_fingerprint_current(nr_fingerprint *fp) {
  memset(fp, 0, sizeof *fp);
  strcpy(fp->cpu_vendor, "unknown");
  strcpy(fp->cpu_model, "unknown");
  cpu_names(fp);
  cpu_isa(fp);
  fp->cores = nr_online_cpus();
  openblas_version(fp->openblas, sizeof fp->openblas);
  const dnnl_version_t *v = dnnl_version();
  if (v)
    snprintf(fp->onednn, sizeof fp->onednn, "%d.%d.%d (%.12s)", v->major, v->minor,
             v->patch, v->hash ? v->hash : "");
  else
    strcpy(fp->onednn, "none");
#if defined(__clang__)
  copy_trimmed(fp->compiler, sizeof fp->compiler, "clang " __clang_version__);
#elif defined(__GNUC__)
  copy_trimmed(fp->compiler, sizeof fp->compiler, "gcc " __VERSION__);
#else
  copy_trimmed(fp->compiler, sizeof fp->compiler, "unknown");
#endif
}

void nr_fingerprint_current_for(nr_fingerprint *fp, nr_device d) {
  nr_fingerprint_current(fp);
  if (d == NR_DEVICE_CPU)
    return;
  fp->device = d;
  const nr_backend *be = nr_backend_for(d);
  if (be) {
    be->fingerprint(fp);
    return;
  }
  snprintf(fp->gpu, sizeof fp->gpu, "none (this nnroute was built without the %s "
           "backend)", nr_device_name(d));
  strcpy(fp->gpu_cc, "none");
  strcpy(fp->gpu_driver, "none");
  strcpy(fp->cuda_runtime, "none");
  strcpy(fp->cublas, "none");
  strcpy(fp->cudnn, "none");
}

static void add_diff(nr_error *err, bool *first, const char *field, const char *a,
                     const char *b) {
  if (!err)
    return;
  size_t n = strlen(err->message);
  snprintf(err->message + n, sizeof err->message - n, "%s%s: engine '%s', this machine '%s'",
           *first ? "" : "; ", field, a, b);
  *first = false;
}

nr_status nr_fingerprint_compare(const nr_fingerprint *engine, const nr_fingerprint *here,
                                 nr_error *err) {
  const struct {
    const char *name;
    const char *a, *b;
  } fields[] = {
      {"cpu_vendor", engine->cpu_vendor, here->cpu_vendor},
      {"cpu_model", engine->cpu_model, here->cpu_model},
      {"isa", engine->isa, here->isa},
      {"openblas", engine->openblas, here->openblas},
      {"onednn", engine->onednn, here->onednn},
      {"compiler", engine->compiler, here->compiler},
  };
  const struct {
    const char *name;
    const char *a, *b;
  } gpu_fields[] = {
      {"gpu", engine->gpu, here->gpu},
      {"gpu_compute_capability", engine->gpu_cc, here->gpu_cc},
      {"gpu_driver", engine->gpu_driver, here->gpu_driver},
      {"cuda_runtime", engine->cuda_runtime, here->cuda_runtime},
      {"cublas", engine->cublas, here->cublas},
      {"cudnn", engine->cudnn, here->cudnn},
  };
  bool first = true, device = engine->device != NR_DEVICE_CPU;
  if (err)
    err->message[0] = '\0';
  if (engine->device != here->device)
    add_diff(err, &first, "device", nr_device_name(engine->device),
             nr_device_name(here->device));
  for (size_t i = 0; device && i < sizeof gpu_fields / sizeof gpu_fields[0]; i++)
    if (strcmp(gpu_fields[i].a, gpu_fields[i].b))
      add_diff(err, &first, gpu_fields[i].name, gpu_fields[i].a, gpu_fields[i].b);
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) /* device: compiler only */
    if ((!device || !strcmp(fields[i].name, "compiler")) && strcmp(fields[i].a, fields[i].b))
      add_diff(err, &first, fields[i].name, fields[i].a, fields[i].b);
  if (!device && engine->cores != here->cores) {
    char a[16], b[16];
    snprintf(a, sizeof a, "%d", engine->cores);
    snprintf(b, sizeof b, "%d", here->cores);
    add_diff(err, &first, "cores", a, b);
  }
  if (first)
    return NR_OK;
  if (err)
    err->status = NR_ERR_INVALID_ARGUMENT;
  return NR_ERR_INVALID_ARGUMENT;
}

/* The child computes the fingerprint and writes the struct to a pipe; any failure
 * leaves the device fields saying so. */
void nr_fingerprint_current_isolated(nr_fingerprint *fp, nr_device d) {
  nr_fingerprint_current(fp);
  if (d == NR_DEVICE_CPU)
    return;
  fp->device = d;
  snprintf(fp->gpu, sizeof fp->gpu, "none (the fingerprint process failed)");
  int fds[2];
  if (pipe(fds))
    return;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    nr_fingerprint f;
    close(fds[0]);
    nr_fingerprint_current_for(&f, d);
    ssize_t w = write(fds[1], &f, sizeof f);
    _exit(w == (ssize_t)sizeof f ? 0 : 1);
  }
  close(fds[1]);
  nr_fingerprint got;
  size_t have = 0;
  while (pid > 0 && have < sizeof got) {
    ssize_t n = read(fds[0], (char *)&got + have, sizeof got - have);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    have += (size_t)n;
  }
  close(fds[0]);
  if (pid > 0)
    waitpid(pid, NULL, 0);
  if (have == sizeof got)
    *fp = got;
}
