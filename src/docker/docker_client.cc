#include "docker/docker_client.h"

#include <curl/curl.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <memory>
#include <nlohmann/json.hpp>
#include <utility>

#include "protocol/log_frames.h"

namespace berth {
namespace {

using nlohmann::json;

constexpr long kCallTimeoutS = 30;
// A read after a cursor first asks for the log's last this many messages (DockerClient::Logs).
constexpr size_t kTailMessages = 4096;
// A line of one stream reaches the log at most this long after lines of the other stamped
// later (tens of milliseconds seen on a loaded machine): DockerClient::Logs.
constexpr int64_t kStreamSkewNs = 100'000'000;
constexpr long kPullTimeoutS = 3600;
constexpr long kPullStallS = 300;  // a registry that sends nothing for this long has stalled

// Percent-encodes everything but RFC 3986's unreserved characters. The engine decodes paths
// before routing, so this serves path segments (image "ns/name:tag") and query values alike.
std::string Escape(const std::string& s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : s) {
    if (isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

// "1.41" as (1, 41), so that 1.9 < 1.41.
std::pair<int, int> ParseVersion(const std::string& v) {
  int major = 0, minor = 0;
  sscanf(v.c_str(), "%d.%d", &major, &minor);
  return {major, minor};
}

std::string String(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// Null, absent or not an object: no labels.
std::map<std::string, std::string> Labels(const json& j) {
  std::map<std::string, std::string> labels;
  if (!j.is_object()) return labels;
  for (auto& [k, v] : j.items())
    if (v.is_string()) labels[k] = v.get<std::string>();
  return labels;
}

// The engine reports unset times as Go's zero time.
std::string Time(const json& j, const char* key) {
  std::string t = String(j, key);
  return t.rfind("0001-01-01", 0) == 0 ? "" : t;
}

// Seconds since the epoch and nanoseconds of an RFC 3339 timestamp with any number of
// fraction digits ("2024-05-01T10:00:01.12Z", "...01+02:00"); false when it is not one.
// Parsed, not compared as text: "01.5Z" > "01.25Z" as text is right only by luck.
bool ParseTime(const std::string& s, int64_t* seconds, int64_t* nanos) {
  tm t = {};
  int consumed = 0;
  if (sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &t.tm_year, &t.tm_mon, &t.tm_mday, &t.tm_hour,
             &t.tm_min, &t.tm_sec, &consumed) != 6 ||
      consumed != 19)
    return false;
  t.tm_year -= 1900;
  t.tm_mon -= 1;
  size_t i = consumed;
  *nanos = 0;
  if (i < s.size() && s[i] == '.') {
    int digits = 0;
    for (++i; i < s.size() && isdigit(static_cast<unsigned char>(s[i])); ++i, ++digits)
      if (digits < 9) *nanos = *nanos * 10 + (s[i] - '0');
    if (digits == 0) return false;
    for (; digits < 9; ++digits) *nanos *= 10;
  }
  int64_t offset = 0;
  if (i < s.size() && s[i] == 'Z') {
    ++i;
  } else {
    int hours, minutes;
    if (i >= s.size() || (s[i] != '+' && s[i] != '-') ||
        sscanf(s.c_str() + i + 1, "%2d:%2d", &hours, &minutes) != 2)
      return false;
    offset = (s[i] == '+' ? 1 : -1) * (hours * 3600 + minutes * 60);
    i += 6;
  }
  if (i != s.size()) return false;
  *seconds = static_cast<int64_t>(timegm(&t)) - offset;
  return true;
}

// The engine answers JSON; anything else is not an engine speaking.
json Parse(const std::string& answer) {
  json j = json::parse(answer, nullptr, false);
  if (j.is_discarded())
    throw DockerError(0, "docker: the engine's answer is not JSON: " + answer.substr(0, 100));
  return j;
}

ContainerInfo ToContainerInfo(const json& j) {
  ContainerInfo c;
  c.id = String(j, "Id");
  c.name = String(j, "Name");
  if (!c.name.empty() && c.name[0] == '/') c.name.erase(0, 1);
  const json& config = j.contains("Config") ? j["Config"] : json::object();
  c.image = String(config, "Image");
  c.labels = Labels(config.value("Labels", json()));
  c.tty = config.value("Tty", false);
  const json& state = j.contains("State") ? j["State"] : json::object();
  c.status = String(state, "Status");
  c.running = state.value("Running", false);
  c.exit_code = state.value("ExitCode", 0);
  c.oom_killed = state.value("OOMKilled", false);
  c.started_at = Time(state, "StartedAt");
  c.finished_at = Time(state, "FinishedAt");
  c.error = String(state, "Error");
  const json& host = j.contains("HostConfig") ? j["HostConfig"] : json::object();
  c.cpuset_cpus = String(host, "CpusetCpus");
  c.cpuset_mems = String(host, "CpusetMems");
  return c;
}

// Where libcurl's write callback puts an answer: into `body`, or through `sink` when the
// request succeeded and the caller streams it.
struct Transfer {
  CURL* curl;
  const std::function<bool(const char*, size_t)>* sink;
  std::string body;
  bool sink_stopped = false;
  bool too_big = false;
};

size_t OnData(char* data, size_t size, size_t count, void* arg) {
  Transfer& t = *static_cast<Transfer*>(arg);
  size_t n = size * count;
  long status = 0;
  curl_easy_getinfo(t.curl, CURLINFO_RESPONSE_CODE, &status);
  if (*t.sink && status < 300) {
    if ((*t.sink)(data, n)) return n;
    t.sink_stopped = true;
    return 0;  // ends the transfer
  }
  if (t.body.size() + n > DockerClient::kMaxAnswerBytes) {
    t.too_big = true;
    return 0;
  }
  t.body.append(data, n);
  return n;
}

// Splits the engine's log stream into LogLines. Multiplexed (no TTY): frames
// (protocol/log_frames.h); the engine writes one log message per frame, so a frame's end also
// ends a line (a message the log driver split, a line over 16 KiB, comes back in pieces, each
// with its timestamp). Raw (TTY): all stdout, lines end at newlines only. Every line begins "<RFC
// 3339 timestamp> ".
class LogReader {
 public:
  LogReader(bool raw, const std::string& since, size_t max_bytes)
      : raw_(raw), max_bytes_(max_bytes), read_bytes_(max_bytes + kLookaheadBytes) {
    if (!since.empty() && !ParseTime(since, &since_s_, &since_ns_))
      throw std::invalid_argument("docker logs: since is not an RFC 3339 timestamp: " + since);
    has_since_ = !since.empty();
  }

  // False once max_bytes and the lookahead are collected: the rest need not be read.
  bool Add(const char* data, size_t size) {
    if (raw_) return AddPayload(false, data, size);
    not_frames_ = not_frames_ || !frames_.Add(data, size);
    return !full_ && !not_frames_;
  }
  // A header that is not one: the rest of the stream cannot be read.
  bool not_frames() const { return not_frames_; }
  size_t messages() const { return messages_; }  // the engine's log messages (frames) read
  bool full() const { return full_; }

  // The end of the stream ends a last line without a newline. A read past max_bytes gives
  // back the lines of its last timestamp, and those stamped after a line it leaves (see
  // DockerClient::Logs).
  std::vector<LogLine> Finish(bool cut, bool* more) {
    EndLine(false) && EndLine(true);
    size_t within = 0;
    for (size_t bytes = 0; within < lines_.size(); ++within)
      if ((bytes += lines_[within].text.size()) > max_bytes_) break;
    if (more != nullptr) *more = full_ || within < lines_.size();
    if (!full_ && within == lines_.size()) return std::move(lines_);
    // The lines read past max_bytes (the lookahead) show where the read may stop: a line of
    // one stream may reach the log after later-stamped lines of the other.
    const size_t keep = SafeStop(lines_, full_ ? std::min(within, lines_.size() - 1) : within);
    if (keep > 0 || !cut || lines_.empty()) {
      lines_.resize(keep);
      return std::move(lines_);
    }
    // No stop is safe: the lines within max_bytes, or the first one cut to it.
    lines_.resize(std::max<size_t>(within, 1));
    if (lines_[0].text.size() > max_bytes_) lines_[0].text.resize(max_bytes_);
    return std::move(lines_);
  }

 private:
  bool AddPayload(bool err, const char* data, size_t size) {
    std::string& pending = pending_[err];
    for (size_t i = 0; i < size && !full_; ++i) {
      pending += data[i];
      // A line longer than max_bytes (plus room for its timestamp) is cut there.
      bool too_long = pending.size() > max_bytes_ && pending.size() - max_bytes_ >= 64;
      if (data[i] == '\n' || too_long) EndLine(err);
    }
    return !full_;
  }

  bool EndLine(bool err) {
    std::string& pending = pending_[err];
    if (full_ || pending.empty()) return !full_;
    LogLine line;
    line.stderr_stream = err;
    size_t space = pending.find(' ');
    int64_t s, ns;
    if (space != std::string::npos && ParseTime(pending.substr(0, space), &s, &ns)) {
      line.timestamp = pending.substr(0, space);
      line.text = pending.substr(space + 1);
      if (has_since_ && std::make_pair(s, ns) <= std::make_pair(since_s_, since_ns_)) {
        pending.clear();
        return true;
      }
    } else {
      line.text = pending;  // not stamped (should not happen): kept, never filtered
    }
    pending.clear();
    if (bytes_ + line.text.size() > read_bytes_) {
      full_ = true;
      if (!lines_.empty()) return false;
      line.text.resize(max_bytes_);
    }
    bytes_ += line.text.size();
    lines_.push_back(std::move(line));
    return !full_;
  }

  // Read past max_bytes, to see whether a line beyond it is stamped before those within.
  static constexpr size_t kLookaheadBytes = 1 << 20;
  bool raw_;
  size_t max_bytes_, read_bytes_;
  bool has_since_ = false;
  int64_t since_s_ = 0, since_ns_ = 0;
  // The engine writes one log message per frame: a frame's end also ends a line.
  FrameReader frames_{[this](bool err, const char* data, size_t size) {
    ++messages_;
    AddPayload(err, data, size) && EndLine(err);
  }};
  size_t messages_ = 0;
  bool not_frames_ = false;
  std::string pending_[2];  // the line being read on stdout, stderr
  std::vector<LogLine> lines_;
  size_t bytes_ = 0;
  bool full_ = false;
};

}  // namespace

size_t SafeStop(const std::vector<LogLine>& lines, size_t most) {
  most = std::min(most, lines.size());
  if (most == lines.size()) return most;
  using Time = std::pair<int64_t, int64_t>;
  std::vector<Time> at(lines.size(), Time{-1, 0});  // -1: not stamped, no constraint
  for (size_t i = 0; i < lines.size(); ++i)
    if (!ParseTime(lines[i].timestamp, &at[i].first, &at[i].second)) at[i] = {-1, 0};
  // The earliest of the lines from k on, for each k.
  std::vector<Time> earliest(lines.size() + 1, Time{INT64_MAX, 0});
  for (size_t k = lines.size(); k-- > 0;)
    earliest[k] = at[k].first < 0 ? earliest[k + 1] : std::min(earliest[k + 1], at[k]);
  size_t stop = 0;
  Time latest{-1, 0};
  for (size_t k = 1; k <= most; ++k) {
    latest = std::max(latest, at[k - 1]);
    if (latest < earliest[k]) stop = k;
  }
  return stop;
}

std::string CreateBody(const ContainerSpec& spec) {
  json host = json::object();
  if (!spec.mounts.empty()) {
    json binds = json::array();
    for (const ContainerMount& m : spec.mounts)
      binds.push_back(m.host + ":" + m.container + (m.read_only ? ":ro" : ""));
    host["Binds"] = binds;
  }
  if (spec.shm_bytes > 0) host["ShmSize"] = spec.shm_bytes;
  if (spec.memory_bytes > 0) host["Memory"] = spec.memory_bytes;
  if (spec.nano_cpus > 0) host["NanoCpus"] = spec.nano_cpus;
  if (!spec.cpuset_cpus.empty()) host["CpusetCpus"] = spec.cpuset_cpus;
  if (!spec.cpuset_mems.empty()) host["CpusetMems"] = spec.cpuset_mems;
  if (!spec.gpu_device_ids.empty()) {
    // DeviceIDs with Count 0, as `docker run --gpus device=...` sends: the two are exclusive.
    host["DeviceRequests"] = json::array({{{"Driver", "nvidia"},
                                           {"Count", 0},
                                           {"DeviceIDs", spec.gpu_device_ids},
                                           {"Capabilities", json::array({{"gpu"}})}}});
  }
  json body = {{"Image", spec.image}, {"HostConfig", host}};
  if (!spec.command.empty()) body["Cmd"] = spec.command;
  if (!spec.env.empty()) body["Env"] = spec.env;
  if (!spec.labels.empty()) body["Labels"] = spec.labels;
  return body.dump();
}

DockerClient::DockerClient(std::string socket_path)
    : socket_path_(std::move(socket_path)), curl_(curl_easy_init()) {
  if (!curl_) throw DockerError(0, "docker: libcurl could not be initialized");
}

DockerClient::~DockerClient() { curl_easy_cleanup(static_cast<CURL*>(curl_)); }

std::string DockerClient::Call(const std::string& method, const std::string& path,
                               const std::string& body, long timeout_s, const Sink& sink,
                               long stall_s) {
  CURL* curl = static_cast<CURL*>(curl_);
  // Reset keeps the open connection, so calls after the first reuse it.
  curl_easy_reset(curl);
  Transfer t{curl, &sink, {}};
  char error[CURL_ERROR_SIZE] = "";
  std::string url = "http://localhost" + path;
  curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
  curl_easy_setopt(curl, CURLOPT_UNIX_SOCKET_PATH, socket_path_.c_str());
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT, timeout_s);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT, 10L);
  if (stall_s > 0) {
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
    curl_easy_setopt(curl, CURLOPT_LOW_SPEED_TIME, stall_s);
  }
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, OnData);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
  if (method == "POST") {
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  } else if (method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method.c_str());
  }
  CURLcode rc = curl_easy_perform(curl);
  curl_slist_free_all(headers);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  std::string what = "docker: " + method + " " + path + ": ";
  if (t.too_big)
    throw DockerError(static_cast<int>(status), what + "the engine's answer is over " +
                                                    std::to_string(kMaxAnswerBytes >> 20) + " MiB");
  if (rc != CURLE_OK && !t.sink_stopped) {
    std::string detail = error[0] ? error : curl_easy_strerror(rc);
    if (rc == CURLE_COULDNT_CONNECT) {
      // libcurl's text names "localhost port 80"; the socket's errno says what is wrong.
      long os_errno = 0;
      curl_easy_getinfo(curl, CURLINFO_OS_ERRNO, &os_errno);
      if (os_errno) detail = strerror(static_cast<int>(os_errno));
      throw DockerError(0, "cannot reach the Docker engine at " + socket_path_ + ": " + detail +
                               "; is dockerd running? (berth agent --docker-socket PATH)");
    }
    throw DockerError(0, what + detail + " (engine at " + socket_path_ + ")");
  }
  if (status >= 400) {
    json j = json::parse(t.body, nullptr, false);
    std::string message = j.is_object() ? String(j, "message") : t.body;
    throw DockerError(static_cast<int>(status),
                      what + (message.empty() ? "HTTP " + std::to_string(status) : message));
  }
  return std::move(t.body);
}

