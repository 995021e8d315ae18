// The fuzz targets (tests/fuzz/) run over their seed corpora as ordinary
// tests, so that they keep building and every seed passes; the fuzzing
// itself is scripts/fuzz.sh (clang's libFuzzer).
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

TEST_CASE("every seed of the corpus passes the fuzz target", "[fuzz]") {
  // FUZZ_CORPUS: the corpus folder, relative to the test's runfiles.
  const std::string dir = FUZZ_CORPUS;
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    std::ifstream in(entry.path(), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    const std::string s = bytes.str();
    INFO(entry.path().string());
    CHECK(LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(s.data()),
                                 s.size()) == 0);
    ++seeds;
  }
  CHECK(seeds >= 3);
}

}  // namespace
