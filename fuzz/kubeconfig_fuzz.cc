// A kubeconfig file (LoadKubeConfig), as `berth server --k8s --kubeconfig` and `berth
// device-plugin` read it: contexts, clusters and users, base64 CA data, files it names. The
// files it names are not opened (an input may name any device): a path with "missing" in it
// cannot be read, one with "token" holds a token, any other a certificate.
// Seeds: fuzz/seeds/kubeconfig/.
#include "config/kubeconfig.h"
#include "fuzz_input.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = berth::InputFile(data, size);
  const auto read_file = [](const std::string& file) -> std::string {
    if (file.find("missing") != std::string::npos)
      throw berth::ConfigError(file + ": cannot read: No such file or directory");
    if (file.find("token") != std::string::npos) return "abc.def.ghi\n";
    return "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n";
  };
  berth::LoadOrRefuse(path, [&] { berth::LoadKubeConfig(path, read_file); });
  return 0;
}
