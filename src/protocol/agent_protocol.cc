#include "protocol/agent_protocol.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <optional>
#include <set>
#include <utility>

#include "protocol/base64.h"

namespace berth {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxText = 64 << 10;  // one name, argument or error
constexpr size_t kMaxList = 4096;      // arguments, variables, mounts, GPUs of one assignment

// A measure's bound as an error names it: whole numbers as such, 1e19 (past int64) as "1e+19".
std::string FormatBound(double max) {
  if (max < 1e15) return std::to_string(static_cast<int64_t>(max));
  char text[32];
  std::snprintf(text, sizeof text, "%g", max);
  return text;
}

// Reads one message, naming the field of the first mistake.
class Reader {
 public:
  explicit Reader(const Json& j, std::string path = "") : j_(j), path_(std::move(path)) {
    if (!j_.is_object()) throw ProtocolError(Where() + "expected an object");
  }
  std::string Text(const char* key, size_t most = kMaxText) const {
    const Json* v = Find(key);
    if (v == nullptr) return "";
    if (!v->is_string()) throw ProtocolError(Field(key) + ": expected a string");
    const std::string& s = v->get_ref<const std::string&>();
    if (s.size() > most)
      throw ProtocolError(Field(key) + ": longer than " + std::to_string(most) + " bytes");
    return s;
  }
  // A missing integer is `min`, unless `required`.
  // A measure: a finite number from -1 (unknown) to `max`.
  double Measure(const char* key, double max) const {
    const Json* v = Find(key);
    if (v == nullptr) return -1;
    if (!v->is_number() || !(v->get<double>() >= -1) || !(v->get<double>() <= max))
      throw ProtocolError(Field(key) + ": expected a number from -1 (unknown) to " +
                          FormatBound(max));
    return v->get<double>();
  }
  // A contention grade.
  std::string Grade(const char* key) const {
    const std::string g = Text(key, 10);
    if (g.empty()) return "unknown";
    if (g != "unknown" && g != "low" && g != "medium" && g != "high")
      throw ProtocolError(Field(key) + ": expected unknown, low, medium or high");
    return g;
  }
  int64_t Int(const char* key, int64_t min, int64_t max, bool required = false) const {
    const Json* v = Find(key);
    if (v == nullptr && required) throw ProtocolError(Field(key) + ": missing");
    if (v == nullptr) return min;
    if (!v->is_number_integer() || v->get<int64_t>() < min || v->get<int64_t>() > max)
      throw ProtocolError(Field(key) + ": expected an integer from " + std::to_string(min) +
                          " to " + std::to_string(max));
    return v->get<int64_t>();
  }
  uint64_t Version(const char* key) const {
    const Json* v = Find(key);
    if (v == nullptr) return 0;
    if (!v->is_number_unsigned()) throw ProtocolError(Field(key) + ": expected a version");
    return v->get<uint64_t>();
  }
  bool Bool(const char* key) const {
    const Json* v = Find(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) throw ProtocolError(Field(key) + ": expected true or false");
    return v->get<bool>();
  }
  // Calls each(element, its path) for a list of at most `most`.
  template <typename Each>
  void List(const char* key, size_t most, Each each) const {
    const Json* v = Find(key);
    if (v == nullptr) return;
    if (!v->is_array()) throw ProtocolError(Field(key) + ": expected a list");
    if (v->size() > most)
      throw ProtocolError(Field(key) + ": more than " + std::to_string(most) + " entries");
    for (size_t i = 0; i < v->size(); ++i)
      each((*v)[i], Field(key) + "[" + std::to_string(i) + "]");
  }
  std::vector<std::string> Texts(const char* key, size_t most = kMaxList) const {
    std::vector<std::string> out;
    List(key, most, [&](const Json& e, const std::string& path) {
      if (!e.is_string() || e.get_ref<const std::string&>().size() > kMaxText)
        throw ProtocolError(path + ": expected a string of at most " + std::to_string(kMaxText) +
                            " bytes");
      out.push_back(e.get<std::string>());
    });
    return out;
  }
  std::vector<int> Ints(const char* key) const {
    std::vector<int> out;
    List(key, kMaxRegisteredGpus, [&](const Json& e, const std::string& path) {
      if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > 1 << 20)
        throw ProtocolError(path + ": expected an index");
      out.push_back(e.get<int>());
    });
    return out;
  }
  // Calls each(object, its path) when the key is there.
  template <typename Each>
  void Object(const char* key, Each each) const {
    if (const Json* v = Find(key)) each(*v, Field(key));
  }
  std::string Field(const char* key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  const Json* Find(const char* key) const {
    const auto it = j_.find(key);
    return it == j_.end() || it->is_null() ? nullptr : &*it;
  }
  std::string Where() const { return path_.empty() ? "" : path_ + ": "; }
  const Json& j_;
  std::string path_;
};

}  // namespace

