// The one Catch2 main every test binary links: the tests' servers and
// clients use the gRPC poller paramd's programs choose.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "common/base/process_setup.h"

int main(int argc, char** argv) {
  paramd::ChooseGrpcPoller();
  return Catch::Session().run(argc, argv);
}
