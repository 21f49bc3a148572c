/* fused.h - the operators of the "nnroute" domain that graph passes create, with
 * reference implementations in kernels/ref/ops_fused.c so an optimized graph still
 * runs on the reference executor (which is how passes are tested).
 *
 * nnroute.FusedConv (opset 1): inputs X, W, B?, R?; every Conv attribute plus
 *   activation (string, nr_act_name: "none", "relu", "clip", ...), act_alpha, act_beta.
 *   Y = act(Conv(X, W) + B + R): the residual R (same shape as Y) is added before the
 *   activation, as in ResNet blocks.
 * nnroute.FusedGemm (opset 1): inputs A, B, C?, R?; Gemm's transA, transB, alpha,
 *   beta plus activation/act_alpha/act_beta. Y = act(alpha*A'B' + beta*C + R).
 * nnroute.FusedMatMul (opset 1): inputs A, B, Bias?, R?; MatMul broadcasting;
 *   Bias broadcasts along the last axis. Y = act(A @ B + Bias + R).
 * nnroute.EltwiseChain (opset 1): a chain of elementwise ops evaluated in one loop;
 *   its encoding is documented in kernels/ref/ops_fused.c.
 */
#ifndef NR_IR_FUSED_H
#define NR_IR_FUSED_H

#define NR_DOMAIN "nnroute"

#endif
