// The main of the GPU tests: without a usable CUDA device it runs nothing
// and prints "SKIPPED: N test cases: <reason>" (scripts/test.sh counts them
// as skipped, not passed); with one it runs Catch2 as usual.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cstdio>

#include "worker/model/cuda_backend.h"

int main(int argc, char** argv) {
  Catch::Session session;
  if (int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const absl::Status device = paramd::CudaDeviceStatus();
  if (!device.ok()) {
    const size_t cases = Catch::getAllTestCasesSorted(session.config()).size();
    std::printf("SKIPPED: %zu test cases: %s\n", cases,
                std::string(device.message()).c_str());
    return 0;
  }
  return session.run();
}
