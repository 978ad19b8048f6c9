#include "k8s/gpu_ids_signature.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "config/config_error.h"
#include "config/file_text.h"

namespace berth {

std::string ReadSigningKey(const std::string& path) {
  // Without the spaces and line ends around it, as `kubectl create secret` may leave them.
  std::string key = ReadFileText(path);
  const size_t begin = key.find_first_not_of(" \t\r\n");
  key = begin == std::string::npos ? ""
                                   : key.substr(begin, key.find_last_not_of(" \t\r\n") + 1 - begin);
  if (key.size() < kMinSigningKeyBytes)
    throw ConfigError(path + ": the signing key has " + std::to_string(key.size()) +
                      " bytes; expected at least " + std::to_string(kMinSigningKeyBytes) +
                      " (e.g. from `head -c 32 /dev/urandom | base64`)");
  return key;
}

std::string SignGpuIds(const std::string& key, const std::string& uid, const std::string& node,
                       const std::string& gpu_ids) {
  // Separated by a byte no UID, node name or id list holds, so no two inputs sign alike.
  const std::string message = "berth.io/gpu-ids v1\n" + uid + "\n" + node + "\n" + gpu_ids;
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest, &length);
  static const char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned int i = 0; i < length; ++i) {
    hex += kHex[digest[i] >> 4];
    hex += kHex[digest[i] & 15];
  }
  return hex;
}

bool GpuIdsSigned(const std::string& key, const std::string& uid, const std::string& node,
                  const std::string& gpu_ids, const std::string& signature) {
  const std::string expected = SignGpuIds(key, uid, node, gpu_ids);
  return signature.size() == expected.size() &&
         CRYPTO_memcmp(signature.data(), expected.data(), expected.size()) == 0;
}

}  // namespace berth
