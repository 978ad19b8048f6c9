// berth.io/gpu-ids, signed. berth's device plugin hands a pod the GPUs its berth.io/gpu-ids
// names, and anyone who may create pods can write annotations and spec.nodeName themselves:
// without a check, such a pod could name any GPU berth placed another pod on, at any time. So the
// extender signs what it binds (berth.io/gpu-ids-signature: HMAC-SHA256 with a key both hold,
// over the pod's UID, node and GPU ids), and a plugin with the key counts only annotations whose
// signature checks out; others get kubelet's own choice. (kubelet's Allocate does not name its
// pod, so a self-bound pod admitted while a berth pod waits for admission can still be matched
// with that pod's GPUs: docs/kubernetes.md.)
#pragma once

#include <string>

namespace berth {

constexpr const char* kGpuIdsSignatureAnnotation = "berth.io/gpu-ids-signature";
constexpr size_t kMinSigningKeyBytes = 16;

// The key in `path` without the whitespace around it; throws ConfigError naming the file when it
// cannot be read or is shorter than kMinSigningKeyBytes.
std::string ReadSigningKey(const std::string& path);

// Hex HMAC-SHA256 of the pod's UID, node and berth.io/gpu-ids text.
std::string SignGpuIds(const std::string& key, const std::string& uid, const std::string& node,
                       const std::string& gpu_ids);
// Whether `signature` is SignGpuIds of these (compared in constant time).
bool GpuIdsSigned(const std::string& key, const std::string& uid, const std::string& node,
                  const std::string& gpu_ids, const std::string& signature);

}  // namespace berth
