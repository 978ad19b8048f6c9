#include "config/berth_trace.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "config/config_error.h"
#include "config/file_text.h"
#include "config/limits.h"
#include "config/mount_path.h"
#include "config/vc_fields.h"
#include "config/yaml_reader.h"
#include "core/image_name.h"
#include "core/mig.h"

namespace berth {
namespace {

// Bounds that keep a typo or a hostile file from exhausting memory or time.
using limits::Limits;
constexpr size_t kMaxGroups = 64;
constexpr size_t kMaxListItems = 64;  // GPU models, node selector labels, spread constraints
constexpr size_t kMaxImage = 1024;
constexpr size_t kMaxArguments = 256;  // a command's arguments, a container's variables
constexpr size_t kMaxArgument = 4096;
constexpr size_t kMaxVolumes = 32;
constexpr int64_t kMaxShmMiB = int64_t{1} << 24;  // 16 TiB: where nodes state no memory
constexpr int64_t kMaxReplicas = 65536;
constexpr int64_t kMaxGpusPerReplica = 4096;
constexpr int64_t kMaxPriority = 1000000000;
constexpr double kMaxWeight = 1e6;
constexpr double kMaxGpus = 1e9;
constexpr int kDefaultPriority = 100;  // the built-in policies' "default" class
// The least a container may be given: a CPU quota under 1 ms a 100 ms period is refused by the
// kernel, and Docker refuses a memory limit under 6 MiB.
constexpr int64_t kMinContainerCpuMilli = 10;
constexpr int64_t kMinContainerMemoryMiB = 6;

// The fields of a task group; on a job without `groups` they describe its one group.
const std::vector<std::string> kGroupFields = {
    "replicas",  "gpus",     "gpuMilli",  "migProfile",   "gpuMemoryMiB", "cpuMilli",
    "memoryMiB", "affinity", "gpuModels", "nodeSelector", "image"};

// What a container could use to reach the host: berth never grants it, so a job spec asking for
// it is refused with the reason rather than as an unknown field (docker's, Kubernetes' and
// compose's names, as people copy them from those).
const std::map<std::string, std::string> kNeverGranted = [] {
  const std::string privileged =
      "berth does not run privileged containers; GPUs come from the job's gpus, gpuMilli or "
      "migProfile, devices are not granted";
  const std::string devices =
      "berth grants no devices; GPUs come from the job's gpus, gpuMilli or migProfile";
  const std::string capabilities =
      "berth grants no capabilities beyond the runtime's defaults; drop the field";
  const std::string security =
      "berth keeps the runtime's default seccomp, AppArmor and SELinux confinement; drop the "
      "field";
  const std::string network =
      "each container has a network namespace of its own; berth never grants the host's";
  const std::string pid =
      "each container has a PID namespace of its own; berth never grants the host's";
  const std::string ipc =
      "each container has an IPC namespace of its own; berth never grants the host's (give "
      "shmSize for a larger /dev/shm)";
  const std::string uts =
      "each container has a UTS namespace of its own; berth never grants the host's";
  const std::string userns =
      "berth never runs a container in the host's user namespace; drop the field";
  const std::string sysctls = "berth sets no kernel parameters for a container; drop the field";
  return std::map<std::string, std::string>{{"privileged", privileged},
                                            {"securityContext", privileged},
                                            {"devices", devices},
                                            {"capAdd", capabilities},
                                            {"cap_add", capabilities},
                                            {"capabilities", capabilities},
                                            {"securityOpt", security},
                                            {"security_opt", security},
                                            {"hostNetwork", network},
                                            {"network", network},
                                            {"network_mode", network},
                                            {"hostPID", pid},
                                            {"pid", pid},
                                            {"hostIPC", ipc},
                                            {"ipc", ipc},
                                            {"uts", uts},
                                            {"userns", userns},
                                            {"userns_mode", userns},
                                            {"hostUsers", userns},
                                            {"sysctls", sysctls}};
}();

std::string Format(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%g", v);
  return buffer;
}

// Up to `most` of `names`, then how many more.
std::string Some(const std::vector<std::string>& names, size_t most = 8) {
  std::vector<std::string> shown(names.begin(), names.begin() + std::min(most, names.size()));
  if (names.size() > most) shown.push_back("... (" + std::to_string(names.size()) + " in all)");
  return Join(shown);
}

class TraceParser {
 public:
  TraceParser(const std::string& source, const Cluster& cluster) : r_(source), cluster_(cluster) {
    for (size_t i = 0; i < cluster.nodes.size(); ++i)
      nodes_.emplace(cluster.nodes[i].name, static_cast<int>(i));
  }