std::string NormalizedTimestamp(const std::string& ts) {
  // YYYY-MM-DDTHH:MM:SS[.fraction]Z
  if (ts.size() < 20 || ts.size() > 30 || ts.back() != 'Z' || ts[10] != 'T') return "";
  std::string fraction = ts.size() > 20 && ts[19] == '.' ? ts.substr(20, ts.size() - 21) : "";
  if (ts.size() > 20 && ts[19] != '.') return "";
  if (fraction.size() > 9 || fraction.find_first_not_of("0123456789") != std::string::npos)
    return "";
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11, 12, 14, 15, 17, 18})
    if (ts[i] < '0' || ts[i] > '9') return "";
  fraction.resize(9, '0');
  return ts.substr(0, 19) + "." + fraction + "Z";
}

Json ToJson(const NodeRegistration& r) {
  Json j = {{"gpuUuids", r.gpu_uuids},
            {"simulated", r.simulated},
            {"agentVersion", r.agent_version},
            {"instance", r.instance},
            {"reportEveryMs", r.report_every_ms},
            {"engine", r.engine}};
  if (!r.migs.empty()) {
    Json& migs = j["migs"] = Json::array();
    for (const RegisteredMig& m : r.migs)
      migs.push_back(
          {{"gpu", m.gpu}, {"profile", m.profile}, {"start", m.start}, {"uuid", m.uuid}});
  }
  const auto node_json = [](const Node& n) {
    Json sockets = Json::array(), switches = Json::array(), gpus = Json::array();
    for (const Socket& s : n.sockets)
      sockets.push_back({{"cpus", s.cpus}, {"memoryMiB", s.memory_mib}});
    for (const PcieSwitch& s : n.switches) switches.push_back({{"socket", s.socket}});
    for (const Gpu& g : n.gpus)
      gpus.push_back({{"model", g.model},
                      {"switch", g.pcie_switch},
                      {"nvlinkDomain", g.nvlink_domain},
                      {"mig", g.mig_enabled},
                      {"migLayout", g.mig_layout}});
    return Json{{"cpuMilli", n.cpu_milli}, {"memoryMiB", n.memory_mib}, {"labels", n.labels},
                {"sockets", sockets},      {"switches", switches},      {"gpus", gpus}};
  };
  if (r.found) j["found"] = node_json(*r.found);
  if (r.declared) j["declared"] = node_json(*r.declared);
  if (!r.models.empty()) {
    Json& models = j["models"] = Json::array();
    for (const GpuModel& m : r.models)
      models.push_back({{"name", m.name}, {"memoryMiB", m.memory_mib}, {"mig", m.mig_capable()}});
  }
  return j;
}

