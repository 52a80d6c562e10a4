// CPU-only builds (the default, and CI): asking for the CUDA backend is a clear error.
#include "bifocal/error.h"
#include "model/device_model.h"

namespace bifocal {

std::unique_ptr<DeviceModel> make_cuda_model(const DeviceModelSource&) {
  fail("--backend cuda", "this build of bifocal has no CUDA backend: configure with -DBIFOCAL_CUDA=ON (needs CUDA 13)");
}

void reset_cuda_context() {}

}  // namespace bifocal