  BerthTrace Parse(const std::string& text, const std::vector<QueueSpec>& given) {
    const YAML::Node root = r_.Parse(text);
    r_.CheckFields(root, "", {"queues", "jobs", "events"});
    BerthTrace trace;
    if (const YAML::Node queues = root["queues"]) {
      if (!given.empty())
        r_.Fail(queues, "queues",
                "the trace has its own queues and a VC file gives others; give them in one "
                "place (drop --vcs, or this field)");
      ParseQueues(queues, &trace.queues);
    } else {
      trace.queues = given;
      if (trace.queues.empty()) trace.queues.push_back({"default", 1, -1, {}});
    }
    ParseJobs(r_.Required(root, "", "jobs"), &trace);
    if (const YAML::Node events = root["events"]) ParseEvents(events, &trace);
    return trace;
  }

  // A job spec submitted to the server: one job of the trace format, without the replay's
  // fields, with its containers' command and environment.
  JobSpec ParseSubmission(const std::string& text, const std::vector<QueueSpec>& queues,
                          bool strict_booleans) {
    submission_ = true;
    strict_booleans_ = strict_booleans;
    return ParseJob(r_.Parse(text), "", queues).spec;
  }

 private:
  // Fails unless `node` holds at most `most` items.
  void Bounded(const YAML::Node& node, const std::string& path, size_t most,
               const std::string& what) const {
    if (node.size() > most)
      r_.Fail(node, path,
              std::to_string(node.size()) + " " + what + ", more than the limit of " +
                  std::to_string(most) + "; give at most " + std::to_string(most));
  }
  // Fails unless `node` holds at most `bound` (limits.h) items.
  void Bounded(const YAML::Node& node, const std::string& path, int64_t Limits::*bound,
               const std::string& what) const {
    if (node.size() > static_cast<size_t>(limits::Get().*bound))
      r_.Fail(node, path,
              std::to_string(node.size()) + " " + what + ", " + limits::OverLimit(bound, what));
  }

  // A name (`most` 0: at most name-length characters) or other text of at most `most`.
  std::string Text(const YAML::Node& node, const std::string& path, size_t most = 0,
                   bool may_be_empty = false) const {
    const bool name = most == 0;
    if (name) most = static_cast<size_t>(limits::Get().name_length);
    std::string text = r_.String(node, path);
    if (text.empty() && !may_be_empty) r_.Fail(node, path, "expected a name, got nothing");
    // Names end up in tables, logs and terminals: no control characters there.
    if (name)
      if (const std::string problem = NameProblem(text); !problem.empty())
        r_.Fail(node, path, problem);
    if (text.size() > most)
      r_.Fail(node, path,
              "longer than " + std::to_string(most) + " characters; shorten it" +
                  (name ? limits::RaiseHint(&Limits::name_length) : ""));
    return text;
  }

  // A command's argument or a variable's value: any text a program can be given, which ends
  // at a NUL byte (argv and the environment are C strings), so a NUL is refused.
  std::string Argument(const YAML::Node& node, const std::string& path) const {
    std::string text = Text(node, path, kMaxArgument, true);
    if (text.find('\0') != std::string::npos)
      r_.Fail(node, path,
              "holds a NUL byte, which no program can be given (arguments and variables end at "
              "it); remove it");
    return text;
  }

  double Number(const YAML::Node& node, const std::string& path, double min, double max,
                bool above_min = false) const {
    const double v = r_.Number(node, path);
    if ((above_min ? v > min : v >= min) && v <= max) return v;
    r_.Fail(node, path,
            "expected a number " +
                (above_min ? "> " + Format(min) + " and at most " + Format(max)
                           : "from " + Format(min) + " to " + Format(max)) +
                ", got " + Quoted(node.Scalar()));
  }

  double Seconds(const YAML::Node& node, const std::string& path, bool positive = false) const {
    return Number(node, path, 0, limits::Seconds(), positive);
  }

