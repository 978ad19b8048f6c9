// The docker-like verbs that talk to a berth server: run, ps, inspect, stop, rm, queues
// [apply|show], policy apply|show, nodes, node, events. The server is $BERTH_ADDR (HOST:PORT,
// default 127.0.0.1:7480). A refusal by the server (4xx) exits 2 with its message; no server, or a
// server error, exits 1.
#include <httplib.h>
#include <malloc.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "cli/commands.h"
#include "config/config_error.h"
#include "config/file_text.h"
#include "config/policy_file.h"
#include "config/vc_file.h"
#include "protocol/agent_protocol.h"
#include "protocol/log_frames.h"
#include "server/http_api.h"
#include "server/job_listing.h"

namespace berth {
namespace {

using Json = nlohmann::json;

// Leaves the process with `code` after printing `message` (the server's refusals and failures
// are not the operator's input files, but they end the command the same way).
// Callable from any thread (ps fetches pages on a second one): std::exit would run the static
// destructors under the other threads' feet.
[[noreturn]] void Exit(int code, const std::string& message) {
  std::cout.flush();
  std::cerr << "berth: " << message << std::endl;
  std::_Exit(code);
}

}  // namespace

ServerAddress ServerAddressFromEnv() {
  const char* env = std::getenv("BERTH_ADDR");
  ServerAddress a;
  a.text = env != nullptr && *env != '\0' ? env : "127.0.0.1:7480";
  std::string host_port = a.text;
  if (host_port.rfind("http://", 0) == 0) host_port = host_port.substr(7);
  a.tls = host_port.rfind("https://", 0) == 0;
  if (a.tls) host_port = host_port.substr(8);
  const size_t colon = host_port.rfind(':');
  char* end = nullptr;
  const long port = colon == std::string::npos ? -1 : std::strtol(&host_port[colon + 1], &end, 10);
  if (port < 1 || port > 65535 || *end != '\0')
    throw ConfigError("BERTH_ADDR: expected HOST:PORT or https://HOST:PORT, got \"" + a.text +
                      "\"");
  a.host = host_port.substr(0, colon);
  if (a.host.size() > 2 && a.host.front() == '[' && a.host.back() == ']')
    a.host = a.host.substr(1, a.host.size() - 2);
  a.port = static_cast<int>(port);
  return a;
}

std::unique_ptr<httplib::Client> ConnectToServer(const ServerAddress& server) {
  const std::string host =
      server.host.find(':') != std::string::npos ? "[" + server.host + "]" : server.host;
  auto client = std::make_unique<httplib::Client>((server.tls ? "https://" : "http://") + host +
                                                  ":" + std::to_string(server.port));
  if (const char* token = std::getenv("BERTH_TOKEN"); token != nullptr && *token != '\0') {
    // A control character would end the header early (CR LF: a header of its own).
    if (std::any_of(token, token + std::strlen(token),
                    [](char c) { return static_cast<unsigned char>(c) < 0x20 || c == 0x7f; }))
      throw ConfigError(
          "BERTH_TOKEN: holds a control character (a newline from a file?); set it to the "
          "token alone");
    client->set_bearer_token_auth(token);
  }
  if (const char* ca = std::getenv("BERTH_CACERT"); server.tls && ca != nullptr && *ca != '\0') {
    // The library reads the file only as it connects, and fails as if no server were there.
    const std::string fix =
        "; set it to the PEM file of the CA (or self-signed certificate) that signed the "
        "server's certificate";
    std::FILE* file = std::fopen(ca, "r");
    if (file == nullptr)
      throw ConfigError(std::string("BERTH_CACERT: cannot read ") + ca + ": " +
                        std::strerror(errno) + fix);
    char head[1 << 16];
    const size_t got = std::fread(head, 1, sizeof head, file);
    std::fclose(file);
    if (std::string(head, got).find("-----BEGIN CERTIFICATE-----") == std::string::npos)
      throw ConfigError(std::string("BERTH_CACERT: ") + ca +
                        " holds no PEM certificate (a directory, an empty file, or another "
                        "format?)" +
                        fix);
    client->set_ca_cert_path(ca);
  }
  client->set_connection_timeout(5);
  client->set_tcp_nodelay(true);
  return client;
}

namespace {

// A request's answer, or why there is none: `exit_code` 2 for a refusal (4xx, `error` is the
// server's message), 1 for no server or a server error; 0 with a 2xx `response`.
struct ServerAnswer {
  httplib::Response response;
  int exit_code = 0;
  std::string error;
};

// The server's message, with the next step for what is not there.
std::string WithNextStep(int status, std::string message) {
  if (status == 404 && message.rfind("no job ", 0) == 0)
    message += " (`berth ps -a` lists the jobs)";
  if (status == 404 && message.rfind("no node ", 0) == 0)
    message += " (`berth nodes` lists the nodes)";
  return message;
}

ServerAnswer AskServer(const std::string& method, const std::string& path, const std::string& body,
                       const httplib::Headers& headers = {}) {
  const auto failed = [](int code, std::string message) {
    return ServerAnswer{httplib::Response(), code, std::move(message)};
  };
  const ServerAddress server = ServerAddressFromEnv();
  const std::string& addr = server.text;
  const std::unique_ptr<httplib::Client> client = ConnectToServer(server);
  constexpr int kAnswerTimeoutS = 60;
  client->set_read_timeout(kAnswerTimeoutS);
  const auto start = std::chrono::steady_clock::now();
  httplib::Result res = method == "GET"    ? client->Get(path, headers)
                        : method == "POST" ? client->Post(path, headers, body, "application/json")
                        : method == "PUT"  ? client->Put(path, headers, body, "application/yaml")
                                           : client->Delete(path, headers);
  const bool timed_out =
      std::chrono::steady_clock::now() - start >= std::chrono::seconds(kAnswerTimeoutS - 1);
  if (!res && res.error() == httplib::Error::SSLServerVerification)
    return failed(1, "the certificate of the server at " + addr +
                         " is not trusted: set BERTH_CACERT to the CA (or self-signed certificate) "
                         "that signed it");
  if (!res && res.error() == httplib::Error::SSLConnection)
    return failed(1, "no TLS at " + addr +
                         ": if the server serves plain HTTP, drop https:// from BERTH_ADDR");
  if (!res && res.error() == httplib::Error::Write)
    return failed(1, "the server at " + addr + " closed the connection while the request was sent");
  if (!res && res.error() == httplib::Error::Read && timed_out)
    return failed(1, "the server at " + addr + " did not answer in " +
                         std::to_string(kAnswerTimeoutS) + " s; it may be overloaded");
  if (!res && res.error() == httplib::Error::Read)
    return failed(
        1, "the server at " + addr + " closed the connection without an answer (it stopped, " +
               "or it is not a berth server" +
               (server.tls ? std::string()
                           : ", or it serves HTTPS: then set BERTH_ADDR=https://" + addr) +
               ")");
  if (!res)
    return failed(1, "no server at " + addr + " (" + httplib::to_string(res.error()) +
                         "): start one with `berth up` (or `berth server`), or set BERTH_ADDR");
  if (res->status >= 200 && res->status < 300) return ServerAnswer{std::move(*res), 0, ""};
  const Json json = Json::parse(res->body, nullptr, false);
  std::string message = json.is_object() && json.contains("error") && json["error"].is_string()
                            ? json["error"].get<std::string>()
                            : res->body;
  if (message.empty())
    message = "HTTP " + std::to_string(res->status) + " from " + addr + "; is it a berth server?";
  return failed(res->status >= 400 && res->status < 500 ? 2 : 1,
                WithNextStep(res->status, std::move(message)));
}

// CallServer's request, returning a 2xx answer as it came, sent with `headers`: for answers
// that are not JSON.
httplib::Response CallServerAnswer(const std::string& method, const std::string& path,
                                   const std::string& body, const httplib::Headers& headers = {}) {
  ServerAnswer answer = AskServer(method, path, body, headers);
  if (answer.exit_code != 0) Exit(answer.exit_code, answer.error);
  return std::move(answer.response);
}

}  // namespace

namespace {

Json AnswerJson(const httplib::Response& answer) {
  if (answer.status == 204) return Json::object();
  Json json = Json::parse(answer.body, nullptr, false);  // not const: returned without a copy
  if (json.is_discarded())
    Exit(1, "the server at " + ServerAddressFromEnv().text +
                " answered with something other than JSON; is it a berth server?");
  return json;
}

}  // namespace

Json CallServer(const std::string& method, const std::string& path, const std::string& body) {
  return AnswerJson(CallServerAnswer(method, path, body));
}

namespace {

// Empty when `job` reads as a job id.
std::string JobIdError(const std::string& job) {
  if (!job.empty() && job.size() <= 19 && job.find_first_not_of("0123456789") == std::string::npos)
    return "";
  return "expected a job id (a number, as `berth ps` shows), got \"" + job.substr(0, 40) + "\"";
}

// A job id as a number where it is one, else (in an error) the text given.
Json JobIdJson(const std::string& job) {
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(job.data(), job.data() + job.size(), id);
  return JobIdError(job).empty() && ec == std::errc() && end == job.data() + job.size() ? Json(id)
                                                                                        : Json(job);
}

std::string JobPath(const std::string& job) {
  if (const std::string error = JobIdError(job); !error.empty()) Exit(2, error);
  return "/v1/jobs/" + job;
}

// `berth stop A B...`, `berth rm A B...`: as docker's, each job in turn, its id printed once
// done; a job that cannot be is said on standard error and the others still go. The exit code
// is the worst failure's (2 for a refusal, 1 for no server). With `json`, one array of what
// became of each: the server's answer (stop: the job), or {"id", "error"}.
void ForEachJob(const std::vector<std::string>& jobs, const std::string& method,
                const std::string& suffix, bool json) {
  int worst = 0, failed = 0;
  Json results = Json::array();
  for (const std::string& job : jobs) {
    ServerAnswer answer{httplib::Response(), 2, JobIdError(job)};
    if (answer.error.empty()) answer = AskServer(method, "/v1/jobs/" + job + suffix, "");
    if (answer.exit_code == 0) {
      if (!json) std::cout << job << std::endl;
      Json result = AnswerJson(answer.response);
      if (result.empty()) result = {{"id", JobIdJson(job)}};  // rm: 204, no body
      results.push_back(std::move(result));
      continue;
    }
    std::cerr << "berth: " << answer.error << std::endl;
    results.push_back({{"id", JobIdJson(job)}, {"error", answer.error}});
    worst = std::max(worst, answer.exit_code);
    ++failed;
  }
  if (json) std::cout << JsonText(results) << "\n";
  if (failed > 0)
    Exit(worst, std::to_string(failed) + " of " + std::to_string(jobs.size()) + " jobs failed");
}

// "16g", "512m", "1024" (MiB) into MiB.
int64_t MemoryMiB(const std::string& text) {
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  const std::string unit = end;
  double mib = value;
  if (unit == "g" || unit == "G" || unit == "gb" || unit == "GB")
    mib *= 1024;
  else if (unit == "t" || unit == "T")
    mib *= 1024 * 1024;
  else if (!(unit.empty() || unit == "m" || unit == "M" || unit == "mb" || unit == "MB"))
    Exit(2, "--memory: expected a size such as 16g or 512m, got \"" + text + "\"");
  if (end == text.c_str() || !std::isfinite(mib) || mib < 0 || mib > 1e12)
    Exit(2, "--memory: expected a size such as 16g or 512m, got \"" + text + "\"");
  if (mib > 0 && mib < 6)
    Exit(2, "--memory: a container takes at least 6m (0: no limit), got \"" + text + "\"");
  return static_cast<int64_t>(mib);
}

struct RunArgs {
  bool detach = false;
  std::string format = "table";  // json: with -d, the submitted job as the server answers
  std::string file, name, queue, mig, affinity, memory, shm_size;
  int priority = 0, gpus = 0, gpu_share = 0, replicas = 1, min_replicas = 0;
  bool priority_set = false, name_set = false, queue_set = false;
  double cpus = 0;
  std::vector<std::string> models, env, volumes, words;  // words: IMAGE [CMD...]
};

// $USER, or the account's name where a service or `env -i` left it unset: never "" (every job
// has an owner, whom `berth ps` and the per-user fairness go by).
std::string LoginName() {
  if (const char* user = std::getenv("USER"); user != nullptr && *user != '\0') {
    if (!IsUtf8(user)) Exit(2, "USER: not UTF-8; set it to your login name");
    return user;
  }
  if (const passwd* account = ::getpwuid(::geteuid());
      account != nullptr && account->pw_name != nullptr && IsUtf8(account->pw_name))
    return account->pw_name;
  return "uid" + std::to_string(::geteuid());
}

// The flags of `berth run` that shape the spec, as given: with -f the file says all of it.
std::vector<std::string> SpecFlagsGiven(const RunArgs& a) {
  std::vector<std::string> given;
  const std::vector<std::pair<bool, const char*>> flags = {{a.name_set, "--name"},
                                                           {a.queue_set, "--queue"},
                                                           {a.priority_set, "--priority"},
                                                           {a.gpus > 0, "--gpus"},
                                                           {a.gpu_share > 0, "--gpu-share"},
                                                           {!a.mig.empty(), "--mig"},
                                                           {!a.models.empty(), "--gpu-model"},
                                                           {a.replicas != 1, "--replicas"},
                                                           {a.min_replicas > 0, "--min-replicas"},
                                                           {!a.affinity.empty(), "--affinity"},
                                                           {a.cpus > 0, "--cpus"},
                                                           {!a.memory.empty(), "--memory"},
                                                           {!a.env.empty(), "-e"},
                                                           {!a.volumes.empty(), "-v"},
                                                           {!a.shm_size.empty(), "--shm-size"}};
  for (const auto& [set, flag] : flags)
    if (set) given.push_back(flag);
  return given;
}

std::string RunSpec(const RunArgs& a) {
  if (!a.file.empty()) {
    if (!a.words.empty()) Exit(2, "-f: give the job in the file or as IMAGE [CMD], not both");
    if (const std::vector<std::string> given = SpecFlagsGiven(a); !given.empty()) {
      std::string names;
      for (const std::string& flag : given) names += (names.empty() ? "" : ", ") + flag;
      Exit(2, "-f: the file gives the whole job; put " + names +
                  " in it as fields (docs/api.md, \"The job spec\"), or run without -f");
    }
    if (a.file != "-") return ReadFileText(a.file);
    try {
      return ReadFileText("/dev/stdin");
    } catch (const ConfigError& e) {  // named as the operator gave it
      const std::string what = e.what();
      throw ConfigError("-f -: standard input" + what.substr(what.find(':')));
    }
  }
  if (a.words.empty()) Exit(2, "run: expected IMAGE [CMD...] or -f FILE");
  Json spec = {{"image", a.words[0]}};
  if (a.words.size() > 1)
    spec["command"] = std::vector<std::string>(a.words.begin() + 1, a.words.end());
  if (a.name_set && a.name.empty()) Exit(2, "--name: give a name, or leave the flag out");
  if (a.queue_set && a.queue.empty()) Exit(2, "--queue: give a queue, or leave the flag out");
  if (!a.name.empty()) spec["name"] = a.name;
  if (!a.queue.empty()) spec["queue"] = a.queue;
  // With a token the server names the user; without one, the login name does.
  const char* token = std::getenv("BERTH_TOKEN");
  if (token == nullptr || *token == '\0') spec["user"] = LoginName();
  if (a.priority_set) spec["priority"] = a.priority;
  if ((a.gpus > 0) + (a.gpu_share > 0) + !a.mig.empty() > 1)
    Exit(2, "give one of --gpus, --gpu-share and --mig");
  if (a.gpus > 0) spec["gpus"] = a.gpus;
  if (a.gpu_share > 0) spec["gpuMilli"] = a.gpu_share;
  if (!a.mig.empty()) spec["migProfile"] = a.mig;
  if (!a.models.empty()) spec["gpuModels"] = a.models;
  if (a.replicas != 1) spec["replicas"] = a.replicas;
  if (a.min_replicas > 0) spec["minReplicas"] = a.min_replicas;
  if (!a.affinity.empty()) spec["affinity"] = a.affinity;
  if (!std::isfinite(a.cpus) || (a.cpus > 0 && a.cpus < 0.01))
    Exit(2, "--cpus: a container takes at least 0.01 (0: no limit)");
  if (a.cpus > 0) spec["cpuMilli"] = static_cast<int64_t>(std::llround(a.cpus * 1000));
  if (!a.memory.empty()) spec["memoryMiB"] = MemoryMiB(a.memory);
  Json env = Json::object();
  for (const std::string& e : a.env) {
    const size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0) Exit(2, "-e: expected KEY=VALUE, got \"" + e + "\"");
    env[e.substr(0, eq)] = e.substr(eq + 1);
  }
  if (!env.empty()) spec["env"] = env;
  // The server reads and checks both (docs/api.md, "The job spec").
  if (!a.volumes.empty()) spec["volumes"] = a.volumes;
  if (!a.shm_size.empty()) spec["shmSize"] = a.shm_size;
  return spec.dump();
}

std::string Age(double since) {
  const double s = std::max(0.0, static_cast<double>(std::time(nullptr)) - since);
  if (s < 120) return std::to_string(static_cast<int>(s)) + "s";
  if (s < 7200) return std::to_string(static_cast<int>(s / 60)) + "m";
  if (s < 172800) return std::to_string(static_cast<int>(s / 3600)) + "h";
  return std::to_string(static_cast<int>(s / 86400)) + "d";
}

// Rows as docker prints them: each column as wide as its widest cell, two spaces apart. The
// cells share one buffer: `berth ps` may show 100,000 rows, and a string per cell would cost
// more than everything else it does.
class TextTable {
 public:
  explicit TextTable(std::initializer_list<std::string_view> header) { Add(header); }

