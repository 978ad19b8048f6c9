// The policy file (YAML, ParsePolicyYaml). Seeds: examples/policy.yaml.
#include "config/policy_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::LoadOrRefuse("fuzz.yaml",
                      [&] { berth::ParsePolicyYaml(berth::InputText(data, size), "fuzz.yaml"); });
  return 0;
}