  Level ParseLevelField(const YAML::Node& node, const std::string& path) const {
    Level level = Level::kGpu;
    if (!ParseLevel(r_.String(node, path), &level))
      r_.Fail(node, path,
              "unknown level " + Quoted(node.Scalar()) +
                  "; known levels: gpu, switch, socket, node, rack, cluster (or any)");
    return level;
  }

  void ParseQueues(const YAML::Node& node, std::vector<QueueSpec>* out) const {
    const std::vector<YamlEntry> entries = r_.Entries(node, "queues");
    if (entries.empty())
      r_.Fail(node, "queues", "expected at least one queue; leave the field out for one queue");
    Bounded(node, "queues", &Limits::queues, "queues");
    for (const YamlEntry& e : entries) {
      const std::string path = FieldPath("queues", e.key);
      Text(e.key_node, path);
      QueueSpec q;
      q.name = e.key;
      if (!e.value.IsNull()) {  // "dev:" alone: weight 1, no cap, no guarantee
        r_.CheckFields(
            e.value, path,
            {"weight", "cap", "modelCaps", "guarantees", "virtualCells", "lendingLimit"});
        if (const YAML::Node w = e.value["weight"])
          q.weight = Number(w, FieldPath(path, "weight"), 0, kMaxWeight, true);
        if (const YAML::Node c = e.value["cap"])
          q.cap_gpus = Number(c, FieldPath(path, "cap"), 0, kMaxGpus);
        if (const YAML::Node caps = e.value["modelCaps"]) {
          const std::string caps_path = FieldPath(path, "modelCaps");
          for (const YamlEntry& m : r_.Entries(caps, caps_path))
            q.model_caps[m.key] = Number(m.value, FieldPath(caps_path, m.key), 0, kMaxGpus);
        }
        VirtualClusterSpec vc;
        vc.name = q.name;
        ParseVcGuarantees(r_, e.value, path, &vc);
        q.guarantees = std::move(vc.guarantees);
      }
      out->push_back(std::move(q));
    }
  }

  void ParseJobs(const YAML::Node& node, BerthTrace* trace) {
    r_.Sequence(node, "jobs");
    if (node.size() == 0)
      r_.Fail(node, "jobs", "expected at least one job; a replay of none says nothing");
    Bounded(node, "jobs", &Limits::jobs, "jobs");
    size_t i = 0;
    for (const YAML::Node& item : node) {
      const std::string path = IndexPath("jobs", i);
      ReplayJob job = ParseJob(item, path, trace->queues);
      const auto [it, added] = job_index_.emplace(job.spec.name, i);
      if (!added)
        r_.Fail(item["name"], FieldPath(path, "name"),
                "job " + Quoted(job.spec.name) + " is also jobs[" + std::to_string(it->second) +
                    "]; give each job its own name");
      trace->jobs.push_back(std::move(job));
      ++i;
    }
  }

