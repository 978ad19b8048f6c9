// The Tiresias cluster shape (CSV, LoadTiresiasCluster). Seeds: data/tiresias's cluster files.
#include "config/tiresias_trace.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  berth::LoadOrRefuse(path, [&] { berth::LoadTiresiasCluster(path); });
  return 0;
}
