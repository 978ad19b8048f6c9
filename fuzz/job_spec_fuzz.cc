// A job spec as `POST /v1/jobs` takes it from any user (YAML or JSON, ParseJobSubmission),
// checked against the embedded default cluster (examples/multi-rack.yaml: several models, MIG,
// racks). Seeds: fuzz/seeds/job_spec/ (specs of every field).
#include "config/berth_trace.h"
#include "config/cluster_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const berth::Cluster cluster =
      berth::LoadClusterFile(BERTH_SOURCE_DIR "/examples/multi-rack.yaml");
  static const std::vector<berth::QueueSpec> queues = {{"default", 1, -1, {}},
                                                       {"research", 2, -1, {}}};
  berth::LoadOrRefuse("fuzz.yaml", [&] {
    berth::ParseJobSubmission(berth::InputText(data, size), "fuzz.yaml", cluster, queues,
                              /*strict_booleans=*/true);
  });
  return 0;
}