  ReplayJob ParseJob(const YAML::Node& j, const std::string& path,
                     const std::vector<QueueSpec>& queues) const {
    std::vector<std::string> fields = {
        "name",        "queue",  "user",         "priority",    "priorityClass",      "qos",
        "minReplicas", "spread", "gangAffinity", "preemptible", "gracePeriodSeconds", "groups"};
    if (!submission_) fields.insert(fields.end(), {"submit", "duration", "workload"});
    CheckJobFields(j, path, GroupFields(fields));
    auto field = [&](const char* key) { return FieldPath(path, key); };
    ReplayJob job;
    if (const YAML::Mark mark = j.Mark(); !mark.is_null()) {
      job.line = mark.line + 1;
      job.column = mark.column + 1;
    }
    JobSpec& s = job.spec;
    // A submission may leave the name to the server.
    if (!submission_ || j["name"]) s.name = Text(r_.Required(j, path, "name"), field("name"));
    if (const YAML::Node q = j["queue"]) {
      s.queue = Text(q, field("queue"));
      std::vector<std::string> names;
      for (const QueueSpec& spec : queues) names.push_back(spec.name);
      if (std::find(names.begin(), names.end(), s.queue) == names.end())
        r_.Fail(q, field("queue"),
                "unknown queue " + Quoted(s.queue) + "; queues: " + Some(names) +
                    " (declare it under queues, or in the VC file)");
    }
    if (const YAML::Node u = j["user"]) s.user = Text(u, field("user"));
    s.priority = kDefaultPriority;
    if (const YAML::Node p = j["priority"]) {
      if (j["priorityClass"])
        r_.Fail(j["priorityClass"], field("priorityClass"),
                "give priority or priorityClass, not both");
      s.priority = static_cast<int>(r_.Int(p, field("priority"), -kMaxPriority, kMaxPriority));
    }
    if (const YAML::Node c = j["priorityClass"]) s.priority_class = Text(c, field("priorityClass"));
    if (const YAML::Node q = j["qos"])
      if (!ParseQos(r_.String(q, field("qos")), &s.qos))
        r_.Fail(q, field("qos"),
                "unknown QoS class " + Quoted(q.Scalar()) +
                    "; known classes: guaranteed, burstable, best-effort");
    if (!submission_) {
      job.submit = Seconds(r_.Required(j, path, "submit"), field("submit"));
      job.duration = Seconds(r_.Required(j, path, "duration"), field("duration"), true);
      if (const YAML::Node w = j["workload"]) job.comm = CommIntensity(Text(w, field("workload")));
    }
    if (const YAML::Node p = j["preemptible"])
      s.preemptible = strict_booleans_ ? r_.StrictBool(p, field("preemptible"))
                                       : r_.Bool(p, field("preemptible"));
    if (const YAML::Node g = j["gracePeriodSeconds"])
      s.grace_period_s = Seconds(g, field("gracePeriodSeconds"));
    if (const YAML::Node a = j["gangAffinity"])
      s.gang_affinity = ParseLevelField(a, field("gangAffinity"));
    if (const YAML::Node spread = j["spread"]) ParseSpread(spread, field("spread"), &s.spread);

    if (const YAML::Node groups = j["groups"]) {
      for (const std::string& key : GroupFields({}))
        if (const YAML::Node misplaced = j[key])
          r_.Fail(misplaced, FieldPath(path, key),
                  "the job has groups: give " + key + " in each group instead");
      const std::string groups_path = field("groups");
      r_.Sequence(groups, groups_path);
      if (groups.size() == 0) r_.Fail(groups, groups_path, "expected at least one group");
      Bounded(groups, groups_path, kMaxGroups, "groups");
      size_t i = 0;
      for (const YAML::Node& g : groups) {
        const std::string group_path = IndexPath(groups_path, i++);
        CheckJobFields(g, group_path, GroupFields({"name"}));
        TaskGroup group;
        if (const YAML::Node n = g["name"]) group.name = Text(n, FieldPath(group_path, "name"));
        ParseGroup(g, group_path, &group);
        s.groups.push_back(std::move(group));
      }
    } else {
      TaskGroup group;
      ParseGroup(j, path, &group);
      s.groups.push_back(std::move(group));
    }
    const int total = TotalReplicas(s);
    if (total > kMaxReplicas)
      r_.Fail(j, path,
              std::to_string(total) + " replicas in all, more than the limit of " +
                  std::to_string(kMaxReplicas));
    if (const YAML::Node m = j["minReplicas"])
      s.min_replicas = static_cast<int>(r_.Int(m, field("minReplicas"), 0, total));
    return job;
  }