  void Add(std::initializer_list<std::string_view> row) {
    size_t column = 0;
    for (const std::string_view cell : row) {
      if (width_.size() <= column) width_.push_back(0);
      width_[column] = std::max(width_[column], cell.size());
      ++column;
      cell_starts_.push_back(text_.size());
      text_ += cell;
    }
    row_ends_.push_back(cell_starts_.size());
  }

  void Print() const {
    std::string out;  // written a megabyte at a time
    size_t cell = 0;
    for (const size_t row_end : row_ends_) {
      for (size_t column = 0; cell < row_end; ++cell, ++column) {
        const size_t start = cell_starts_[cell];
        const size_t size =
            (cell + 1 < cell_starts_.size() ? cell_starts_[cell + 1] : text_.size()) - start;
        out.append(text_, start, size);
        if (cell + 1 < row_end) out.append(width_[column] - size + 2, ' ');
      }
      out += '\n';
      if (out.size() >= (1 << 20)) {
        std::cout << out;
        out.clear();
      }
    }
    std::cout << out;
  }

 private:
  std::string text_;                 // every cell, one after another
  std::vector<size_t> cell_starts_;  // where each cell starts in text_
  std::vector<size_t> row_ends_;     // each row's end in cell_starts_
  std::vector<size_t> width_;        // by column
};

std::string Text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_number_float()) {
    std::ostringstream out;
    out << std::fixed << std::setprecision(1) << value.get<double>();
    return out.str();
  }
  return value.dump();
}