std::string DockerClient::Path(const std::string& path) {
  if (version_.empty()) Negotiate();
  return "/v" + version_ + path;
}

std::string DockerClient::Negotiate(std::string* engine_version) {
  json j = Parse(Call("GET", "/version", "", kCallTimeoutS));
  std::string api = String(j, "ApiVersion");
  if (api.empty())
    throw DockerError(0, "docker: GET /version: no ApiVersion in the answer; is " + socket_path_ +
                             " a Docker engine?");
  version_ = ParseVersion(api) < ParseVersion(kNewestApiVersion) ? api : kNewestApiVersion;
  if (engine_version) *engine_version = String(j, "Version");
  return version_;
}

std::string DockerClient::EngineIdentity() {
  const json info = Parse(Call("GET", Path("/info"), "", kCallTimeoutS));
  const std::string id = String(info, "ID");
  if (id.empty()) throw DockerError(0, "docker: GET /info: no ID in the answer");
  uint64_t digest = 14695981039346656037ull;  // FNV-1a: the same in every build of berth
  for (const std::string& part : {id, String(info, "Name"), String(info, "DockerRootDir")})
    for (const char c : part + '\0') {
      digest ^= static_cast<unsigned char>(c);
      digest *= 1099511628211ull;
    }
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(digest));
  return text;
}