  // The fields of one task group, from `g` (a group, or a job without groups).
  void ParseGroup(const YAML::Node& g, const std::string& path, TaskGroup* group) const {
    auto field = [&](const char* key) { return FieldPath(path, key); };
    if (const YAML::Node n = g["replicas"])
      group->replicas = static_cast<int>(r_.Int(n, field("replicas"), 1, kMaxReplicas));
    const YAML::Node gpus = g["gpus"], milli = g["gpuMilli"], mig = g["migProfile"];
    if ((gpus ? 1 : 0) + (milli ? 1 : 0) + (mig ? 1 : 0) > 1)
      r_.Fail(g, path,
              "give one of gpus (whole GPUs), gpuMilli (a share of one GPU) or migProfile (a "
              "MIG instance), not several");
    Demand& d = group->demand;
    if (gpus)
      SetGpuDemand(static_cast<int>(r_.Int(gpus, field("gpus"), 1, kMaxGpusPerReplica)), 1000, &d);
    if (milli)  // 1000 thousandths of one GPU is the whole GPU
      SetGpuDemand(1, static_cast<int>(r_.Int(milli, field("gpuMilli"), 1, 1000)), &d);
    if (const YAML::Node m = g["gpuMemoryMiB"]) {
      if (d.gpu_milli == 0)
        r_.Fail(m, field("gpuMemoryMiB"),
                "goes with a share of a GPU (gpuMilli below 1000); a whole GPU brings all its "
                "memory");
      d.gpu_memory_mib = r_.Int(m, field("gpuMemoryMiB"), 0, 1'000'000'000);
    }
    if (mig) d.mig_profile = MigProfileField(mig, field("migProfile"));
    if (const YAML::Node c = g["cpuMilli"])
      d.cpu_milli = r_.Int(c, field("cpuMilli"), 0, 1'000'000'000);
    if (const YAML::Node m = g["memoryMiB"])
      d.memory_mib = r_.Int(m, field("memoryMiB"), 0, 1'000'000'000'000);
    if (const YAML::Node a = g["affinity"]) d.affinity = ParseLevelField(a, field("affinity"));
    if (const YAML::Node models = g["gpuModels"]) {
      const std::string models_path = field("gpuModels");
      r_.Sequence(models, models_path);
      Bounded(models, models_path, kMaxListItems, "GPU models");
      std::vector<std::string> known;
      for (const GpuModel& m : cluster_.models) known.push_back(m.name);
      size_t i = 0;
      for (const YAML::Node& m : models) {
        const std::string model = Text(m, IndexPath(models_path, i++));
        if (std::find(known.begin(), known.end(), model) == known.end())
          r_.Fail(m, IndexPath(models_path, i - 1),
                  "the cluster has no GPU model " + Quoted(model) + "; its models: " + Some(known));
        d.models.push_back(model);
      }
    }
    if (const YAML::Node selector = g["nodeSelector"]) {
      const std::string selector_path = field("nodeSelector");
      const std::vector<YamlEntry> labels = r_.Entries(selector, selector_path);
      Bounded(selector, selector_path, kMaxListItems, "labels");
      for (const YamlEntry& label : labels) {
        const std::string label_path = FieldPath(selector_path, label.key);
        Text(label.key_node, label_path);
        group->node_selector[label.key] = Text(label.value, label_path, 0, true);
      }
    }
    if (const YAML::Node i = g["image"]) {
      group->image = Text(i, field("image"), kMaxImage);
      if (const std::string problem = NameProblem(group->image); !problem.empty())
        r_.Fail(i, field("image"), problem);
      if (const std::string problem = ImageReferenceProblem(group->image); !problem.empty())
        r_.Fail(i, field("image"),
                "\"" + group->image + "\" is not an image reference: " + problem +
                    "; write it as docker run takes it, e.g. \"pytorch:2.3\" or "
                    "\"registry.example.com/team/trainer:1\"");
      // Refused here rather than by the engine when the job starts, after its wait.
      if (d.cpu_milli > 0 && d.cpu_milli < kMinContainerCpuMilli)
        r_.Fail(g["cpuMilli"], field("cpuMilli"),
                "a container takes at least " + std::to_string(kMinContainerCpuMilli) +
                    " (0.01 CPU); give more, or leave it out for no limit");
      if (d.memory_mib > 0 && d.memory_mib < kMinContainerMemoryMiB)
        r_.Fail(g["memoryMiB"], field("memoryMiB"),
                "a container takes at least " + std::to_string(kMinContainerMemoryMiB) +
                    " MiB; give more, or leave it out for no limit");
    }
    if (const YAML::Node command = g["command"]) {
      const std::string command_path = field("command");
      r_.Sequence(command, command_path);
      Bounded(command, command_path, kMaxArguments, "arguments");
      for (size_t i = 0; i < command.size(); ++i)
        group->command.push_back(Argument(command[i], IndexPath(command_path, i)));
    }
    if (const YAML::Node env = g["env"]) {
      const std::string env_path = field("env");
      Bounded(env, env_path, kMaxArguments, "variables");
      for (const YamlEntry& e : r_.Entries(env, env_path)) {
        const std::string variable = FieldPath(env_path, e.key);
        if (e.key.find('=') != std::string::npos)
          r_.Fail(e.key_node, variable, "a variable name cannot hold '='");
        group->env[e.key] = Argument(e.value, variable);
      }
    }
    if (const YAML::Node volumes = g["volumes"]) ParseVolumes(volumes, field("volumes"), group);
    if (const YAML::Node shm = g["shmSize"])
      group->shm_bytes = ShmBytes(shm, field("shmSize"), *group);
  }

  // `volumes`: "HOST:CONTAINER", "HOST:CONTAINER:ro" or ":rw". Whether the server allows the
  // host path is the server's check (ControlPlane); this one reads and bounds the list.
  void ParseVolumes(const YAML::Node& node, const std::string& path, TaskGroup* group) const {
    r_.Sequence(node, path);
    Bounded(node, path, kMaxVolumes, "volumes");
    std::map<std::string, size_t> targets;  // container path -> the volume mounted there
    for (size_t i = 0; i < node.size(); ++i) {
      const YAML::Node v = node[i];
      const std::string item = IndexPath(path, i);
      const std::string text = Text(v, item, 2 * kMaxMountPath + 3, true);
      if (const std::string problem = NameProblem(text, "the volume"); !problem.empty())
        r_.Fail(v, item, problem);
      std::vector<std::string> parts;
      for (size_t start = 0;;) {
        const size_t colon = text.find(':', start);
        parts.push_back(text.substr(start, colon - start));
        if (colon == std::string::npos) break;
        start = colon + 1;
      }
      if (parts.size() < 2 || parts.size() > 3 ||
          (parts.size() == 3 && parts[2] != "ro" && parts[2] != "rw"))
        r_.Fail(v, item,
                "expected HOST:CONTAINER, HOST:CONTAINER:ro or HOST:CONTAINER:rw (absolute paths, "
                "without ':'), got " +
                    Quoted(text));
      Mount mount;
      std::string problem;
      mount.host = NormalMountPath(parts[0], &problem);
      if (!problem.empty()) r_.Fail(v, item, "the host path " + problem);
      mount.container = NormalMountPath(parts[1], &problem);
      if (!problem.empty()) r_.Fail(v, item, "the container path " + problem);
      if (mount.container == "/")
        r_.Fail(v, item, "the container path is the container's root; mount it in a directory");
      for (const char* runtime : {"/proc", "/sys", "/dev"})
        if (PathUnder(mount.container, runtime))
          r_.Fail(v, item,
                  "the container path " + Quoted(mount.container) + " is under " + runtime +
                      ", which the runtime sets up; mount it elsewhere");
      if (const auto [it, fresh] = targets.emplace(mount.container, i); !fresh)
        r_.Fail(v, item,
                Quoted(mount.container) + " is also where " + IndexPath(path, it->second) +
                    " is mounted; give each volume its own container path");
      mount.read_only = parts.size() == 3 && parts[2] == "ro";
      group->mounts.push_back(std::move(mount));
    }
  }

  // `shmSize`: bytes, or a number with a binary unit as docker's --shm-size takes it ("64m",
  // "1g"; "1G", "1gb" and "1Gi" too). /dev/shm is memory: it may not exceed the largest node's,
  // nor the group's memoryMiB, which it counts against.
  int64_t ShmBytes(const YAML::Node& node, const std::string& path, const TaskGroup& group) const {
    const std::string text = r_.String(node, path);
    size_t digits = 0;
    while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits]))) ++digits;
    std::string unit = text.substr(digits);
    for (char& c : unit) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    static const std::map<char, int> kShifts = {{'k', 10}, {'m', 20}, {'g', 30}, {'t', 40}};
    int shift = 0;
    if (!unit.empty() && kShifts.count(unit[0])) {
      shift = kShifts.at(unit[0]);
      unit.erase(0, 1);
      if (unit == "i" || unit == "ib") unit.clear();
    }
    if (unit == "b") unit.clear();
    // 15 digits fit an int64_t; the shift is checked against the limit before it is made.
    if (digits == 0 || digits > 15 || !unit.empty())
      r_.Fail(node, path,
              "expected a size such as 64m or 1g (units k, m, g, t, binary; none: bytes), got " +
                  Quoted(text));
    const int64_t count = std::stoll(text.substr(0, digits));
    if (count == 0)
      r_.Fail(node, path, "expected a size above 0; leave the field out for the runtime's default");
    int64_t node_mib = 0;
    for (const Node& n : cluster_.nodes) node_mib = std::max(node_mib, n.memory_mib);
    const int64_t most_mib = node_mib > 0 ? std::min(node_mib, kMaxShmMiB) : kMaxShmMiB;
    const int64_t bytes = count > ((most_mib << 20) >> shift) ? INT64_MAX : count << shift;
    if (bytes > most_mib << 20)
      r_.Fail(
          node, path,
          Quoted(text) + " is more than the " + std::to_string(most_mib) + " MiB " +
              (most_mib == node_mib ? "of memory of this cluster's largest node" : "berth allows") +
              "; give a smaller size");
    const int64_t memory_mib = group.demand.memory_mib;
    if (memory_mib > 0 && bytes > memory_mib << 20)
      r_.Fail(node, path,
              Quoted(text) + " is more than the group's memoryMiB (" + std::to_string(memory_mib) +
                  "), which /dev/shm counts against; raise memoryMiB or give a smaller size");
    return bytes;
  }