std::string OrDash(const std::string& text) { return text.empty() ? "-" : text; }

// "node/0", "node/1", "node/2", "other/5" as "node/0-2,other/5": a table cell, not a list.
std::string CompactGpus(const std::vector<std::string>& ids) {
  std::string out, node;
  int first = -1, last = -1;
  const auto flush = [&] {
    if (first < 0) return;
    out += (out.empty() ? "" : ",") + node + "/" + std::to_string(first) +
           (last > first ? "-" + std::to_string(last) : "");
  };
  for (const std::string& text : ids) {
    const size_t slash = text.rfind('/');
    const std::string this_node = text.substr(0, slash);
    const int gpu = std::atoi(text.c_str() + slash + 1);
    if (this_node == node && gpu == last + 1) {
      last = gpu;
      continue;
    }
    flush();
    node = this_node;
    first = last = gpu;
  }
  flush();
  return out;
}

struct PsArgs {
  bool all = false, quiet = false;
  std::string queue, format;
};

// A job of the tab-separated listing (server/job_listing.h) as its row in `berth ps`.
void AddPsRow(const std::vector<std::string_view>& cells, TextTable* table) {
  std::string reason = UnescapedCell(cells[kReason]);
  if (reason.size() > 60) reason = reason.substr(0, 57) + "...";
  table->Add({cells[kId], UnescapedCell(cells[kName]), UnescapedCell(cells[kQueue]),
              OrDash(UnescapedCell(cells[kUser])), UnescapedCell(cells[kState]),
              OrDash(CompactGpus(GpuIdsCell(cells[kGpus]))),
              Age(std::strtod(std::string(cells[kSubmitted]).c_str(), nullptr)), reason});
}

