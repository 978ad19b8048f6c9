// The server's tokens file (YAML, ParseTokensYaml). Seeds: fuzz/seeds/tokens_file/.
#include "config/tokens_file.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  berth::LoadOrRefuse("fuzz.yaml",
                      [&] { berth::ParseTokensYaml(berth::InputText(data, size), "fuzz.yaml"); });
  return 0;
}
