// A kubeconfig file (LoadKubeConfig), as `berth server --k8s --kubeconfig` and `berth
// device-plugin` read it: contexts, clusters and users, base64 CA data, files it names.
// Seeds: fuzz/seeds/kubeconfig/.
#include "config/kubeconfig.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  berth::LoadOrRefuse(path, [&] { berth::LoadKubeConfig(path); });
  return 0;
}
