// Real-shaped Kubernetes objects for the extender's tests, as the API server and kube-scheduler
// send them (reference-specs 1.1, 1.5).
#pragma once

#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "k8s/extender.h"

namespace berth::k8s_test {

using nlohmann::json;

// A GPU node as GPU feature discovery labels it.
inline json GpuNode(const std::string& name, int gpus,
                    const std::string& product = "NVIDIA-A100-SXM4-80GB",
                    const std::string& rack = "") {
  json labels = {{"kubernetes.io/hostname", name},
                 {"nvidia.com/gpu.product", product},
                 {"nvidia.com/gpu.count", std::to_string(gpus)},
                 {"nvidia.com/gpu.memory", "81920"}};
  if (!rack.empty()) labels["berth.io/rack"] = rack;
  return {{"metadata", {{"name", name}, {"uid", "node-" + name}, {"labels", labels}}},
          {"spec", json::object()},
          {"status",
           {{"allocatable",
             {{"cpu", "128"}, {"memory", "1024Gi"}, {"nvidia.com/gpu", std::to_string(gpus)}}},
            {"conditions", {{{"type", "Ready"}, {"status", "True"}}}}}}};
}

inline json GpuPod(const std::string& name, int gpus,
                   const std::map<std::string, std::string>& annotations = {},
                   const std::string& ns = "ml") {
  json meta = {{"name", name},
               {"namespace", ns},
               {"uid", "uid-" + ns + "-" + name},
               {"creationTimestamp", "2026-12-01T10:00:00Z"}};
  if (!annotations.empty()) meta["annotations"] = annotations;
  json resources = json::object();
  if (gpus > 0) resources["limits"] = {{"nvidia.com/gpu", std::to_string(gpus)}};
  resources["requests"] = {{"cpu", "4"}, {"memory", "16Gi"}};
  return {
      {"metadata", meta},
      {"spec",
       {{"schedulerName", "gpu-scheduler"},
        {"containers", {{{"name", "main"}, {"image", "trainer:1"}, {"resources", resources}}}}}},
      {"status", {{"phase", "Pending"}}}};
}

inline json NodeNamesArgs(const json& pod, const std::vector<std::string>& nodes) {
  return {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}};
}

inline std::string Uid(const json& pod) { return pod["metadata"]["uid"]; }

// Records what the extender asks of the API server, and answers as a healthy one does.
class RecordingActions : public KubeActions {
 public:
  struct Binding {
    std::string ns, name, node;
    std::map<std::string, std::string> annotations;
  };
  std::string Bind(const std::string& ns, const std::string& name, const std::string& node,
                   const std::map<std::string, std::string>& annotations) override {
    std::lock_guard<std::mutex> lock(mu);
    bindings.push_back({ns, name, node, annotations});
    return "";
  }
  std::string DeletePod(const std::string& ns, const std::string& name, double) override {
    std::lock_guard<std::mutex> lock(mu);
    deleted.push_back(ns + "/" + name);
    return "";
  }
  std::mutex mu;
  std::vector<Binding> bindings;
  std::vector<std::string> deleted;
};

// The pod as the API server holds it after `binding`: on its node, with the annotations.
inline json Bound(json pod, const RecordingActions::Binding& binding) {
  pod["spec"]["nodeName"] = binding.node;
  for (const auto& [key, value] : binding.annotations) pod["metadata"]["annotations"][key] = value;
  pod["status"]["phase"] = "Running";
  return pod;
}

}  // namespace berth::k8s_test
