// A CUPTI injection library: every kernel's start and end on the GPU, as the program runs them —
// not serialised, as Nsight Compute's kernel times are (kernel_times.sh), and with the overlap
// that programmatic dependent launch gives inside the decode graph. Nsight Systems would show the
// same, but the GPU machine has no nsys; it has the driver's injection hook and CUPTI.
//
//   CUDA_INJECTION64_PATH=$BUILD/libbifocal_timeline.so BIFOCAL_TIMELINE_OUT=timeline.csv
//     $BUILD/bifocal bench --shape qwen3-4b --mixer swa:window=576,sink=learned --context 1k --max-prefill 0 …
// (one command line; tools/cuda/kernel_timeline.sh runs it and the summary).
//
// The driver loads the library at cuInit and calls InitializeInjection(); the library asks CUPTI
// for concurrent-kernel activity records and, at exit, writes one CSV row a kernel:
//   start_ns,end_ns,stream,graph_node,grid_blocks,block_threads,name
// (GPU timestamps; the name demangled). kernel_timeline.py turns it into the decode step's
// kernel-by-kernel time. Records are collected in CUPTI's buffers, so the program's own timing
// (bench's CUDA events) sees only CUPTI's small per-launch overhead; compare its decode tok/s with
// an untraced run before reading the timeline.
#include <cupti.h>
#include <cxxabi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

struct KernelRecord {
  std::uint64_t start, end;
  std::uint32_t stream;
  std::uint64_t graph_node;
  std::uint64_t grid_blocks;
  std::uint32_t block_threads;
  std::string name;
};

std::mutex records_mutex;
std::vector<KernelRecord>* records = nullptr;  // leaked on purpose: written at exit, after statics may be gone
constexpr std::size_t kBufferBytes = 8 << 20;

void report_cupti_error(CUptiResult result, const char* call) {
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "kernel_timeline: %s failed: %s\n", call, text != nullptr ? text : "unknown CUPTI error");
}

std::string demangled(const char* name) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> plain(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
  return status == 0 && plain ? std::string(plain.get()) : std::string(name);
}

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  // CUPTI wants 8-byte alignment; aligned_alloc gives more.
  *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid_bytes) {
  CUpti_Activity* record = nullptr;
  std::lock_guard lock(records_mutex);
  while (cuptiActivityGetNextRecord(buffer, valid_bytes, &record) == CUPTI_SUCCESS) {
    if (record->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL && record->kind != CUPTI_ACTIVITY_KIND_KERNEL) continue;
    const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
    records->push_back({kernel->start, kernel->end, kernel->streamId, kernel->graphNodeId,
                        std::uint64_t(kernel->gridX) * kernel->gridY * kernel->gridZ,
                        std::uint32_t(kernel->blockX * kernel->blockY * kernel->blockZ), demangled(kernel->name)});
  }
  std::free(buffer);
}

// CSV quoting: the demangled names hold commas (template arguments).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

void write_records() {
  if (const CUptiResult result = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED); result != CUPTI_SUCCESS)
    report_cupti_error(result, "cuptiActivityFlushAll");
  const char* path = std::getenv("BIFOCAL_TIMELINE_OUT");
  if (path == nullptr) path = "kernel_timeline.csv";
  std::FILE* out = std::fopen(path, "w");
  if (out == nullptr) {
    std::fprintf(stderr, "kernel_timeline: cannot write %s\n", path);
    return;
  }
  std::lock_guard lock(records_mutex);
  std::fprintf(out, "start_ns,end_ns,stream,graph_node,grid_blocks,block_threads,name\n");
  for (const KernelRecord& r : *records)
    std::fprintf(out, "%llu,%llu,%u,%llu,%llu,%u,%s\n", static_cast<unsigned long long>(r.start),
                 static_cast<unsigned long long>(r.end), r.stream, static_cast<unsigned long long>(r.graph_node),
                 static_cast<unsigned long long>(r.grid_blocks), r.block_threads, quoted(r.name).c_str());
  std::fclose(out);
  std::fprintf(stderr, "kernel_timeline: %zu kernels written to %s\n", records->size(), path);
}

}  // namespace

// The driver's injection entry point (CUDA_INJECTION64_PATH); returns nonzero on success.
extern "C" int InitializeInjection() {
  records = new std::vector<KernelRecord>();
  records->reserve(1 << 20);
  if (const CUptiResult result = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed);
      result != CUPTI_SUCCESS) {
    report_cupti_error(result, "cuptiActivityRegisterCallbacks");
    return 0;
  }
  // Concurrent-kernel records: kernels that overlap keep their own start and end (the plain
  // kernel kind would serialise them).
  if (const CUptiResult result = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL); result != CUPTI_SUCCESS) {
    report_cupti_error(result, "cuptiActivityEnable(CONCURRENT_KERNEL)");
    return 0;
  }
  std::atexit(write_records);
  return 1;
}