// An empty listing of `berth ps --queue Q` says whether Q is a typo: a queue the server does
// not know (a queue removed from the VC file still lists the jobs it kept).
void RefuseUnknownQueue(const std::string& queue) {
  if (queue.empty()) return;
  std::string known;
  const Json answer = CallServer("GET", "/v1/queues");
  for (const Json& q : answer["queues"]) {
    if (Text(q["name"]) == queue) return;
    known += (known.empty() ? "" : ", ") + Text(q["name"]);
  }
  Exit(2, "--queue: no queue \"" + queue + "\" on the server; its queues: " + known);
}

void Ps(const PsArgs& a) {
  const auto page_path = [&](const Json& after) {
    std::string path = "/v1/jobs?limit=10000&after=" + after.dump();
    if (!a.queue.empty()) path += "&queue=" + httplib::detail::encode_query_param(a.queue);
    // Without -a, the server leaves the ended jobs out (but those still stopping): a long
    // history costs nothing here.
    if (!a.all) path += "&live=1";
    return path;
  };
  const auto not_berth = [](const std::string& what) {
    Exit(1,
         "the server at " + ServerAddressFromEnv().text + " " + what + "; is it a berth server?");
  };
  const auto ask = [&a](const std::string& path, const httplib::Headers& headers) {
    ServerAnswer answer = AskServer("GET", path, "", headers);
    // A server older than `live` refuses it by name.
    if (answer.exit_code == 2 && !a.all && answer.error.find("\"live\"") != std::string::npos)
      answer.error += " (the server is older than this berth: `berth ps -a` works with it)";
    if (answer.exit_code != 0) Exit(answer.exit_code, answer.error);
    return std::move(answer.response);
  };
  if (a.format == "json") {
    Json jobs = Json::array();
    for (Json after = 0; !after.is_null();) {
      Json page = Json::parse(ask(page_path(after), {}).body, nullptr, false);
      if (!page.is_object() || !page["jobs"].is_array())
        not_berth("answered with something other than a listing of jobs");
      for (Json& j : page["jobs"]) jobs.push_back(std::move(j));
      // Pages move forward by id, or the listing would never end.
      const Json& next = page["next"];
      if (!next.is_null() && (!next.is_number_integer() || next <= after))
        not_berth("gave a next page that does not move forward");
      after = next;
    }
    if (jobs.empty()) RefuseUnknownQueue(a.queue);
    std::cout << JsonText(jobs) << "\n";
    return;
  }
  // Megabyte buffers (a page, the table's cells) come and go: kept in the heap for reuse rather
  // than mapped afresh each time, which costs a listing of 100,000 jobs about a seventh of its
  // time in page faults.
  ::mallopt(M_MMAP_THRESHOLD, 256 << 20);
  // Each page is fetched while the one before it is read.
  const auto fetch = [&](int64_t after) {
    return std::async(std::launch::async, [&page_path, &ask, after] {
      return ask(page_path(after), {{"Accept", "text/tab-separated-values"}});
    });
  };
  TextTable table({"ID", "NAME", "QUEUE", "USER", "STATE", "GPUS", "AGE", "REASON"});
  std::string ids;
  size_t listed = 0;
  std::vector<std::string_view> cells;
  int64_t after = 0;
  for (std::future<httplib::Response> next = fetch(after); next.valid();) {
    const httplib::Response page = next.get();
    if (page.has_header("Berth-Next")) {
      // Pages move forward by id, or the listing would never end.
      const std::string text = page.get_header_value("Berth-Next");
      int64_t more = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), more);
      if (ec != std::errc() || end != text.data() + text.size() || more <= after)
        not_berth("sent a next page that does not come after the last (\"" + text.substr(0, 40) +
                  "\")");
      next = fetch(after = more);
    }
    const std::string_view body = page.body;
    if (body.substr(0, body.find('\n') + 1) != kJobListingHeader)
      not_berth("listed jobs without berth's columns");
    for (size_t start = body.find('\n') + 1; start < body.size();) {  // after the header
      const size_t end = std::min(body.find('\n', start), body.size());
      if (!SplitJobLine(body.substr(start, end - start), &cells))
        not_berth("listed a job in a form this berth does not know");
      start = end + 1;
      ++listed;
      if (a.quiet)
        (ids += cells[kId]) += '\n';
      else
        AddPsRow(cells, &table);
    }
  }
  if (listed == 0) RefuseUnknownQueue(a.queue);
  if (a.quiet)
    std::cout << ids;
  else
    table.Print();
}

struct EventsArgs {
  bool follow = false;
  int64_t since = 0;
  std::string format;
};

