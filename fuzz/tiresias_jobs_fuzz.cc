// The Tiresias job trace (CSV, LoadTiresiasJobs), failing on the first bad row and skipping bad
// rows. Seeds: data/tiresias/60_job.csv.
#include "config/tiresias_trace.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  berth::LoadOrRefuse(path, [&] { berth::LoadTiresiasJobs(path); });
  int skipped = 0;
  berth::LoadOrRefuse(path, [&] { berth::LoadTiresiasJobs(path, &skipped); });
  return 0;
}