  std::string MigProfileField(const YAML::Node& node, const std::string& path) const {
    const std::string name = Text(node, path);
    std::vector<std::string> known;
    for (const GpuModel& m : cluster_.models) {
      if (FindMigProfile(m.mig_profiles, name) >= 0) return name;
      for (const MigProfile& p : m.mig_profiles)
        if (std::find(known.begin(), known.end(), p.name) == known.end()) known.push_back(p.name);
    }
    r_.Fail(node, path,
            "no GPU model of the cluster has the MIG profile " + Quoted(name) +
                (known.empty() ? "; the cluster has no MIG-capable GPUs"
                               : "; its profiles: " + Some(known, 16)));
  }

  void ParseSpread(const YAML::Node& node, const std::string& path,
                   std::vector<SpreadConstraint>* out) const {
    r_.Sequence(node, path);
    Bounded(node, path, kMaxListItems, "spread constraints");
    size_t i = 0;
    for (const YAML::Node& c : node) {
      const std::string item = IndexPath(path, i++);
      r_.CheckFields(c, item, {"topologyKey", "maxSkew", "whenUnsatisfiable"});
      SpreadConstraint s;
      s.topology_key = Text(r_.Required(c, item, "topologyKey"), FieldPath(item, "topologyKey"));
      if (const YAML::Node m = c["maxSkew"])
        s.max_skew = static_cast<int>(r_.Int(m, FieldPath(item, "maxSkew"), 1, kMaxReplicas));
      if (const YAML::Node w = c["whenUnsatisfiable"]) {
        const std::string when = r_.String(w, FieldPath(item, "whenUnsatisfiable"));
        if (when != "DoNotSchedule" && when != "ScheduleAnyway")
          r_.Fail(w, FieldPath(item, "whenUnsatisfiable"),
                  "unknown value " + Quoted(when) +
                      "; known values: DoNotSchedule (a filter), ScheduleAnyway (a score)");
        s.hard = when == "DoNotSchedule";
      }
      out->push_back(std::move(s));
    }
  }

