// The openb node list (CSV, LoadOpenbNodeList). Seeds: the heads of data/openb's node lists.
#include "config/openb_node_list.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  berth::LoadOrRefuse(path, [&] { berth::LoadOpenbNodeList(path); });
  return 0;
}
