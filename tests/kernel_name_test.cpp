// core/kernel_name.h: the bare kernel names `bifocal bench --ablate` matches and lists, from the
// mangled names cudaFuncGetName gives (these two are the compiler's own, for kernels of
// src/backend/cuda/) and from demangled signatures.
#include <gtest/gtest.h>

#include "core/kernel_name.h"

namespace bifocal {
namespace {

TEST(KernelName, MangledNamesLoseNamespacesTemplateArgumentsAndParameters) {
  // void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, 4>(__nv_bfloat16 const*, float const*, float*, int)
  EXPECT_EQ(kernel_short_name("_ZN7bifocal4cuda12_GLOBAL__N_111gemv_kernelI13__nv_bfloat16Li4EEEvPKT_PKfPfi"),
            "gemv_kernel");
  // nvcc names each file's anonymous namespace (_GLOBAL__N__<hash>_…): still "(anonymous namespace)".
  EXPECT_EQ(kernel_short_name("_ZN7bifocal4cuda64_GLOBAL__N__0585eadb_26_attention_decode_window_cu_76ae7d5d_326430"
                              "attention_decode_window_kernelI13__nv_bfloat16S3_Li4EEEvNS0_19DecodeAttentionArgsIT_EENS1_"
                              "12WindowLayoutEPT0_"),
            "attention_decode_window_kernel");
  // bifocal::cuda::advance_decode_step_kernel(int const*, int*, long*)
  EXPECT_EQ(kernel_short_name("_ZN7bifocal4cuda26advance_decode_step_kernelEPKiPiPl"), "advance_decode_step_kernel");
}

TEST(KernelName, DemangledSignatures) {
  EXPECT_EQ(kernel_short_name("void bifocal::cuda::(anonymous namespace)::attention_decode_window_kernel<__nv_bfloat16, "
                              "float, 4>(bifocal::cuda::DecodeAttentionArgs<__nv_bfloat16>, "
                              "bifocal::cuda::(anonymous namespace)::WindowLayout, float*)"),
            "attention_decode_window_kernel");
  // Template arguments that hold scopes and parentheses do not end the name early.
  EXPECT_EQ(kernel_short_name("void ns::mix_kernel<ns::Pair<int, (anonymous namespace)::Tag>, 2>(int)"), "mix_kernel");
  EXPECT_EQ(kernel_short_name("ns::plain_kernel(float*)"), "plain_kernel");
}

TEST(KernelName, BareNamesStayAsTheyAre) {
  EXPECT_EQ(kernel_short_name("rmsnorm_kernel"), "rmsnorm_kernel");
  EXPECT_EQ(kernel_short_name(""), "");
}

}  // namespace
}  // namespace bifocal
