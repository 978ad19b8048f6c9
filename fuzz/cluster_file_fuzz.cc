// The cluster file (YAML, ParseClusterYaml). Seeds: the cluster files of examples/.
#include "config/cluster_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::LoadOrRefuse("fuzz.yaml",
                      [&] { berth::ParseClusterYaml(berth::InputText(data, size), "fuzz.yaml"); });
  return 0;
}