std::string WhyBadNodeLabel(const std::string& key, const std::string& value) {
  const bool good_key = !key.empty() && key.size() <= kMaxLabelLength &&
                        std::all_of(key.begin(), key.end(), [](char c) {
                          return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
                                 c == '.' || c == '_' || c == '/';
                        });
  // The key is not quoted: the message must stay printable (and UTF-8) whatever it holds.
  if (!good_key)
    return "a key of 1 to " + std::to_string(kMaxLabelLength) +
           " letters, digits, '-', '.', '_' or '/' expected, got one of " +
           std::to_string(key.size()) + " bytes";
  if (value.size() > kMaxLabelLength ||
      std::any_of(value.begin(), value.end(), [](char c) { return c < 0x20 || c > 0x7e; }))
    return "expected printable ASCII of at most " + std::to_string(kMaxLabelLength) +
           " characters as the value";
  return "";
}

namespace {

// Printed by berth nodes and in events: no control or non-ASCII bytes to fake lines.
std::string PrintableText(const Reader& r, const char* key, size_t most, const char* as) {
  std::string text = r.Text(key, most);
  if (std::any_of(text.begin(), text.end(), [](char c) { return c < 0x20 || c > 0x7e; }))
    throw ProtocolError(r.Field(key) + ": expected printable ASCII, as " + as);
  return text;
}

// The found or declared node of a registration; every index it holds points inside it.
Node ParseNode(const Json& j, const std::string& path) {
  const Reader r(j, path);
  Node n;
  n.cpu_milli = r.Int("cpuMilli", 0, int64_t{1} << 40);
  n.memory_mib = r.Int("memoryMiB", 0, int64_t{1} << 40);
  r.Object("labels", [&](const Json& labels, const std::string& at) {
    const Reader label(labels, at);  // an object, or it throws
    if (labels.size() > kMaxNodeLabels)
      throw ProtocolError(at + ": more than " + std::to_string(kMaxNodeLabels) + " labels");
    for (const auto& [key, value] : labels.items()) {
      if (const std::string why = WhyBadNodeLabel(key, ""); !why.empty())
        throw ProtocolError(at + ": " + why);
      const std::string text = label.Text(key.c_str(), kMaxLabelLength);
      if (const std::string why = WhyBadNodeLabel(key, text); !why.empty())
        throw ProtocolError(label.Field(key.c_str()) + ": " + why);
      n.labels[key] = text;
    }
  });
  r.List("sockets", kMaxRegisteredSockets, [&](const Json& e, const std::string& at) {
    const Reader s(e, at);
    Socket socket;
    socket.memory_mib = s.Int("memoryMiB", 0, int64_t{1} << 40);
    s.List("cpus", kMaxSocketCpus, [&](const Json& cpu, const std::string& cpu_at) {
      if (!cpu.is_number_integer() || cpu.get<int64_t>() < 0 || cpu.get<int64_t>() >= 1 << 20)
        throw ProtocolError(cpu_at + ": expected a CPU id from 0 to " + std::to_string(1 << 20));
      socket.cpus.push_back(cpu.get<int>());
    });
    n.sockets.push_back(std::move(socket));
  });
  const int64_t sockets = static_cast<int64_t>(n.sockets.size());
  r.List("switches", kMaxRegisteredGpus, [&](const Json& e, const std::string& at) {
    if (sockets == 0) throw ProtocolError(r.Field("switches") + ": switches without sockets");
    const Reader s(e, at);
    n.switches.push_back({static_cast<int>(s.Int("socket", 0, sockets - 1, true))});
  });
  const int64_t switches = static_cast<int64_t>(n.switches.size());
  r.List("gpus", kMaxRegisteredGpus, [&](const Json& e, const std::string& at) {
    const Reader g(e, at);
    if (switches == 0) throw ProtocolError(at + ": a GPU without PCIe switches");
    Gpu gpu;
    gpu.model = PrintableText(g, "model", 128, "nvidia-smi names models");
    gpu.pcie_switch = static_cast<int>(g.Int("switch", 0, switches - 1, true));
    gpu.nvlink_domain = static_cast<int>(g.Int("nvlinkDomain", -1, kMaxRegisteredGpus));
    gpu.mig_enabled = g.Bool("mig");
    gpu.mig_layout = g.Texts("migLayout", kMigComputeSlices);
    for (const std::string& item : gpu.mig_layout)
      if (item.size() > 32) throw ProtocolError(g.Field("migLayout") + ": an entry over 32 bytes");
    n.gpus.push_back(std::move(gpu));
  });
  return n;
}

// A GPU's or MIG instance's UUID goes into CUDA_VISIBLE_DEVICES (comma-separated) and the
// engine's device requests, and is compared between nodes: nothing else may ride along.
void CheckUuid(const std::string& uuid, const std::string& at) {
  // Simulated UUIDs carry the node's name, which a cluster file allows up to 253 characters.
  const bool good = !uuid.empty() && uuid.size() <= 300 &&
                    std::all_of(uuid.begin(), uuid.end(),
                                [](char c) { return c > 0x20 && c < 0x7f && c != ','; });
  if (!good)
    throw ProtocolError(at +
                        ": expected a UUID of 1 to 300 printable ASCII characters, no space "
                        "or comma");
}

// An agent process's name: 1-64 letters, digits, '-' or '_'; "" when not sent.
std::string Instance(const Reader& r) {
  std::string instance = r.Text("instance", 64);
  for (char c : instance)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_')
      throw ProtocolError(r.Field("instance") + ": expected letters, digits, '-' or '_'");
  return instance;
}

}  // namespace

