// The bare name of a device function, as people and `bifocal bench --ablate` call it:
// "void bifocal::cuda::(anonymous namespace)::gemv_kernel<__nv_bfloat16, 4>(bifocal::…)" and its
// mangled form both become "gemv_kernel" — no namespaces, template arguments or parameters.
#pragma once

#include <string>
#include <string_view>

namespace bifocal {

// A mangled name (as cudaFuncGetName gives it) is demangled first; a name that is not mangled is
// read as a demangled signature or a bare name.
std::string kernel_short_name(std::string_view name);

}  // namespace bifocal
