//===- matmul.cpp - Triton's tutorial matmul in the C++ DSL ---------------===//
//
// This file implements Triton's tutorial 03 matmul in kiln::lang, written as the tutorial
// writes it: grouped program order, pointer tiles advanced by BLOCK_K along K, the K edge
// masked, rows and columns wrapped (`% M`, `% N`), fp32 accumulation, the C tile stored as fp16
// under its bounds mask. On sm_90a the compiler copies the A and B tiles into shared rings
// with the TMA and stores C through it (tensor maps it appends, encoded at each launch from
// the pointers, sizes and strides); elsewhere cp.async rings feed the dots.
//
//===----------------------------------------------------------------------===//

#include "Kernels.h"

using namespace kiln::lang;

const kiln::kernels::MatmulKernel &kiln::kernels::matmulKernel() {
  static const MatmulKernel kernel = kiln::kernel("matmul", [](Ptr<f16> a, Ptr<f16> b, Ptr<f16> c,
                                                               I32 M, I32 N, I32 K, I32 stride_am,
                                                               I32 stride_ak, I32 stride_bk,
                                                               I32 stride_bn, I32 stride_cm,
                                                               I32 stride_cn, Const<int> BLOCK_M,
                                                               Const<int> BLOCK_N,
                                                               Const<int> BLOCK_K,
                                                               Const<int> GROUP_M) {
    Value pid = program_id(0);
    Value num_pid_m = cdiv(M, BLOCK_M);
    Value num_pid_n = cdiv(N, BLOCK_N);
    Value num_pid_in_group = GROUP_M * num_pid_n;
    Value group_id = pid / num_pid_in_group;
    Value first_pid_m = group_id * GROUP_M;
    Value group_size_m = minimum(num_pid_m - first_pid_m, GROUP_M);
    Value pid_m = first_pid_m + (pid % num_pid_in_group) % group_size_m;
    Value pid_n = (pid % num_pid_in_group) / group_size_m;

    Value offs_am = (pid_m * BLOCK_M + arange(0, BLOCK_M)) % M;
    Value offs_bn = (pid_n * BLOCK_N + arange(0, BLOCK_N)) % N;
    Value offs_k = arange(0, BLOCK_K);
    Value a_ptrs = a + (offs_am[{Slice_, None_}] * stride_am + offs_k[{None_, Slice_}] * stride_ak);
    Value b_ptrs = b + (offs_k[{Slice_, None_}] * stride_bk + offs_bn[{None_, Slice_}] * stride_bn);
    Values loop =
        for_range(0, cdiv(K, BLOCK_K), 1, {zeros({BLOCK_M, BLOCK_N}, float32), a_ptrs, b_ptrs},
                  [&](Value k, Values carried) -> Values {
                    Value a_tile = load(carried[1], offs_k[{None_, Slice_}] < K - k * BLOCK_K, 0.0);
                    Value b_tile = load(carried[2], offs_k[{Slice_, None_}] < K - k * BLOCK_K, 0.0);
                    return {dot(a_tile, b_tile, carried[0]), carried[1] + BLOCK_K * stride_ak,
                            carried[2] + BLOCK_K * stride_bk};
                  });
    Value out = loop[0].to(float16);

    Value offs_cm = pid_m * BLOCK_M + arange(0, BLOCK_M);
    Value offs_cn = pid_n * BLOCK_N + arange(0, BLOCK_N);
    Value c_ptrs =
        c + (stride_cm * offs_cm[{Slice_, None_}] + stride_cn * offs_cn[{None_, Slice_}]);
    Value c_mask = (offs_cm[{Slice_, None_}] < M) & (offs_cn[{None_, Slice_}] < N);
    store(c_ptrs, out, c_mask);
  });
  return kernel;
}

void kiln::kernels::matmul(rt::CUstream stream, rt::CUdeviceptr a, rt::CUdeviceptr b,
                           rt::CUdeviceptr c, int32_t M, int32_t N, int32_t K,
                           const MatmulConfig &cfg) {
  matmulKernel()(
      grid(cdiv(M, cfg.blockM) * cdiv(N, cfg.blockN)).num_warps(cfg.warps).num_stages(cfg.stages),
      stream, a, b, c, M, N, K, K, 1, N, 1, N, 1, cfg.blockM, cfg.blockN, cfg.blockK, cfg.groupM);
}