NodeRegistration ParseRegistration(const Json& j) {
  const Reader r(j);
  NodeRegistration out;
  out.gpu_uuids = r.Texts("gpuUuids", kMaxRegisteredGpus);
  for (size_t i = 0; i < out.gpu_uuids.size(); ++i)
    CheckUuid(out.gpu_uuids[i], "gpuUuids[" + std::to_string(i) + "]");
  const int64_t gpus = static_cast<int64_t>(out.gpu_uuids.size());
  r.List("migs", kMaxRegisteredGpus * kMigComputeSlices, [&](const Json& e, const std::string& at) {
    const Reader m(e, at);
    RegisteredMig mig;
    if (gpus == 0) throw ProtocolError(at + ": a MIG instance without GPUs (gpuUuids)");
    mig.gpu = static_cast<int>(m.Int("gpu", 0, gpus - 1, true));
    mig.profile = m.Text("profile", 64);
    mig.start = static_cast<int>(m.Int("start", 0, kMigMemorySlots - 1, true));
    mig.uuid = m.Text("uuid", 300);
    CheckUuid(mig.uuid, m.Field("uuid"));
    out.migs.push_back(std::move(mig));
  });
  out.simulated = r.Bool("simulated");
  out.agent_version = r.Text("agentVersion", 200);
  out.instance = Instance(r);
  out.report_every_ms = r.Int("reportEveryMs", 0, 3600 * 1000);
  out.engine = PrintableText(r, "engine", 200, "the agent's Docker engine's identity");
  r.Object("found",
           [&](const Json& e, const std::string& path) { out.found = ParseNode(e, path); });
  r.Object("declared",
           [&](const Json& e, const std::string& path) { out.declared = ParseNode(e, path); });
  r.List("models", kMaxRegisteredGpus, [&](const Json& e, const std::string& at) {
    const Reader m(e, at);
    GpuModel model;
    model.name = PrintableText(m, "name", 128, "nvidia-smi names models");
    model.memory_mib = m.Int("memoryMiB", 0, int64_t{1} << 30);
    if (m.Bool("mig")) model.mig_profiles = BuiltinMigProfiles(model.name);
    out.models.push_back(std::move(model));
  });
  return out;
}

