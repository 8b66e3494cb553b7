//===- attention.cpp - Attention forwards in the C++ DSL -------------------===//
//
// This file implements two non-causal attention forwards in kiln::lang. attentionFa2 is
// FlashAttention-2's Triton style: a BLOCK_M-row block of queries per program, K and V tiles
// loaded by pointers computed from the loop's start_n, the online softmax in base 2. On sm_90a
// the compiler copies K and V with the TMA (tensor maps it appends); with WS the loop is
// `for_range_ws` (tl.range(..., warp_specialize=True)): a producer warpgroup issues the
// copies and the two consumer warpgroups take turns at the tensor cores. attentionFa3 is
// FlashAttention-3's order, as kiln_kernels' default loop at D = 128 writes it
// (_attn_fwd_inner_desc_fa3), with pointer tiles instead of descriptors.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

#include <limits>
#include <string>

using namespace kiln::lang;

namespace {
/// The attention launchers' shape contract: whole blocks of queries and keys (the kernels mask
/// nothing), a head dimension the tiles take; else rt::Error naming the kernel.
void checkAttentionShape(const char *kernel, int32_t B, int32_t H, int32_t S, int32_t D, int blockM,
                         int blockN) {
  auto pow2 = [](int64_t x) { return x > 0 && (x & (x - 1)) == 0; };
  if (B <= 0 || H <= 0 || S <= 0)
    throw kiln::rt::Error(std::string(kernel) + ": expected positive B, H and S, found " +
                          std::to_string(B) + ", " + std::to_string(H) + " and " +
                          std::to_string(S));
  if (!pow2(D) || D < 16 || D > 256)
    throw kiln::rt::Error(std::string(kernel) +
                          ": expected a head dimension of 16, 32, 64, 128 or 256, found " +
                          std::to_string(D));
  if (!pow2(blockM) || !pow2(blockN) || S % blockM || S % blockN)
    throw kiln::rt::Error(std::string(kernel) + ": expected S (" + std::to_string(S) +
                          ") a multiple of BLOCK_M (" + std::to_string(blockM) + ") and BLOCK_N (" +
                          std::to_string(blockN) +
                          "), both powers of two (the kernel masks no keys or queries)");
}
} // namespace

const kiln::kernels::Fa2AttentionKernel &kiln::kernels::attentionFa2Kernel() {
  static const Fa2AttentionKernel kernel =
      kiln::kernel("attention_fa2", [](Ptr<f16> Q, Ptr<f16> K, Ptr<f16> V, Ptr<f16> Out,
                                       F32 sm_scale, I32 stride_z, I32 stride_h, I32 stride_n,
                                       I32 H, I32 N_CTX, Const<int> HEAD_DIM, Const<int> BLOCK_M,
                                       Const<int> BLOCK_N, Const<bool> WS) {
        Value start_m = program_id(0), off_hz = program_id(1);
        Value base = (off_hz / H).to(int64) * stride_z + (off_hz % H).to(int64) * stride_h;
        Value offs_m = start_m * BLOCK_M + arange(0, BLOCK_M);
        Value offs_n = arange(0, BLOCK_N);
        Value offs_d = arange(0, HEAD_DIM);
        Value q = load(Q + base + offs_m[{Slice_, None_}] * stride_n + offs_d[{None_, Slice_}]);
        Value qk_scale = sm_scale * 1.44269504;
        Values init = {zeros({BLOCK_M, HEAD_DIM}, float32), zeros({BLOCK_M}, float32),
                       full({BLOCK_M}, -std::numeric_limits<double>::infinity(), float32)};
        auto body = [&](Value start_n, Values c) -> Values {
          Value cols = start_n + offs_n;
          Value k = load(K + base + cols[{Slice_, None_}] * stride_n + offs_d[{None_, Slice_}]);
          Value qk = dot(q, trans(k)) * qk_scale;
          Value m_ij = maximum(c[2], max(qk, 1));
          Value p = exp2(qk - m_ij[{Slice_, None_}]);
          Value alpha = exp2(c[2] - m_ij);
          Value l_i = c[1] * alpha + sum(p, 1);
          Value acc = c[0] * alpha[{Slice_, None_}];
          Value v = load(V + base + cols[{Slice_, None_}] * stride_n + offs_d[{None_, Slice_}]);
          return {dot(p.to(float16), v, acc), l_i, m_ij};
        };
        Values r = WS ? for_range_ws(0, N_CTX, BLOCK_N, init, body)
                      : for_range(0, N_CTX, BLOCK_N, init, body);
        // One reciprocal a row, a multiply an element (a division an element is about four
        // instructions each after ptxas).
        Value out = r[0] * (1.0 / r[1])[{Slice_, None_}];
        store(Out + base + offs_m[{Slice_, None_}] * stride_n + offs_d[{None_, Slice_}],
              out.to(float16));
      });
  return kernel;
}