std::string Clock(double at) {
  const std::time_t t = static_cast<std::time_t>(at);
  std::tm tm{};
  localtime_r(&t, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
  return text;
}

void PrintEvent(const Json& e, bool json) {
  if (json) {
    std::cout << e.dump(-1, ' ', false, Json::error_handler_t::replace) << std::endl;
    return;
  }
  // A job's, a node's, or the server's own (a policy or queues applied).
  const std::string what = e.contains("job")    ? "job " + e["job"].dump()
                           : e.contains("node") ? "node " + e["node"].get<std::string>()
                                                : "server";
  std::cout << e["seq"] << "  " << Clock(e["at"]) << "  " << what << "  " << Text(e["state"])
            << "  " << Text(e["reason"]) << std::endl;
}

// What a streamed GET gave: the connection's result (an error when it dropped), the status (0
// when none came), and the server's message when it was not 200.
struct StreamAnswer {
  httplib::Result res;
  int status = 0;
  std::string error;
};

// The server's message in a refusal's body, or its status.
std::string RefusalMessage(const std::string& body, int status) {
  const Json json = Json::parse(body, nullptr, false);
  return WithNextStep(status,
                      json.is_object() && json.contains("error") && json["error"].is_string()
                          ? json["error"].get<std::string>()
                          : "HTTP " + std::to_string(status));
}

// A streamed GET: each chunk of a 200 answer goes to `on_data`; a 4xx ends the process with the
// server's message (exit 2), then, unless what was asked for does not exist (404),
// `after_refusal`.
StreamAnswer StreamGet(httplib::Client& client, const std::string& path,
                       const std::function<void(const char*, size_t)>& on_data,
                       const std::string& after_refusal = "") {
  int status = 0;
  std::string refusal;
  httplib::Result res = client.Get(
      path, httplib::Headers(),
      [&](const httplib::Response& r) {
        status = r.status;
        return true;
      },
      [&](const char* data, size_t size) {
        if (status == 200)
          on_data(data, size);
        else
          refusal.append(data, std::min(size, size_t{4096}));
        return true;
      });
  if (status >= 400 && status < 500)
    Exit(2, RefusalMessage(refusal, status) + (status == 404 ? "" : after_refusal));
  return {std::move(res), status, status == 200 ? "" : RefusalMessage(refusal, status)};
}

// Says once, on standard error, why a watch is not served yet (all the server's watches are
// taken): a follower that waits should not wait in silence.
void SayWhyWaiting(const StreamAnswer& answer, bool* said) {
  if (answer.status < 500 || *said) return;
  std::cerr << "berth: " << answer.error << "; trying again" << std::endl;
  *said = true;
}

// Says, on standard error, that the server cannot be reached, once the pauses between tries
// have grown to seconds (a restart takes less): a follower should not wait in silence.
void SayIfNoServer(const StreamAnswer& answer, const ServerAddress& server, double pause_s) {
  if (!answer.res && answer.status == 0 && pause_s >= 5)
    std::cerr << "berth: no server at " << server.text << " ("
              << httplib::to_string(answer.res.error()) << "); trying again" << std::endl;
}

// The log from `since`; with -f, a watch that follows it, resumed from the last event seen
// when the connection drops (the server restarted), with a growing, jittered pause between
// tries so that many followers do not come back at once.
void Events(const EventsArgs& a) {
  const bool json = a.format == "json";
  int64_t last = a.since;
  while (!a.follow) {
    const Json page = CallServer("GET", "/v1/events?limit=10000&since=" + std::to_string(last));
    for (const Json& e : page["events"]) PrintEvent(e, json);
    if (page["events"].empty()) return;
    last = page["next"].get<int64_t>();
  }
  const ServerAddress server = ServerAddressFromEnv();
  std::mt19937 jitter(std::random_device{}());
  double pause_s = 0.1;
  bool said = false;
  for (;;) {
    const std::unique_ptr<httplib::Client> client = ConnectToServer(server);
    client->set_read_timeout(3 * kWatchHeartbeatS);  // the server writes at least this often
    std::string partial;
    const StreamAnswer answer =
        StreamGet(*client, "/v1/events?watch=1&since=" + std::to_string(last),
                  [&](const char* data, size_t size) {
                    partial.append(data, size);
                    for (size_t end; (end = partial.find('\n')) != std::string::npos;) {
                      const std::string line = partial.substr(0, end);
                      partial.erase(0, end + 1);
                      if (line.empty()) continue;  // the server's heartbeat
                      const Json event = Json::parse(line, nullptr, false);
                      if (!event.is_object()) continue;
                      PrintEvent(event, json);
                      last = event["seq"].get<int64_t>();
                      pause_s = 0.1;
                    }
                  });
    SayIfNoServer(answer, server, pause_s);
    SayWhyWaiting(answer, &said);
    std::this_thread::sleep_for(std::chrono::duration<double>(
        pause_s * std::uniform_real_distribution<double>(0.5, 1.5)(jitter)));
    pause_s = std::min(pause_s * 2, 10.0);
  }
}

// Where a job's output goes: as the job wrote it, its stdout to stdout and its stderr to stderr
// (as `docker logs` does), or with `json` one object a line on stdout, {"stream": "stdout" or
// "stderr", "text": a line of output with its newline} (a last line without one comes at the
// end, Flush).
class LogOutput {
 public:
  explicit LogOutput(bool json) : json_(json) {}

  void Write(bool stderr_stream, const char* data, size_t size) {
    if (!json_) {
      std::ostream& out = stderr_stream ? std::cerr : std::cout;
      out.write(data, static_cast<std::streamsize>(size));
      out.flush();
      return;
    }
    std::string& pending = pending_[stderr_stream];
    pending.append(data, size);
    size_t start = 0;
    for (size_t end; (end = pending.find('\n', start)) != std::string::npos; start = end + 1)
      Line(stderr_stream, pending.substr(start, end + 1 - start));
    pending.erase(0, start);
    std::cout.flush();
  }

  void Flush() {
    for (bool stderr_stream : {false, true}) {
      if (!pending_[stderr_stream].empty()) Line(stderr_stream, pending_[stderr_stream]);
      pending_[stderr_stream].clear();
    }
    std::cout.flush();
  }

 private:
  static void Line(bool stderr_stream, const std::string& text) {
    std::cout << Json{{"stream", stderr_stream ? "stderr" : "stdout"}, {"text", text}}.dump(
                     -1, ' ', false, Json::error_handler_t::replace)
              << "\n";
  }

  bool json_;
  std::string pending_[2];  // a line not ended yet, of stdout and of stderr
};

// Writes a job's output, read as frames, to `out`; `*offset` counts the bytes written. A frame
// cut by a dropped connection is read again from its start.
FrameReader LogWriter(int64_t* offset, LogOutput* out) {
  return FrameReader([offset, out](bool stderr_stream, const char* data, size_t size) {
    out->Write(stderr_stream, data, size);
    *offset += static_cast<int64_t>(size);
  });
}

// Writes the job's output from `offset` to its end as it is now.
void WriteLogs(const std::string& job, int64_t offset, LogOutput* out) {
  for (;;) {  // pages of at most 4 MiB
    const httplib::Response page = CallServerAnswer(
        "GET", JobPath(job) + "/logs?frames=1&offset=" + std::to_string(offset), "");
    const int64_t before = offset;
    FrameReader frames = LogWriter(&offset, out);
    if (!frames.Add(page.body.data(), page.body.size()))
      Exit(1, "the server at " + ServerAddressFromEnv().text +
                  " answered the logs with something other than frames; is it a berth server?");
    if (offset == before) break;
  }
  out->Flush();
}

// Writes the job's output from `offset` until the job has ended and all of it is written;
// follows across dropped connections and server restarts (from the byte it got to). Returns
// the job as it ended.
Json FollowLogs(const std::string& job, LogOutput* out) {
  const std::string path = JobPath(job);
  const ServerAddress server = ServerAddressFromEnv();
  std::mt19937 jitter(std::random_device{}());
  int64_t offset = 0;
  double pause_s = 0.1;
  bool said = false;
  for (;;) {
    const std::unique_ptr<httplib::Client> client = ConnectToServer(server);
    // The server writes at least an empty frame every few seconds: a longer silence is a
    // server gone without a word, and asking again from the same byte costs nothing.
    client->set_read_timeout(3 * kWatchHeartbeatS);
    FrameReader frames = LogWriter(&offset, out);
    const StreamAnswer answer = StreamGet(
        *client, path + "/logs?frames=1&follow=1&offset=" + std::to_string(offset),
        [&](const char* data, size_t size) {
          frames.Add(data, size);
          pause_s = 0.1;
        },
        " (job " + job + " goes on; follow it later with `berth logs -f " + job + "`)");
    SayIfNoServer(answer, server, pause_s);
    SayWhyWaiting(answer, &said);
    if (answer.status == 200) {
      // The stream ends once the job has, or when the server goes (asked again then); what
      // came after the last chunk is read again.
      const std::unique_ptr<httplib::Client> rest = ConnectToServer(server);
      if (const auto r = rest->Get(path); r && r->status == 200) {
        const Json state = Json::parse(r->body, nullptr, false);
        if (state.is_object() && ControlPlane::Ended(state.value("state", "")) &&
            !state.value("stopping", false)) {
          WriteLogs(job, offset, out);
          return state;
        }
      } else if (r && r->status >= 400 && r->status < 500) {
        CallServer("GET", path);  // says why (the job was removed meanwhile, ...)
      }
    }
    std::this_thread::sleep_for(std::chrono::duration<double>(
        pause_s * std::uniform_real_distribution<double>(0.5, 1.5)(jitter)));
    pause_s = std::min(pause_s * 2, 10.0);
  }
}

// `berth run` without -d, as `docker run`: the job's exit code, 1 when it ended without one.
int ExitCodeOf(const Json& job) {
  const std::string state = job["state"].get<std::string>();
  if (state == "succeeded") return 0;
  const int code = job.value("exitCode", 0);
  std::cerr << "berth: job " << job["id"] << " " << state << ": " << Text(job["reason"]) << "\n";
  return state == "failed" && code != 0 ? code : 1;
}

// `berth policy apply FILE`, `berth queues apply FILE`: the file is checked here first, as the
// server's flags would check it, so that a mistake names the file and its line; then the server
// checks it again against its jobs and applies it (PUT /v1/policy, /v1/queues).
void AddApplyCommand(CLI::App& parent, const std::string& what, const std::string& help) {
  auto* apply = parent.add_subcommand("apply", help);
  auto file = std::make_shared<std::string>();
  apply->add_option("file", *file, what == "policy" ? "Policy file (YAML)" : "VC file (YAML)")
      ->required()
      ->check(NonEmptyPath());
  auto format = std::make_shared<std::string>("table");
  AddFormatOption(*apply, format.get());
  apply->callback([file, what, format] {
    const std::string text = ReadFileText(*file);
    if (text.size() > kMaxRequestBytes)
      Exit(2, *file + ": " + std::to_string(text.size()) + " bytes, over the server's limit of " +
                  std::to_string(kMaxRequestBytes) + " bytes");
    if (what == "policy")
      ParsePolicyYaml(text, *file);
    else
      ParseVcYaml(text, *file);
    const Json answer = CallServer("PUT", "/v1/" + what, text);
    std::cout << (*format == "json" ? JsonText(answer) : answer["reason"].get<std::string>())
              << "\n";
  });
}

// What `berth node VERB NAME` prints: the node's name, as docker's verbs print what they
// acted on, or with --format json the server's answer.
void PrintNodeAnswer(const Json& answer, const std::string& name, const std::string& format) {
  std::cout << (format == "json" ? JsonText(answer) : name) << "\n";
}

// `berth policy show`, `berth queues show`: the file in force (GET /v1/policy, /v1/queues),
// byte for byte, as `apply` takes it back; where it came from goes to standard error, so that
// show and apply round trips leave the file as it is. `format` may be the parent's --format too
// (`berth queues --format json show`).
void AddShowCommand(CLI::App& parent, const std::string& what,
                    const std::shared_ptr<std::string>& format) {
  auto* show = parent.add_subcommand(
      "show", "Print the " + what + " in force as a file that `" + what + " apply` takes");
  AddFormatOption(*show, format.get());
  show->callback([what, format] {
    const Json answer = CallServer("GET", "/v1/" + what);
    if (*format == "json") {
      std::cout << JsonText(answer) << "\n";
      return;
    }
    std::cerr << "berth: the " << what << " in force on " << ServerAddressFromEnv().text << " ("
              << Text(answer["from"]) << ")\n";
    std::cout << Text(answer["yaml"]);
  });
}

}  // namespace