Json ToJson(const AssignmentSet& s) {
  Json list = Json::array();
  for (const Assignment& a : s.assignments) {
    Json mounts = Json::array();
    for (const Mounted& m : a.mounts)
      mounts.push_back({{"host", m.host}, {"container", m.container}, {"readOnly", m.read_only}});
    list.push_back({{"job", a.job},
                    {"replica", a.replica},
                    {"placement", a.placement},
                    {"name", a.name},
                    {"image", a.image},
                    {"command", a.command},
                    {"env", a.env},
                    {"mounts", mounts},
                    {"shmBytes", a.shm_bytes},
                    {"memoryBytes", a.memory_bytes},
                    {"nanoCpus", a.nano_cpus},
                    {"gpus", a.gpus},
                    {"gpuUuids", a.gpu_uuids},
                    {"migProfile", a.mig_profile},
                    {"migStart", a.mig_start},
                    {"cpusetCpus", a.cpuset_cpus},
                    {"cpusetMems", a.cpuset_mems},
                    {"graceSeconds", a.grace_s},
                    {"logSince", a.log_since},
                    {"ran", a.ran}});
  }
  return {{"version", s.version}, {"assignments", list}, {"prefetch", s.prefetch}};
}

AssignmentSet ParseAssignments(const Json& j) {
  const Reader r(j);
  AssignmentSet out;
  out.version = r.Version("version");
  r.List("assignments", kMaxReportContainers, [&](const Json& e, const std::string& path) {
    const Reader a(e, path);
    Assignment x;
    x.job = a.Int("job", 1, INT64_MAX, true);
    x.replica = static_cast<int>(a.Int("replica", 0, 1 << 20));
    x.placement = a.Text("placement", 64);
    x.name = a.Text("name", 1024);
    x.image = a.Text("image", 1024);
    x.command = a.Texts("command");
    x.env = a.Texts("env");
    a.List("mounts", kMaxList, [&](const Json& m, const std::string& mount_path) {
      const Reader mount(m, mount_path);
      x.mounts.push_back({mount.Text("host"), mount.Text("container"), mount.Bool("readOnly")});
    });
    x.shm_bytes = a.Int("shmBytes", 0, INT64_MAX);
    x.memory_bytes = a.Int("memoryBytes", 0, INT64_MAX);
    x.nano_cpus = a.Int("nanoCpus", 0, INT64_MAX);
    x.gpus = a.Ints("gpus");
    x.gpu_uuids = a.Texts("gpuUuids", kMaxRegisteredGpus);
    x.mig_profile = a.Text("migProfile", 64);
    x.mig_start = static_cast<int>(a.Int("migStart", -1, kMigMemorySlots - 1));
    x.cpuset_cpus = a.Text("cpusetCpus");
    x.cpuset_mems = a.Text("cpusetMems");
    x.grace_s = static_cast<int>(a.Int("graceSeconds", 0, 86400));
    x.log_since = a.Text("logSince", 64);
    x.ran = a.Bool("ran");
    out.assignments.push_back(std::move(x));
  });
  out.prefetch = r.Texts("prefetch", kMaxPrefetchImages);
  return out;
}

