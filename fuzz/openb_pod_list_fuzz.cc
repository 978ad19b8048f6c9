// The openb pod list (CSV, LoadOpenbPodList), both as a run reads it by default (the first bad
// row refuses the file) and with --skip-malformed (bad rows counted). Seeds: the heads of
// data/openb's pod lists.
#include "config/openb_pod_list.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  berth::LoadOrRefuse(path, [&] { berth::LoadOpenbPodList(path); });
  int skipped = 0;
  berth::LoadOrRefuse(path, [&] { berth::LoadOpenbPodList(path, &skipped); });
  return 0;
}
