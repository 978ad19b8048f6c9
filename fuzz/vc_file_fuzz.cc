// The virtual-cluster file (YAML, ParseVcYaml). Seeds: examples/vcs.yaml.
#include "config/vc_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::LoadOrRefuse("fuzz.yaml",
                      [&] { berth::ParseVcYaml(berth::InputText(data, size), "fuzz.yaml"); });
  return 0;
}