Json ToJson(const AgentReport& r) {
  Json containers = Json::array();
  for (const ContainerReport& c : r.containers)
    containers.push_back({{"job", c.job},
                          {"replica", c.replica},
                          {"placement", c.placement},
                          {"state", c.state},
                          {"exitCode", c.exit_code},
                          {"error", c.error},
                          {"containerId", c.container_id},
                          {"phases", c.phases},
                          {"cpuPercent", c.cpu_percent},
                          {"memoryPercent", c.memory_percent},
                          {"ioLatencyMs", c.io_latency_ms},
                          {"cpuGrade", c.cpu_grade},
                          {"memoryGrade", c.memory_grade},
                          {"ioGrade", c.io_grade},
                          {"netRxBytes", c.net_rx_bytes},
                          {"netTxBytes", c.net_tx_bytes},
                          {"cpuThrottledPeriods", c.cpu_throttled_periods},
                          {"cpuThrottledSeconds", c.cpu_throttled_seconds},
                          {"ioReadBytes", c.io_read_bytes},
                          {"ioWriteBytes", c.io_write_bytes},
                          {"memoryBytes", c.memory_bytes},
                          {"memoryLimitBytes", c.memory_limit_bytes},
                          {"cpuPressure", c.cpu_pressure},
                          {"memoryPressure", c.memory_pressure},
                          {"ioPressure", c.io_pressure},
                          {"offGpus", c.off_gpus}});
  Json logs = Json::array();
  for (const LogChunk& l : r.logs) {
    Json spans = Json::array();
    for (const auto& [from, to] : l.stderr_spans) spans.push_back({from, to});
    Json chunk = {{"job", l.job},
                  {"replica", l.replica},
                  {"placement", l.placement},
                  {"until", l.until},
                  {"stderr", std::move(spans)}};
    // JSON holds only UTF-8: other output travels in base64, byte for byte.
    if (IsUtf8(l.text))
      chunk["text"] = l.text;
    else
      chunk["textBase64"] = Base64Encode(l.text);
    if (l.from) chunk["from"] = *l.from;
    logs.push_back(std::move(chunk));
  }
  Json gpus = Json::array();
  for (const GpuReport& g : r.gpus)
    gpus.push_back({{"gpu", g.gpu},
                    {"fbUsedMiB", g.fb_used_mib},
                    {"fbFreeMiB", g.fb_free_mib},
                    {"utilPercent", g.util_percent},
                    {"smActive", g.sm_active},
                    {"xid", g.xid},
                    {"nvlinkTotal", g.nvlink_total},
                    {"pcieTxBytes", g.pcie_tx_bytes},
                    {"pcieRxBytes", g.pcie_rx_bytes}});
  Json out = {{"instance", r.instance},
              {"appliedVersion", r.applied_version},
              {"containers", containers},
              {"logs", logs},
              {"gpus", gpus}};
  if (r.images) {
    Json images = Json::array();
    for (const ReportedImage& image : *r.images) {
      Json layers = Json::array();
      for (const ImageLayer& l : image.layers)
        layers.push_back({{"digest", l.digest}, {"bytes", l.bytes}});
      images.push_back({{"names", image.names}, {"layers", layers}});
    }
    out["images"] = images;
  }
  if (!r.runtime_error.empty()) out["runtimeError"] = r.runtime_error;
  return out;
}

Json ToJson(const ReportReply& r) {
  const auto list = [](const std::vector<LogCursor>& cursors) {
    Json out = Json::array();
    for (const LogCursor& c : cursors)
      out.push_back({{"job", c.job},
                     {"replica", c.replica},
                     {"placement", c.placement},
                     {"cursor", c.cursor}});
    return out;
  };
  return {{"ok", true}, {"logCursors", list(r.log_cursors)}, {"logsFull", list(r.logs_full)}};
}

