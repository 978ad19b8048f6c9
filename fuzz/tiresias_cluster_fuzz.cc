// The Tiresias cluster shape (CSV, LoadTiresiasCluster). Seeds: data/tiresias's cluster files.
#include "config/tiresias_trace.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::LoadOrRefuse([&] { berth::LoadTiresiasCluster(berth::InputFile(data, size)); });
  return 0;
}