void AddFormatOption(CLI::App& verb, std::string* format) {
  verb.add_option("--format", *format, "json: the server's answer as JSON, for scripts")
      ->check(CLI::IsMember({"json", "table"}));
}

void AddClientCommands(CLI::App& app) {
  auto* run = app.add_subcommand("run", "Submit a job to the server (as docker run)");
  auto r = std::make_shared<RunArgs>();
  run->add_flag("-d,--detach", r->detach, "Print the job id and return");
  AddFormatOption(*run, &r->format);
  run->add_option("-f,--file", r->file, "Job spec file (YAML or JSON, docs/api.md); - for stdin")
      ->check(NonEmptyPath());
  run->add_option("--name", r->name, "Job name")->each([r](const std::string&) {
    r->name_set = true;
  });
  run->add_option("--queue", r->queue, "Queue (default: default)")->each([r](const std::string&) {
    r->queue_set = true;
  });
  run->add_option("--priority", r->priority, "Priority")->each([r](const std::string&) {
    r->priority_set = true;
  });
  run->add_option("--gpus", r->gpus, "Whole GPUs per replica")->check(CLI::Range(1, 4096));
  run->add_option("--gpu-share", r->gpu_share, "A share of one GPU, in thousandths (1-1000)")
      ->check(CLI::Range(1, 1000));
  run->add_option("--mig", r->mig, "A MIG instance of this profile (e.g. 1g.10gb)");
  // One value per occurrence, so the image after it stays the image.
  run->add_option("--gpu-model", r->models, "Allowed GPU model (repeatable)")
      ->allow_extra_args(false);
  run->add_option("--replicas", r->replicas, "Replicas (a gang)")->check(CLI::Range(1, 65536));
  run->add_option("--min-replicas", r->min_replicas, "Elastic: start with at least this many")
      ->check(CLI::Range(0, 65536));
  run->add_option("--affinity", r->affinity,
                  "Loosest level a replica's GPUs may spread over: gpu, switch, socket, node "
                  "(default), rack, cluster (or any)");
  run->add_option("--cpus", r->cpus, "CPUs per replica")->check(CLI::Range(0.0, 1e6));
  run->add_option("--memory", r->memory, "Memory per replica (16g, 512m)");
  run->add_option("-e,--env", r->env, "Environment variable KEY=VALUE (repeatable)")
      ->allow_extra_args(false);
  run->add_option("-v,--volume", r->volumes,
                  "Mount HOST:CONTAINER[:ro] (repeatable; the server must allow HOST)")
      ->allow_extra_args(false);
  run->add_option("--shm-size", r->shm_size, "Size of /dev/shm (64m, 1g)");
  run->add_option("words", r->words, "IMAGE [CMD...]");
  run->positionals_at_end();
  run->callback([r] {
    if (!r->detach && r->format == "json")
      Exit(2, "run: --format json goes with -d (a run in the foreground prints the job's output)");
    const std::string spec = RunSpec(*r);  // its mistakes are told before any server's
    if (!r->detach) {
      const Json nodes = CallServer("GET", "/v1/nodes")["nodes"];
      if (std::none_of(nodes.begin(), nodes.end(), [](const Json& n) {
            return n.value("agent", "") == "ready" && n.value("engineError", "").empty();
          })) {
        for (const Json& n : nodes)
          if (!n.value("engineError", "").empty())
            Exit(2, "run: no node can run the job now: the agent of node " + Text(n["name"]) +
                        " cannot reach its container engine (" + Text(n["engineError"]) +
                        "); start dockerd there, or submit with -d");
        Exit(2,
             "run: no node agent is connected, so nothing would run the job and berth run "
             "would wait for ever; start one (berth up, or berth agent on each node), or "
             "submit with -d");
      }
    }
    if (spec.size() > kMaxRequestBytes)
      Exit(2, "the job spec has " + std::to_string(spec.size()) +
                  " bytes, over the server's limit of " + std::to_string(kMaxRequestBytes) +
                  " bytes");
    // Without a token the login names the user of a spec that names none (a file's).
    const char* token = std::getenv("BERTH_TOKEN");
    httplib::Headers headers;
    if (token == nullptr || *token == '\0') headers.emplace("Berth-User", LoginName());
    ServerAnswer submitted = AskServer("POST", "/v1/jobs", spec, headers);
    // The server names the spec "job" where it points into it (job:3:5: ...): the file's name
    // says which file; a spec made of flags has no place to point to.
    if (submitted.exit_code != 0 && submitted.error.rfind("job:", 0) == 0) {
      const size_t fields = submitted.error.find(": ");
      submitted.error = r->file.empty() && fields != std::string::npos
                            ? submitted.error.substr(fields + 2)
                            : (r->file == "-" ? "stdin" : r->file) + submitted.error.substr(3);
    }
    if (submitted.exit_code != 0) Exit(submitted.exit_code, submitted.error);
    const Json job = AnswerJson(submitted.response);
    if (r->detach) {
      std::cout << (r->format == "json" ? JsonText(job) : job["id"].dump()) << "\n";
      return;
    }
    std::cout.flush();
    LogOutput out(/*json=*/false);
    std::exit(ExitCodeOf(FollowLogs(std::to_string(job["id"].get<int64_t>()), &out)));
  });

  auto* logs = app.add_subcommand("logs", "A job's output (as docker logs)");
  auto logs_job = std::make_shared<std::string>();
  auto logs_follow = std::make_shared<bool>(false);
  logs->add_flag("-f,--follow", *logs_follow, "Follow the output until the job ends");
  logs->add_option("job", *logs_job, "Job id")->required();
  auto logs_format = std::make_shared<std::string>();
  logs->add_option("--format", *logs_format,
                   "json: a JSON object a line, {\"stream\": \"stdout\" or \"stderr\", \"text\"}")
      ->check(CLI::IsMember({"json"}));
  logs->callback([logs_job, logs_follow, logs_format] {
    LogOutput out(*logs_format == "json");
    if (*logs_follow) {
      FollowLogs(*logs_job, &out);
      return;
    }
    CallServer("GET", JobPath(*logs_job));  // its errors: no server, no such job
    WriteLogs(*logs_job, 0, &out);
  });

  auto* ps = app.add_subcommand("ps", "List jobs (as docker ps)");
  auto p = std::make_shared<PsArgs>();
  ps->add_flag("-a,--all", p->all, "Show ended jobs too");
  ps->add_flag("-q,--quiet", p->quiet, "Only ids");
  ps->add_option("--queue", p->queue, "Only this queue's jobs");
  AddFormatOption(*ps, &p->format);
  ps->callback([p] { Ps(*p); });

  auto* inspect = app.add_subcommand("inspect", "A job in full, with its state changes");
  auto job = std::make_shared<std::string>();
  inspect->add_option("job", *job, "Job id")->required();
  auto inspect_format = std::make_shared<std::string>("json");
  inspect->add_option("--format", *inspect_format, "json (the only form; as docker inspect's)")
      ->check(CLI::IsMember({"json"}));
  inspect->callback([job, inspect_format] {  // holds what --format writes to
    Json j = CallServer("GET", JobPath(*job));
    j["events"] = CallServer("GET", JobPath(*job) + "/events?limit=10000")["events"];
    std::cout << JsonText(j) << "\n";
  });

  auto jobs = std::make_shared<std::vector<std::string>>();
  auto jobs_format = std::make_shared<std::string>("table");
  auto* stop = app.add_subcommand("stop", "Stop jobs");
  stop->add_option("job", *jobs, "Job ids")->required();
  AddFormatOption(*stop, jobs_format.get());
  stop->callback(
      [jobs, jobs_format] { ForEachJob(*jobs, "POST", "/stop", *jobs_format == "json"); });

  auto* rm = app.add_subcommand("rm", "Forget ended jobs");
  rm->add_option("job", *jobs, "Job ids")->required();
  AddFormatOption(*rm, jobs_format.get());
  rm->callback([jobs, jobs_format] { ForEachJob(*jobs, "DELETE", "", *jobs_format == "json"); });

  auto* queues = app.add_subcommand("queues", "Queues: guarantee, fair share and usage");
  queues->require_subcommand(0, 1);
  AddApplyCommand(*queues, "queues", "Replace the queues with a VC file's (admins)");
  auto queues_format = std::make_shared<std::string>("table");
  AddShowCommand(*queues, "queues", queues_format);
  AddFormatOption(*queues, queues_format.get());
  queues->callback([queues, queues_format] {
    if (queues->got_subcommand("apply") || queues->got_subcommand("show")) return;
    const Json answer = CallServer("GET", "/v1/queues");
    if (*queues_format == "json") {
      std::cout << JsonText(answer) << "\n";
      return;
    }
    TextTable table(
        {"QUEUE", "WEIGHT", "GUARANTEE", "FAIR SHARE", "USAGE", "BORROWED", "PENDING", "RUNNING"});
    for (const Json& q : answer["queues"])
      table.Add({Text(q["name"]), Text(q["weight"]), Text(q["guaranteeGpus"]),
                 Text(q["fairShareGpus"]), Text(q["usageGpus"]), Text(q["borrowedGpus"]),
                 q["pending"].dump(), q["running"].dump()});
    table.Print();
  });

  auto* policy = app.add_subcommand("policy", "The server's scheduling policy");
  policy->require_subcommand(1);
  AddApplyCommand(*policy, "policy", "Replace the policy with a policy file's, jobs kept (admins)");
  AddShowCommand(*policy, "policy", std::make_shared<std::string>("table"));

  auto* nodes = app.add_subcommand("nodes", "Nodes, their free GPUs and their agents");
  auto nodes_format = std::make_shared<std::string>("table");
  AddFormatOption(*nodes, nodes_format.get());
  nodes->callback([nodes_format] {
    const Json answer = CallServer("GET", "/v1/nodes");
    if (*nodes_format == "json") {
      std::cout << JsonText(answer) << "\n";
      return;
    }
    TextTable table({"NODE", "RACK", "MODEL", "GPUS", "FREE", "STATUS", "AGENT"});
    for (const Json& n : answer["nodes"])
      table.Add({Text(n["name"]), OrDash(n["rack"]), OrDash(n["model"]), n["gpus"].dump(),
                 n["freeGpus"].dump(), n["cordoned"].get<bool>() ? "cordoned" : "ready",
                 n["agent"].get<std::string>() +
                     (n["simulated"].get<bool>() ? " (simulated GPUs)" : "") +
                     (n.value("engineError", "").empty() ? "" : " (no container engine)")});
    table.Print();
    // Under the table: what would otherwise pin jobs away from their GPUs unnoticed.
    for (const Json& n : answer["nodes"]) {
      for (const Json& m : n.value("topologyMismatch", Json::array()))
        std::cout << n["name"].get<std::string>() << ": topology differs: " << Text(m) << "\n";
      if (!n.value("engineError", "").empty())
        std::cout << n["name"].get<std::string>() << ": " << Text(n["engineError"]) << "\n";
    }
  });

  auto* node = app.add_subcommand("node", "Cordon, uncordon, drain or remove a node (admins)");
  node->require_subcommand(1);
  auto node_format = std::make_shared<std::string>("table");
  for (const auto& [action, help] : std::vector<std::pair<std::string, std::string>>{
           {"cordon", "No new jobs on the node"},
           {"uncordon", "Take new jobs on the node again"},
           {"drain", "Cordon the node and evict its jobs (they wait again)"}}) {
    auto* verb = node->add_subcommand(action, help);
    auto name = std::make_shared<std::string>();
    verb->add_option("name", *name, "Node name")->required();
    AddFormatOption(*verb, node_format.get());
    verb->callback([name, action = action, node_format] {
      PrintNodeAnswer(CallServer("POST", "/v1/nodes/" + httplib::detail::encode_query_param(*name) +
                                             "/" + action),
                      *name, *node_format);
    });
  }
  auto* node_rm = node->add_subcommand(
      "rm",
      "Forget a node that joined and whose agent is gone (servers started with --cluster none)");
  auto rm_name = std::make_shared<std::string>();
  node_rm->add_option("name", *rm_name, "Node name")->required();
  AddFormatOption(*node_rm, node_format.get());
  node_rm->callback([rm_name, node_format] {
    PrintNodeAnswer(
        CallServer("DELETE", "/v1/nodes/" + httplib::detail::encode_query_param(*rm_name)),
        *rm_name, *node_format);
  });

  auto* events = app.add_subcommand("events", "The event log: jobs' and nodes' state changes");
  auto e = std::make_shared<EventsArgs>();
  events->add_flag("-f,--follow", e->follow, "Keep printing events as they happen");
  events->add_option("--since", e->since, "Only events after this number")
      ->check(CLI::Range(int64_t{0}, INT64_MAX));
  AddFormatOption(*events, &e->format);
  events->callback([e] { Events(*e); });
}

}  // namespace berth
