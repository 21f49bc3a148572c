/* onnx_proto.c - safe protobuf parsing for hostile bytes.
 *
 * protobuf-c checks every length against the buffer, but two things remain open to a
 * crafted file: its parser recurses once per nested message with no depth limit (a
 * few hundred kilobytes of nested AttributeProto -> GraphProto -> NodeProto headers
 * would overflow the stack), and the structures it builds can be many times larger
 * than the bytes (an empty NodeProto is 2 bytes on the wire, ~120 in memory). So
 * before protobuf-c runs, a small walker follows the wire format with the message
 * descriptors and refuses nesting deeper than NR_ONNX_MAX_DEPTH; and protobuf-c
 * allocates through a counting allocator that fails past a cap proportional to the
 * input size. Messages are freed through the same allocator (a real malloc failure
 * inside the parser reads as out of memory, not as a malformed file). */
#include "onnx/onnx_internal.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ModelProto -> GraphProto -> NodeProto -> AttributeProto -> GraphProto ... costs
 * three levels per nested subgraph, so this allows about thirty levels of If/Loop. */
#define NR_ONNX_MAX_DEPTH 100
/* Bytes protobuf-c may allocate: this many times the input, plus a fixed slack. */
#define NR_ONNX_ALLOC_FACTOR 8
#define NR_ONNX_ALLOC_SLACK ((size_t)256 << 20)

typedef struct counting_alloc {
  size_t used, cap;
  bool refused; /* the cap was reached */
  bool oom;     /* malloc itself failed */
} counting_alloc;

static void *counting_alloc_fn(void *data, size_t size) {
  counting_alloc *ca = data;
  if (size > ca->cap - ca->used) {
    ca->refused = true;
    return NULL;
  }
  ca->used += size;
  void *p = malloc(size ? size : 1);
  ca->oom |= !p;
  return p;
}

static void counting_free_fn(void *data, void *ptr) {
  free(ptr);
}

/* What nr_onnx_free hands protobuf-c: freeing never allocates. */
static ProtobufCAllocator free_alloc = {counting_alloc_fn, counting_free_fn, NULL};

static int read_varint(const uint8_t **p, const uint8_t *end, uint64_t *out) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*p >= end)
      return -1;
    uint8_t b = *(*p)++;
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 0;
    }
  }
  return -1;
}

/* Returns 0 when well formed, -1 when malformed, -2 when nested too deeply. */
static int wire_check(const ProtobufCMessageDescriptor *desc, const uint8_t *p,
                      const uint8_t *end, int depth) {
  if (depth > NR_ONNX_MAX_DEPTH)
    return -2;
  while (p < end) {
    uint64_t tag, len;
    if (read_varint(&p, end, &tag))
      return -1;
    switch (tag & 7) {
    case 0:
      if (read_varint(&p, end, &len))
        return -1;
      break;
    case 1:
      if (end - p < 8)
        return -1;
      p += 8;
      break;
    case 5:
      if (end - p < 4)
        return -1;
      p += 4;
      break;
    case 2: {
      if (read_varint(&p, end, &len) || len > (uint64_t)(end - p))
        return -1;
      uint64_t id = tag >> 3;
      const ProtobufCFieldDescriptor *f =
          id <= 0x1fffffff ? protobuf_c_message_descriptor_get_field(desc, (unsigned)id)
                           : NULL;
      if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
        int rc = wire_check(f->descriptor, p, p + len, depth + 1);
        if (rc)
          return rc;
      }
      p += len;
      break;
    }
    default:
      return -1; /* groups: not used by ONNX, not supported by protobuf-c */
    }
  }
  return 0;
}

nr_status nr_onnx_unpack(const ProtobufCMessageDescriptor *desc, const void *data,
                         size_t len, const char *what, ProtobufCMessage **out,
                         nr_error *err) {
  *out = NULL;
  if (!data && len)
    return nr_errorf(err, NR_ERR_INVALID_ARGUMENT, "no bytes given for %s", what);
  const uint8_t *p = data ? data : (const uint8_t *)"";
  int rc = wire_check(desc, p, p + len, 0);
  if (rc == -2)
    return nr_errorf(err, NR_ERR_INVALID_MODEL,
                     "not a valid %s (messages nested deeper than %d levels)", what,
                     NR_ONNX_MAX_DEPTH);
  counting_alloc ca = {0, NR_ONNX_ALLOC_SLACK, false, false};
  if (len > (SIZE_MAX - ca.cap) / NR_ONNX_ALLOC_FACTOR)
    ca.cap = SIZE_MAX;
  else
    ca.cap += len * NR_ONNX_ALLOC_FACTOR;
  ProtobufCAllocator alloc = {counting_alloc_fn, counting_free_fn, &ca};
  if (!rc)
    *out = protobuf_c_message_unpack(desc, &alloc, len, p);
  if (*out)
    return NR_OK;
  if (ca.oom)
    return nr_errorf(err, NR_ERR_NOMEM, "out of memory parsing %s (%zu bytes)", what, len);
  if (ca.refused)
    return nr_errorf(err, NR_ERR_NOMEM,
                     "not a valid %s (parsing %zu bytes needed more than %zu bytes of memory)",
                     what, len, ca.cap);
  return nr_errorf(err, NR_ERR_INVALID_MODEL, "not a valid %s (protobuf parse failed)", what);
}

void nr_onnx_free(ProtobufCMessage *msg) {
  if (msg)
    protobuf_c_message_free_unpacked(msg, &free_alloc);
}

char *nr_onnx_strdup(const char *s) {
  return strdup(s ? s : "");
}
