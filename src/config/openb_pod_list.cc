#include "config/openb_pod_list.h"

#include <map>
#include <span>
#include <string_view>
#include <utility>

#include "config/config_error.h"
#include "config/csv_reader.h"
#include "config/limits.h"

namespace berth {
namespace {

constexpr size_t kMostModels = 64;  // models one pod may name in gpu_spec (berth traces' bound)

// The values openb's columns take (empty: not recorded): Koordinator's and Kubernetes' QoS
// classes, and Kubernetes' pod phases.
constexpr std::string_view kQosClasses[] = {"",       "LSE",        "LSR",       "LS",        "BE",
                                            "SYSTEM", "Guaranteed", "Burstable", "BestEffort"};
constexpr std::string_view kPodPhases[] = {"",          "Pending", "Running",
                                           "Succeeded", "Failed",  "Unknown"};

// Throws unless `column` holds one of `values`.
void CheckOneOf(const CsvReader& csv, size_t column, std::span<const std::string_view> values) {
  for (std::string_view v : values)
    if (csv.field(column) == v) return;
  std::string list;
  for (std::string_view v : values)
    if (!v.empty()) list += (list.empty() ? "" : ", ") + std::string(v);
  csv.Fail(column, "one of " + list + " or nothing");
}

}  // namespace

std::vector<TracePod> LoadOpenbPodList(const std::string& path, int* skipped) {
  CsvReader csv(path, {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"});
  const bool timed = csv.header().size() >= 11;
  std::vector<TracePod> pods;
  std::map<std::string, int> lines;  // pod name -> line of its row
  if (skipped) *skipped = 0;
  while (csv.Next()) {
    if (pods.size() >= static_cast<size_t>(limits::Get().jobs))
      throw ConfigError(csv.where() + limits::OverLimit(&limits::Limits::jobs, "pods"));
    try {
      csv.ExpectFields(csv.header().size());
      TracePod pod;
      pod.line = csv.line();
      pod.name = csv.Name(0);
      if (const auto [first, fresh] = lines.emplace(pod.name, csv.line()); !fresh)
        throw ConfigError(csv.where() + "column 'name': pod " + Quoted(pod.name) +
                          " is already listed at line " + std::to_string(first->second) +
                          "; pod names must be unique");
      pod.cpu_milli = csv.Int(1, 0, 1'000'000'000);
      pod.memory_mib = csv.Int(2, 0, 1'000'000'000'000);
      pod.gpus = static_cast<int>(csv.Int(3, 0, 64));
      pod.gpu_milli = static_cast<int>(csv.Int(4, 0, 1000));
      if (pod.gpus == 0 && pod.gpu_milli != 0)
        throw ConfigError(csv.where() + "column 'gpu_milli': a pod with no GPU takes 0, got " +
                          std::to_string(pod.gpu_milli));
      if (pod.gpus > 1 && pod.gpu_milli != 1000)
        throw ConfigError(csv.where() + "column 'gpu_milli': a pod with " +
                          std::to_string(pod.gpus) + " GPUs must take them whole (1000), got " +
                          std::to_string(pod.gpu_milli));
      if (pod.gpus > 0 && pod.gpu_milli == 0)
        throw ConfigError(csv.where() + "column 'gpu_milli': a pod with GPUs needs 1..1000");
      if (timed) {
        std::string_view spec = csv.field(5);
        while (!spec.empty()) {
          const size_t bar = spec.find('|');
          if (bar != 0) pod.models.emplace_back(spec.substr(0, bar));
          if (!pod.models.empty() && bar != 0) csv.CheckName(5, pod.models.back());
          // A cluster has a few models; a long list would only cost every placement its length.
          if (pod.models.size() > kMostModels)
            throw ConfigError(csv.where() + "column 'gpu_spec': more than " +
                              std::to_string(kMostModels) +
                              " GPU models; list the models the pod may use, separated by |");
          if (bar == std::string_view::npos) break;
          spec.remove_prefix(bar + 1);
        }
        pod.qos = csv.Name(6, false);  // replayed as the pod's user
        CheckOneOf(csv, 6, kQosClasses);
        CheckOneOf(csv, 7, kPodPhases);
        // An empty time is unknown (-1); a given one is a time from the trace start.
        const auto time = [&](size_t column) {
          return csv.field(column).empty() ? -1 : csv.Number(column, 0, limits::Seconds());
        };
        pod.submit_time = time(8);
        pod.end_time = time(9);
        pod.start_time = time(10);
        for (const auto& [column, from] : {std::pair{8, pod.submit_time}, {10, pod.start_time}})
          if (pod.end_time >= 0 && from > pod.end_time)
            throw ConfigError(csv.where() + "column 'deletion_time': the pod ends (" +
                              std::string(csv.field(9)) + ") before its " + csv.header()[column] +
                              " (" + std::string(csv.field(column)) +
                              "); times are seconds from the trace start");
        if (pod.start_time >= 0 && pod.submit_time >= 0 && pod.start_time < pod.submit_time)
          throw ConfigError(csv.where() + "column 'scheduled_time': the pod is scheduled (" +
                            std::string(csv.field(10)) + ") before it is created (" +
                            std::string(csv.field(8)) +
                            "); times are seconds from the trace start");
        // Scheduled and deleted at once: a run of no time, which the replay cannot tell from a
        // time left unfilled.
        if (pod.start_time >= 0 && pod.end_time == pod.start_time)
          throw ConfigError(csv.where() +
                            "column 'deletion_time': the pod ends when it is "
                            "scheduled (" +
                            std::string(csv.field(10)) +
                            "), a run of 0 s; leave scheduled_time empty for a pod that never ran");
      }
      pods.push_back(std::move(pod));
    } catch (const ConfigError&) {
      if (!skipped) throw;
      ++*skipped;
    }
  }
  return pods;
}

}  // namespace berth