  int NodeField(const YAML::Node& node, const std::string& path) const {
    const std::string name = Text(node, path);
    const auto it = nodes_.find(name);
    if (it != nodes_.end()) return it->second;
    std::vector<std::string> names;
    for (const Node& n : cluster_.nodes) names.push_back(n.name);
    r_.Fail(node, path, "the cluster has no node " + Quoted(name) + "; its nodes: " + Some(names));
  }

  // A GPU, `{node: NAME, gpu: INDEX}`.
  void GpuField(const YAML::Node& node, const std::string& path, ReplayEvent* e) const {
    r_.CheckFields(node, path, {"node", "gpu"});
    e->node = NodeField(r_.Required(node, path, "node"), FieldPath(path, "node"));
    const int gpus = static_cast<int>(cluster_.nodes[e->node].gpus.size());
    const YAML::Node gpu = r_.Required(node, path, "gpu");
    if (gpus == 0)
      r_.Fail(gpu, FieldPath(path, "gpu"),
              "node " + Quoted(cluster_.nodes[e->node].name) + " has no GPUs");
    e->gpu = static_cast<int>(r_.Int(gpu, FieldPath(path, "gpu"), 0, gpus - 1));
  }

  void ParseEvents(const YAML::Node& node, BerthTrace* trace) const {
    static const std::vector<std::string> kActions = {"cordon",   "uncordon", "drain", "failGpu",
                                                      "failNode", "recover",  "cancel"};
    r_.Sequence(node, "events");
    Bounded(node, "events", &Limits::events, "events");
    std::map<int, std::string> cancelled;  // job -> where it is cancelled
    size_t i = 0;
    for (const YAML::Node& e : node) {
      const std::string path = IndexPath("events", i++);
      std::vector<std::string> fields = kActions;
      fields.push_back("at");
      r_.CheckFields(e, path, fields);
      ReplayEvent event;
      event.time = Seconds(r_.Required(e, path, "at"), FieldPath(path, "at"));
      std::vector<std::string> given;
      for (const std::string& a : kActions)
        if (e[a]) given.push_back(a);
      if (given.size() != 1)
        r_.Fail(e, path,
                (given.empty() ? std::string("no action") : "actions " + Join(given, " and ")) +
                    "; give exactly one of " + Join(kActions));
      const std::string& action = given[0];
      const std::string action_path = FieldPath(path, action);
      const YAML::Node value = e[action];
      using Kind = ReplayEvent::Kind;
      if (action == "cancel") {
        event.kind = Kind::kCancel;
        const std::string name = Text(value, action_path);
        const auto it = job_index_.find(name);
        if (it == job_index_.end())
          r_.Fail(value, action_path, "no job is named " + Quoted(name) + " under jobs");
        event.job = static_cast<int>(it->second);
        if (const auto [first, fresh] = cancelled.emplace(event.job, r_.Where(e) + ": " + path);
            !fresh)
          r_.Fail(value, action_path,
                  "job " + Quoted(name) + " is already cancelled at " + first->second +
                      "; cancel it once");
        const double submit = trace->jobs[it->second].submit;
        if (event.time < submit)
          r_.Fail(e, path,
                  "cancels job " + Quoted(name) + " at " + Format(event.time) +
                      ", before it is submitted at " + Format(submit) +
                      "; cancel it at or after its submit time");
      } else if (action == "failGpu" || (action == "recover" && value.IsMap())) {
        event.kind = action == "failGpu" ? Kind::kFailGpu : Kind::kRecoverGpu;
        GpuField(value, action_path, &event);
      } else {
        event.kind = action == "cordon"     ? Kind::kCordon
                     : action == "uncordon" ? Kind::kUncordon
                     : action == "drain"    ? Kind::kDrain
                     : action == "failNode" ? Kind::kFailNode
                                            : Kind::kRecoverNode;
        event.node = NodeField(value, action_path);
      }
      trace->events.push_back(event);
    }
  }