void kiln::kernels::attentionFa2(rt::CUstream stream, rt::CUdeviceptr q, rt::CUdeviceptr k,
                                 rt::CUdeviceptr v, rt::CUdeviceptr out, int32_t B, int32_t H,
                                 int32_t S, int32_t D, float smScale, bool warpSpecialize,
                                 int blockM, int blockN, unsigned warps, unsigned stages) {
  checkAttentionShape("attention_fa2", B, H, S, D, blockM, blockN);
  attentionFa2Kernel()(grid(cdiv(S, blockM), B * H).num_warps(warps).num_stages(stages), stream, q,
                       k, v, out, smScale, H * S * D, S * D, D, H, S, D, blockM, blockN,
                       warpSpecialize);
}

const kiln::kernels::Fa3AttentionKernel &kiln::kernels::attentionFa3Kernel() {
  static const Fa3AttentionKernel kernel = kiln::kernel("attention_fa3", [](Ptr<f16> Q, Ptr<f16> K,
                                                                            Ptr<f16> V,
                                                                            Ptr<f16> Out,
                                                                            F32 sm_scale, I32 ROWS,
                                                                            I32 N_CTX,
                                                                            Const<int> HEAD_DIM,
                                                                            Const<int> BLOCK_M,
                                                                            Const<int> BLOCK_N) {
    // (B * H * N_CTX, HEAD_DIM) views: the TMA copies their blocks (maps the launch
    // encodes from Q, K, V, Out and ROWS).
    auto view = [&](const Value &base, int rows) {
      return make_tensor_descriptor(base, {ROWS, HEAD_DIM}, {HEAD_DIM, 1}, {rows, int(HEAD_DIM)});
    };
    TensorDescriptor desc_q = view(Q, BLOCK_M), desc_k = view(K, BLOCK_N),
                     desc_v = view(V, BLOCK_N), desc_o = view(Out, BLOCK_M);
    Value start_m = program_id(0), off_hz = program_id(1);
    Value q_row = off_hz * N_CTX + start_m * BLOCK_M, kv_row = off_hz * N_CTX;
    Value q = desc_q.load({q_row, 0});
    Value qk_scale = sm_scale * 1.44269504;
    Value n_blocks = N_CTX / BLOCK_N;
    // acc, l, m, then p (carried in fp32, converted where it is multiplied) and alpha of
    // the previous block.
    Values init = {zeros({BLOCK_M, HEAD_DIM}, float32), zeros({BLOCK_M}, float32),
                   full({BLOCK_M}, -std::numeric_limits<double>::infinity(), float32),
                   zeros({BLOCK_M, BLOCK_N}, float32), full({BLOCK_M}, 1.0, float32)};
    Values r = for_range_ws(0, n_blocks + 1, 1, init, [&](Value j, Values c) -> Values {
      Value start_n = j * BLOCK_N;
      Value has_keys = j < n_blocks;
      // Block j's keys (the last iteration, without keys, reads the last block again) and
      // block j - 1's values (the first reads block 0: p is zeros there).
      Value kT = trans(desc_k.load({kv_row + minimum(start_n, N_CTX - BLOCK_N), 0}));
      Value v = desc_v.load({kv_row + maximum(start_n - BLOCK_N, 0), 0});
      Value qk = dot(q, kT);
      Value acc = c[0] * c[4][{Slice_, None_}];
      acc = dot(c[3].to(float16), v, acc);
      // (m is -inf until the first block: -inf - -inf must not reach exp2)
      Value m_ij = where(has_keys, maximum(c[2], max(qk, 1) * qk_scale), c[2]);
      Value p = exp2(qk * qk_scale - m_ij[{Slice_, None_}]);
      Value alpha = where(has_keys, exp2(c[2] - m_ij), 1.0);
      Value l_i = c[1] * alpha + where(has_keys, sum(p, 1), 0.0);
      return {acc, l_i, m_ij, p, alpha};
    });
    Value out = r[0] * (1.0 / r[1])[{Slice_, None_}];
    desc_o.store({q_row, 0}, out.to(float16));
  });
  return kernel;
}

void kiln::kernels::attentionFa3(rt::CUstream stream, rt::CUdeviceptr q, rt::CUdeviceptr k,
                                 rt::CUdeviceptr v, rt::CUdeviceptr out, int32_t B, int32_t H,
                                 int32_t S, int32_t D, float smScale, int blockM, int blockN,
                                 unsigned warps, unsigned stages) {
  checkAttentionShape("attention_fa3", B, H, S, D, blockM, blockN);
  attentionFa3Kernel()(grid(cdiv(S, blockM), B * H).num_warps(warps).num_stages(stages), stream, q,
                       k, v, out, smScale, B * H * S, S, D, blockM, blockN);
}