std::string DockerClient::Create(const ContainerSpec& spec) {
  std::string query = spec.name.empty() ? "" : "?name=" + Escape(spec.name);
  json j = Parse(Call("POST", Path("/containers/create" + query), CreateBody(spec), kCallTimeoutS));
  std::string id = String(j, "Id");
  if (id.empty()) throw DockerError(0, "docker: POST /containers/create: no Id in the answer");
  return id;
}

void DockerClient::Start(const std::string& id) {
  // 304 (already started) is no error: Call throws only from 400.
  Call("POST", Path("/containers/" + Escape(id) + "/start"), "", kCallTimeoutS);
}

ContainerInfo DockerClient::Inspect(const std::string& id) {
  return ToContainerInfo(
      Parse(Call("GET", Path("/containers/" + Escape(id) + "/json"), "", kCallTimeoutS)));
}

std::vector<ContainerInfo> DockerClient::List(const std::string& label) {
  json filters = {{"label", {label}}};
  json list = Parse(Call("GET", Path("/containers/json?all=1&filters=" + Escape(filters.dump())),
                         "", kCallTimeoutS));
  std::vector<ContainerInfo> out;
  for (const json& entry : list) {
    if (!entry.is_object()) continue;
    ContainerInfo c;
    c.id = String(entry, "Id");
    c.status = String(entry, "State");
    // The engine answers an inspection of a container only once its create or start has
    // ended: one still being made (created) is taken from the listing, so that a listing never
    // waits on a burst of starts. The others are inspected: a stopped one's exit code is only
    // there, and the listing may still say running when the exit is already an event.
    if (c.status != "created") {
      try {
        out.push_back(Inspect(c.id));
      } catch (const DockerError& e) {
        if (e.status != 404) throw;  // removed since it was listed
      }
      continue;
    }
    const json names = entry.value("Names", json::array());
    if (names.is_array() && !names.empty() && names[0].is_string()) c.name = names[0];
    if (!c.name.empty() && c.name[0] == '/') c.name.erase(0, 1);
    c.image = String(entry, "Image");
    c.labels = Labels(entry.value("Labels", json()));
    out.push_back(std::move(c));
  }
  return out;
}