  // `fields` and then the fields of a task group (with the containers' for a submission).
  std::vector<std::string> GroupFields(std::vector<std::string> fields) const {
    fields.insert(fields.end(), kGroupFields.begin(), kGroupFields.end());
    if (submission_) fields.insert(fields.end(), {"command", "env", "volumes", "shmSize"});
    return fields;
  }

  // CheckFields for a job or a group, after refusing in a submission what berth never grants.
  void CheckJobFields(const YAML::Node& node, const std::string& path,
                      std::vector<std::string> known) const {
    if (submission_ && node.IsMap())
      for (const auto& kv : node)
        if (kv.first.IsScalar())
          if (const auto it = kNeverGranted.find(kv.first.Scalar()); it != kNeverGranted.end())
            r_.Fail(kv.first, FieldPath(path, it->first), it->second);
    r_.CheckFields(node, path, std::move(known));
  }

  YamlReader r_;
  const Cluster& cluster_;
  std::map<std::string, int> nodes_;
  std::map<std::string, size_t> job_index_;
  bool submission_ = false;  // ParseSubmission: a job spec, not a trace
  bool strict_booleans_ = false;
};

}  // namespace

BerthTrace LoadBerthTrace(const std::string& path, const Cluster& cluster,
                          const std::vector<QueueSpec>& given) {
  return ParseBerthTraceYaml(ReadFileText(path), path, cluster, given);
}

BerthTrace ParseBerthTraceYaml(const std::string& text, const std::string& source_name,
                               const Cluster& cluster, const std::vector<QueueSpec>& given) {
  return TraceParser(source_name, cluster).Parse(text, given);
}

JobSpec ParseJobSubmission(const std::string& text, const std::string& source_name,
                           const Cluster& cluster, const std::vector<QueueSpec>& queues,
                           bool strict_booleans) {
  return TraceParser(source_name, cluster).ParseSubmission(text, queues, strict_booleans);
}

}  // namespace berth
