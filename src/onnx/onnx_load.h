/* onnx_load.h - turning a serialized ONNX ModelProto (or a single TensorProto) into
 * nnroute's IR.
 *
 * The loader treats every byte as hostile: protobuf-c parses with a counting allocator
 * capped at a multiple of the input size, a pre-pass bounds message nesting before
 * protobuf-c's recursive parser sees the bytes, and every dim, length, offset and name
 * is checked before use. Failures return a status and a message naming the tensor,
 * node or file at fault; nothing aborts. */
#ifndef NR_ONNX_LOAD_H
#define NR_ONNX_LOAD_H

#include "ir/ir.h"
#include "onnx/onnx.pb-c.h"
#include "util/error.h"

#include <stddef.h>

/* Highest ai.onnx opset and the IR version range the loader accepts. */
#define NR_ONNX_MAX_OPSET 28
#define NR_ONNX_MIN_IR_VERSION 3
#define NR_ONNX_MAX_IR_VERSION 14
/* Default for max_bytes == 0: 16 GiB of tensor data. */
#define NR_ONNX_DEFAULT_MAX_BYTES ((size_t)16 << 30)

/* Builds *out (a new graph the caller destroys with nr_graph_destroy) from the
 * ModelProto bytes in data[0..len). External tensor data is read from files under
 * base_dir (NULL: external data is refused). max_bytes bounds the total size of all
 * tensor data in the model (0: NR_ONNX_DEFAULT_MAX_BYTES). The bytes are not kept. */
nr_status nr_onnx_load(const void *data, size_t len, const char *base_dir,
                       size_t max_bytes, nr_graph **out, nr_error *err);

/* Converts one TensorProto into *out (owned data, at least one byte allocated even for
 * an empty tensor). External data is resolved under base_dir as for nr_onnx_load;
 * max_bytes bounds this tensor's size (0: the default). *out is untouched on failure. */
nr_status nr_onnx_tensor_to_value(const Onnx__TensorProto *t, const char *base_dir,
                                  size_t max_bytes, nr_value *out, nr_error *err);

/* ---- shared with the .pb reader (src/io/pb.c) ---------------------------------- */

/* Parses bytes as message type desc into *out after checking the wire format's nesting
 * depth, with allocations capped near a multiple of len. On failure returns
 * NR_ERR_INVALID_MODEL "not a valid <what> (protobuf parse failed)" (or NR_ERR_NOMEM
 * when the cap was hit) and leaves *out NULL. Free the result with nr_onnx_free(). */
nr_status nr_onnx_unpack(const ProtobufCMessageDescriptor *desc, const void *data,
                         size_t len, const char *what, ProtobufCMessage **out,
                         nr_error *err);
void nr_onnx_free(ProtobufCMessage *msg);

/* Maps an ONNX element type number to an nr_dtype nnroute can hold. Types that are
 * valid ONNX but not held (string, complex, float8, 4-bit, ...) give
 * NR_ERR_UNSUPPORTED; numbers outside the ONNX enum give NR_ERR_INVALID_MODEL. what
 * names the tensor in the message ("initializer 'w'"). */
nr_status nr_onnx_dtype(int32_t onnx_type, const char *what, nr_dtype *out, nr_error *err);

#endif