bool IsUtf8(const std::string& text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) return true;
  try {
    (void)Json(text).dump();  // strict: throws at the first byte that is not UTF-8
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

std::string ValidUtf8(std::string text) {
  if (std::all_of(text.begin(), text.end(), [](char c) { return (c & 0x80) == 0; })) return text;
  return Json::parse(Json(text).dump(-1, ' ', false, Json::error_handler_t::replace))
      .get<std::string>();
}

std::string RuntimeErrorLine(std::string error) {
  for (char& c : error)
    if ((c >= 0 && c < 0x20) || c == 0x7f) c = ' ';
  error = ValidUtf8(std::move(error));
  size_t keep = std::min(error.size(), kMaxRuntimeError);
  while (keep > 0 && keep < error.size() && (error[keep] & 0xC0) == 0x80) --keep;
  error.resize(keep);
  return error;
}

AgentReport ParseReport(const Json& j) {
  const Reader r(j);
  AgentReport out;
  out.instance = Instance(r);
  out.applied_version = r.Version("appliedVersion");
  out.runtime_error = r.Text("runtimeError", kMaxRuntimeError);
  // Shown in tables and events: one line.
  if (std::any_of(out.runtime_error.begin(), out.runtime_error.end(),
                  [](char c) { return (c >= 0 && c < 0x20) || c == 0x7f; }))
    throw ProtocolError(r.Field("runtimeError") +
                        ": expected one line, without control characters");
  r.List("containers", kMaxReportContainers, [&](const Json& e, const std::string& path) {
    const Reader c(e, path);
    ContainerReport x;
    x.job = c.Int("job", 1, INT64_MAX, true);
    x.replica = static_cast<int>(c.Int("replica", 0, 1 << 20));
    x.placement = c.Text("placement", 64);
    x.state = c.Text("state", 20);
    if (x.state != "starting" && x.state != "running" && x.state != "exited" &&
        x.state != "failed" && x.state != "interrupted")
      throw ProtocolError(c.Field("state") +
                          ": expected starting, running, exited, failed or interrupted, got \"" +
                          x.state.substr(0, 20) + "\"");
    x.exit_code = static_cast<int>(c.Int("exitCode", 0, 255));
    x.error = c.Text("error", 4096);
    x.container_id = c.Text("containerId", 128);
    const auto phases = e.find("phases");
    if (phases != e.end() && !phases->is_null()) {
      if (!phases->is_object() || phases->size() > 8)
        throw ProtocolError(c.Field("phases") + ": expected at most 8 named durations");
      for (const auto& [name, seconds] : phases->items()) {
        // A name goes into refusals, `berth inspect` and metric labels: a short word only. Not
        // echoed when refused (it could hold anything).
        if (name.empty() || name.size() > 20 ||
            name.find_first_not_of(
                "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                std::string::npos)
          throw ProtocolError(c.Field("phases") +
                              ": a phase name must be 1-20 letters, digits or '_'");
        if (!seconds.is_number() || seconds.get<double>() < 0 || seconds.get<double>() > 1e9)
          throw ProtocolError(c.Field("phases") + "." + name + ": expected seconds (0 to 1e9)");
        x.phases[name] = seconds.get<double>();
      }
    }
    x.cpu_percent = c.Measure("cpuPercent", kMaxReportPercent);
    x.memory_percent = c.Measure("memoryPercent", kMaxReportPercent);
    x.io_latency_ms = c.Measure("ioLatencyMs", kMaxReportIoLatencyMs);
    x.cpu_grade = c.Grade("cpuGrade");
    x.memory_grade = c.Grade("memoryGrade");
    x.io_grade = c.Grade("ioGrade");
    x.net_rx_bytes = c.Measure("netRxBytes", kMaxReportCounter);
    x.net_tx_bytes = c.Measure("netTxBytes", kMaxReportCounter);
    x.cpu_throttled_periods = c.Measure("cpuThrottledPeriods", kMaxReportCounter);
    x.cpu_throttled_seconds = c.Measure("cpuThrottledSeconds", kMaxReportCounter);
    x.io_read_bytes = c.Measure("ioReadBytes", kMaxReportCounter);
    x.io_write_bytes = c.Measure("ioWriteBytes", kMaxReportCounter);
    x.memory_bytes = c.Measure("memoryBytes", kMaxReportCounter);
    x.memory_limit_bytes = c.Measure("memoryLimitBytes", kMaxReportCounter);
    x.cpu_pressure = c.Measure("cpuPressure", 100);
    x.memory_pressure = c.Measure("memoryPressure", 100);
    x.io_pressure = c.Measure("ioPressure", 100);
    x.off_gpus = c.Text("offGpus", kMaxOffGpusText);
    out.containers.push_back(std::move(x));
  });
  std::set<int> reported_gpus;
  r.List("gpus", kMaxRegisteredGpus, [&](const Json& e, const std::string& path) {
    const Reader g(e, path);
    GpuReport x;
    x.gpu = static_cast<int>(g.Int("gpu", 0, kMaxRegisteredGpus - 1, true));
    // A second entry would be added into the first's counters in /metrics: the first is
    // kept (refusing the report would take the node for silent over its telemetry).
    if (!reported_gpus.insert(x.gpu).second) return;
    x.fb_used_mib = g.Measure("fbUsedMiB", kMaxReportMiB);
    x.fb_free_mib = g.Measure("fbFreeMiB", kMaxReportMiB);
    x.util_percent = g.Measure("utilPercent", 100);
    x.sm_active = g.Measure("smActive", 1);
    x.xid = g.Measure("xid", kMaxReportXid);
    x.nvlink_total = g.Measure("nvlinkTotal", kMaxReportCounter);
    x.pcie_tx_bytes = g.Measure("pcieTxBytes", kMaxReportCounter);
    x.pcie_rx_bytes = g.Measure("pcieRxBytes", kMaxReportCounter);
    out.gpus.push_back(x);
  });
  if (j.contains("images") && !j["images"].is_null()) {
    out.images.emplace();
    r.List("images", kMaxReportImages, [&](const Json& e, const std::string& path) {
      const Reader i(e, path);
      ReportedImage x;
      i.List("names", kMaxImageNames, [&](const Json& name, const std::string& at) {
        if (!name.is_string() || name.get_ref<const std::string&>().size() > 1024)
          throw ProtocolError(at + ": expected an image name of at most 1024 bytes");
        x.names.push_back(name.get<std::string>());
      });
      i.List("layers", kMaxImageLayers, [&](const Json& layer, const std::string& at) {
        const Reader l(layer, at);
        x.layers.push_back({l.Text("digest", 128), l.Int("bytes", 0, kMaxLayerBytes)});
      });
      out.images->push_back(std::move(x));
    });
  }
  size_t log_bytes = 0;
  r.List("logs", kMaxReportContainers, [&](const Json& e, const std::string& path) {
    const Reader l(e, path);
    LogChunk x;
    x.job = l.Int("job", 1, INT64_MAX, true);
    x.replica = static_cast<int>(l.Int("replica", 0, 1 << 20));
    x.placement = l.Text("placement", 64);
    if (e.contains("from")) x.from = l.Text("from", 64);
    x.until = l.Text("until", 64);
    if (e.contains("textBase64")) {
      if (e.contains("text"))
        throw ProtocolError(l.Field("text") + ": give text or textBase64, not both");
      const std::optional<std::string> bytes =
          Base64Decode(l.Text("textBase64", (kMaxReportLogBytes + 2) / 3 * 4));
      if (!bytes) throw ProtocolError(l.Field("textBase64") + ": expected base64 (RFC 4648)");
      x.text = *bytes;
    } else {
      x.text = l.Text("text", kMaxReportLogBytes);
    }
    // Each span [from, to) inside the text, after the one before it.
    size_t end = 0;
    l.List("stderr", x.text.size(), [&](const Json& span, const std::string& at) {
      if (!span.is_array() || span.size() != 2 || !span[0].is_number_unsigned() ||
          !span[1].is_number_unsigned() || span[0].get<uint64_t>() < end ||
          span[1].get<uint64_t>() <= span[0].get<uint64_t>() ||
          span[1].get<uint64_t>() > x.text.size())
        throw ProtocolError(at +
                            ": expected [from, to], byte offsets into the text after the "
                            "span before it, from < to <= " +
                            std::to_string(x.text.size()));
      end = span[1].get<size_t>();
      x.stderr_spans.emplace_back(span[0].get<size_t>(), end);
    });
    log_bytes += x.text.size();
    if (log_bytes > kMaxReportLogBytes)
      throw ProtocolError(path + ".text: the report's logs pass " +
                          std::to_string(kMaxReportLogBytes) + " bytes; send the rest next time");
    out.logs.push_back(std::move(x));
  });
  return out;
}

ReportReply ParseReportReply(const Json& j) {
  const Reader r(j);
  ReportReply out;
  const auto list = [&](const char* key, std::vector<LogCursor>* cursors) {
    r.List(key, kMaxReportContainers, [&](const Json& e, const std::string& path) {
      const Reader c(e, path);
      cursors->push_back({c.Int("job", 1, INT64_MAX, true),
                          static_cast<int>(c.Int("replica", 0, 1 << 20)), c.Text("placement", 64),
                          c.Text("cursor", 64)});
    });
  };
  list("logCursors", &out.log_cursors);
  list("logsFull", &out.logs_full);
  return out;
}

}  // namespace berth
