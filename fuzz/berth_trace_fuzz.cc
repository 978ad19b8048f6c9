// The berth trace (YAML, ParseBerthTraceYaml), checked against the four-DGX cluster most of
// examples/scenarios/ replay on, so that their node names and GPU models resolve. Seeds:
// examples/scenarios/.
#include "config/berth_trace.h"
#include "config/cluster_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const berth::Cluster cluster =
      berth::LoadClusterFile(BERTH_SOURCE_DIR "/examples/scenarios/clusters/dgx-4.yaml");
  berth::LoadOrRefuse("fuzz.yaml", [&] {
    berth::ParseBerthTraceYaml(berth::InputText(data, size), "fuzz.yaml", cluster, {});
  });
  return 0;
}