void DockerClient::Stop(const std::string& id, int grace_s) {
  // The engine answers when the container has stopped: after at most grace_s and the kill.
  Call("POST", Path("/containers/" + Escape(id) + "/stop?t=" + std::to_string(grace_s)), "",
       grace_s + kCallTimeoutS);
}

void DockerClient::Remove(const std::string& id, bool force) {
  try {
    // v=1: the container's anonymous volumes (an image's VOLUME) go with it, not left behind.
    Call("DELETE", Path("/containers/" + Escape(id) + "?v=1&force=" + (force ? "1" : "0")), "",
         kCallTimeoutS);
  } catch (const DockerError& e) {
    if (e.status != 404) throw;
  }
}

void DockerClient::UpdateCpuset(const std::string& id, const std::string& cpus,
                                const std::string& mems) {
  json body = {{"CpusetCpus", cpus}, {"CpusetMems", mems}};
  Call("POST", Path("/containers/" + Escape(id) + "/update"), body.dump(), kCallTimeoutS);
}

std::vector<LogLine> DockerClient::Logs(const std::string& id, const std::string& since,
                                        size_t max_bytes, bool* more, bool cut) {
  const bool raw = Inspect(id).tty;
  std::string query = "?stdout=1&stderr=1&timestamps=1";
  int64_t s, ns;
  if (!since.empty() && ParseTime(since, &s, &ns)) {
    // The engine's since is inclusive and whole lines at or before the cursor are dropped by
    // the reader; the engine's, kStreamSkewNs earlier, spares sending older ones, and tells
    // whether a read from the log's end went back far enough (below).
    const int64_t skewed_ns = std::max<int64_t>(0, s * 1'000'000'000 + ns - kStreamSkewNs);
    char value[40];
    snprintf(value, sizeof value, "%lld.%09lld", static_cast<long long>(skewed_ns / 1'000'000'000),
             static_cast<long long>(skewed_ns % 1'000'000'000));
    query += "&since=" + std::string(value);
  }
  const auto read = [&](const std::string& tail) {
    auto reader = std::make_unique<LogReader>(raw, since, max_bytes);
    Call("GET", Path("/containers/" + Escape(id) + "/logs" + query + tail), "", kCallTimeoutS,
         [&](const char* data, size_t size) { return reader->Add(data, size); });
    if (reader->not_frames())
      throw DockerError(502, "docker logs " + id + ": the engine's answer is not in frames");
    return reader;
  };
  // The engine finds `since` by reading the log from its start (most of a second for a 60 MB
  // log, every report of a job that keeps printing), but reads its last messages from the end.
  // When fewer than kTailMessages of those came after the engine's since (kStreamSkewNs before
  // the cursor), and the read was not cut short, they are all there are: the messages left out
  // were stamped that much before the cursor, and no line written before them is stamped after
  // it (stdout's and stderr's lines reach the log apart, but not that far apart). Else (or for
  // a TTY's raw stream, whose messages are not framed and so not counted) the log is read from
  // its start.
  if (!since.empty() && !raw) {
    std::unique_ptr<LogReader> tail = read("&tail=" + std::to_string(kTailMessages));
    if (tail->messages() < kTailMessages && !tail->full()) return tail->Finish(cut, more);
  }
  return read("")->Finish(cut, more);
}

bool DockerClient::WaitForExit(const std::string& label, int seconds, int64_t* after_ns,
                               EngineEventsSeen* seen) {
  seconds = std::clamp(seconds, 1, 60);
  const int64_t now_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  if (*after_ns <= 0 || *after_ns > now_ns) *after_ns = now_ns;
  const int64_t until_ns = now_ns + int64_t{seconds} * 1000000000;
  const auto decimal = [](int64_t ns) {  // the engine's seconds.nanoseconds
    char text[32];
    std::snprintf(text, sizeof text, "%lld.%09lld", static_cast<long long>(ns / 1000000000),
                  static_cast<long long>(ns % 1000000000));
    return std::string(text);
  };
  const json filters = {{"type", {"container"}}, {"event", {"die", "kill"}}, {"label", {label}}};
  // With `until` ahead, the engine streams each event as it happens and ends the answer then.
  // An event is a line of JSON; its timeNano moves the cursor past it.
  bool died = false;
  std::string line;
  Call("GET",
       Path("/events?since=" + decimal(*after_ns + 1) + "&until=" + decimal(until_ns) +
            "&filters=" + Escape(filters.dump())),
       "", seconds + kCallTimeoutS, [&](const char* data, size_t size) {
         line.append(data, size);
         for (size_t end; (end = line.find('\n')) != std::string::npos;) {
           const json event = json::parse(line.substr(0, end), nullptr, false);
           line.erase(0, end + 1);
           if (!event.is_object()) continue;
           const int64_t at = event.value("timeNano", int64_t{0});
           *after_ns = std::max(*after_ns, at);
           const std::string action = event.value("Action", "");
           if (action == "die") {
             died = true;
             return false;  // one is enough
           }
           const json actor = event.value("Actor", json::object());
           const json id = actor.is_object() ? actor.value("ID", json()) : json();
           const json attributes =
               actor.is_object() ? actor.value("Attributes", json::object()) : json::object();
           const json signal = attributes.is_object() ? attributes.value("signal", json()) : json();
           if (action == "kill" && seen != nullptr && id.is_string() &&
               seen->signalled.size() < 4096)
             seen->signalled.push_back(
                 {id.get<std::string>(), at,
                  signal.is_string() ? std::atoi(signal.get<std::string>().c_str()) : 0});
         }
         return line.size() < (1 << 20);  // an event is small
       });
  if (seen != nullptr) seen->until_ns = died ? *after_ns : until_ns;
  return died;
}

bool DockerClient::HasImage(const std::string& image) {
  try {
    Call("GET", Path("/images/" + Escape(image) + "/json"), "", kCallTimeoutS);
    return true;
  } catch (const DockerError& e) {
    if (e.status == 404) return false;
    throw;
  }
}

namespace {

// What an image can be asked for by: its tags, and the digests it was pulled by (RepoDigests,
// "name@sha256:..."), without the engine's "<none>" placeholders.
std::vector<std::string> ImageNames(const json& image) {
  std::vector<std::string> names;
  for (const char* field : {"RepoTags", "RepoDigests"}) {
    const json list = image.value(field, json::array());
    if (!list.is_array()) continue;
    for (const json& name : list)
      if (name.is_string() && name.get<std::string>().rfind("<none>", 0) != 0)
        names.push_back(name);
  }
  return names;
}

}  // namespace

double EngineSeconds(const std::string& text) {
  std::tm tm{};
  int consumed = 0;
  if (std::sscanf(text.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19 || tm.tm_year < 1970)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double seconds = static_cast<double>(::timegm(&tm));
  size_t end = 19;
  if (text.size() > 20 && text[19] == '.') {
    end = text.find_first_not_of("0123456789", 20);
    seconds += std::strtod(("0" + text.substr(19, end - 19)).c_str(), nullptr);
  }
  return end < text.size() && text[end] == 'Z' && end + 1 == text.size() ? seconds : 0;
}

ImageInfo DockerClient::InspectImage(const std::string& image) {
  json j = Parse(Call("GET", Path("/images/" + Escape(image) + "/json"), "", kCallTimeoutS));
  json history =
      Parse(Call("GET", Path("/images/" + Escape(image) + "/history"), "", kCallTimeoutS));
  ImageInfo info;
  info.id = String(j, "Id");
  info.names = ImageNames(j);
  info.bytes = j.value("Size", int64_t{0});
  if (j.contains("RootFS") && j["RootFS"].contains("Layers"))
    for (const json& digest : j["RootFS"]["Layers"]) info.layers.push_back({digest, 0});
  // History is newest first; its sizes, oldest first, matched to the layers as ImageLayer says.
  std::vector<int64_t> all, sized;
  for (auto it = history.rbegin(); it != history.rend(); ++it) {
    int64_t size = it->value("Size", int64_t{0});
    all.push_back(size);
    if (size > 0) sized.push_back(size);
  }
  const std::vector<int64_t>* sizes = sized.size() == info.layers.size() ? &sized
                                      : all.size() == info.layers.size() ? &all
                                                                         : nullptr;
  for (size_t i = 0; sizes && i < info.layers.size(); ++i) info.layers[i].bytes = (*sizes)[i];
  return info;
}

std::vector<ImageInfo> DockerClient::Images(
    std::map<std::string, std::vector<ImageLayer>>* layers_by_id) {
  json list = Parse(Call("GET", Path("/images/json"), "", kCallTimeoutS));
  std::vector<ImageInfo> out;
  std::map<std::string, std::vector<ImageLayer>> listed;
  for (const json& entry : list) {
    if (!entry.is_object()) continue;
    ImageInfo info;
    info.id = String(entry, "Id");
    const auto known = layers_by_id ? layers_by_id->find(info.id) : listed.end();
    if (layers_by_id && known != layers_by_id->end()) {
      info.names = ImageNames(entry);
      info.bytes = entry.value("Size", int64_t{0});
      info.layers = known->second;
    } else {
      try {
        info = InspectImage(info.id);
      } catch (const DockerError& e) {
        if (e.status != 404) throw;  // removed since it was listed
        continue;
      }
    }
    listed[info.id] = info.layers;
    out.push_back(std::move(info));
  }
  if (layers_by_id) *layers_by_id = std::move(listed);
  return out;
}

void DockerClient::Pull(const std::string& image,
                        const std::function<void(const std::string&)>& progress,
                        const std::atomic<bool>* cancel) {
  // "name:tag" splits at a colon after the last slash (a registry's port comes before it);
  // "name@sha256:..." is pulled by digest as it is.
  std::string name = image, tag;
  if (image.find('@') == std::string::npos) {
    size_t colon = image.rfind(':'), slash = image.rfind('/');
    bool tagged = colon != std::string::npos && (slash == std::string::npos || colon > slash);
    name = tagged ? image.substr(0, colon) : image;
    tag = tagged ? image.substr(colon + 1) : "latest";
  }
  std::string query = "?fromImage=" + Escape(name) + (tag.empty() ? "" : "&tag=" + Escape(tag));
  // The answer streams JSON lines: progress, or an error that ends the pull (the HTTP status
  // was 200 by then).
  std::string line, failure;
  auto take_line = [&] {
    json j = json::parse(line, nullptr, false);
    line.clear();
    if (!j.is_object()) return true;
    if (j.contains("error") || j.contains("errorDetail")) {
      failure = String(j, "error");
      if (failure.empty() && j["errorDetail"].is_object())
        failure = String(j["errorDetail"], "message");
      if (failure.empty()) failure = j.dump();
      return false;
    }
    std::string text = String(j, "id");
    if (!text.empty()) text += ": ";
    text += String(j, "status");
    if (!String(j, "progress").empty()) text += " " + String(j, "progress");
    if (progress) progress(text);
    return true;
  };
  Call(
      "POST", Path("/images/create" + query), "", kPullTimeoutS,
      [&](const char* data, size_t size) {
        if (cancel != nullptr && *cancel) return false;
        for (size_t i = 0; i < size; ++i) {
          if (data[i] == '\n') {
            if (!take_line()) return false;
          } else if (line.size() < kMaxAnswerBytes) {
            line += data[i];
          }
        }
        return true;
      },
      kPullStallS);
  if (cancel != nullptr && *cancel) throw DockerError(0, "docker: pulling " + image + ": given up");
  if (!line.empty()) take_line();
  if (!failure.empty()) throw DockerError(500, "docker: pulling " + image + ": " + failure);
}

}  // namespace berth
