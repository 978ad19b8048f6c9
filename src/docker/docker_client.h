// The Docker Engine API, spoken over the engine's unix socket (libcurl, HTTP/1.1). The agent's
// only way to run containers: create, start, inspect, stop, remove, logs, images, pulls.
//
// Contract:
// - The API version is negotiated once, by Negotiate() (GET /version): the lower of the
//   engine's ApiVersion and the newest this client speaks (kNewestApiVersion). Every later call
//   goes to /v<version>/...; calling one before Negotiate() negotiates first.
// - Every call blocks until the engine answers or the call's time limit passes. A refusal
//   throws DockerError with the HTTP status and the engine's own "message"; an engine that
//   cannot be reached (no socket, daemon stopped, timeout) throws DockerError with status 0
//   and says how to fix it ("is dockerd running? socket ...").
// - Nothing the engine sends can take unbounded memory: answers are capped (kMaxAnswerBytes),
//   logs per call are capped by the caller's max_bytes (whole lines only).
// - One DockerClient may be used from one thread at a time; make one per thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/telemetry.h"

namespace berth {

struct DockerError : std::runtime_error {
  DockerError(int status, const std::string& message)
      : std::runtime_error(message), status(status) {}
  int status;  // the engine's HTTP status; 0 when the engine could not be reached
};

struct ContainerMount {
  std::string host, container;
  bool read_only = false;
};

// What a container is created with (POST /containers/create).
struct ContainerSpec {
  std::string name;  // "": the engine names it
  std::string image;
  std::vector<std::string> command;  // empty: the image's default command
  std::vector<std::string> env;      // "KEY=VALUE"
  std::map<std::string, std::string> labels;
  std::vector<ContainerMount> mounts;    // HostConfig.Binds
  int64_t shm_bytes = 0;                 // HostConfig.ShmSize; 0: the engine's default
  int64_t memory_bytes = 0;              // HostConfig.Memory; 0: no limit
  int64_t nano_cpus = 0;                 // HostConfig.NanoCpus; 0: no limit
  std::string cpuset_cpus, cpuset_mems;  // HostConfig.CpusetCpus / CpusetMems; "": unset
  // HostConfig.DeviceRequests: one request, driver "nvidia", these DeviceIDs (GPU or MIG
  // UUIDs), capabilities [["gpu"]]. Empty: no device request.
  std::vector<std::string> gpu_device_ids;
};

struct ContainerInfo {
  std::string id, name, image;
  std::map<std::string, std::string> labels;
  std::string status;  // State.Status: created, running, paused, restarting, exited, dead...
  bool running = false;
  int exit_code = 0;
  bool oom_killed = false;
  std::string started_at, finished_at;   // RFC 3339 as the engine gives them; "" when unset
  std::string error;                     // State.Error
  std::string cpuset_cpus, cpuset_mems;  // HostConfig's, as created or updated
  bool tty = false;                      // Config.Tty: its logs are one raw stream, not frames
};

// The engine's RFC 3339 UTC time ("2026-12-02T13:40:01.123456789Z", the fraction optional) as
// seconds since the epoch; 0 when unset (the engine's "0001-01-01T00:00:00Z") or malformed.
double EngineSeconds(const std::string& text);

struct LogLine {
  bool stderr_stream = false;
  std::string timestamp;  // RFC 3339 with nanoseconds, as the engine stamps it
  std::string text;       // the line without its timestamp, newline kept when it had one
};

// The most lines of a read, up to `most`, that a reader may take and lose none of the rest when
// its next read starts after the latest of them: the engine's stdout and stderr are not merged
// in time order, so a line after the stop may be stamped earlier than one before it.
size_t SafeStop(const std::vector<LogLine>& lines, size_t most);

// What a wait on the engine's events (DockerClient::WaitForExit) saw on the way.
struct EngineEventsSeen {
  struct Signal {
    std::string container;
    int64_t at_ns = 0;  // nanoseconds since the epoch
    int signal = 0;     // its number; 0 when the event did not say
  };
  // The containers the engine sent a signal ("kill" events: a stop, a kill, or the engine's
  // own shutdown, whoever asked for it), in order.
  std::vector<Signal> signalled;
  // Every event stamped before this (nanoseconds since the epoch) has been seen.
  int64_t until_ns = 0;
};

struct ImageInfo {
  std::string id;
  std::vector<std::string> names;  // RepoTags, and RepoDigests ("name@sha256:...")
  int64_t bytes = 0;
  // RootFS.Layers, sized from the image's history: the history's entries with a size, oldest
  // first, are the layers in order. When their count differs from the layers' (a layer whose
  // diff is empty has size 0 too), entries are matched one to one if the counts of entries and
  // layers agree, and otherwise no layer gets a size (0): a wrong size is worse than none.
  std::vector<ImageLayer> layers;
};

// The JSON body of POST /containers/create for `spec` (its name goes in the query, not here).
// Apart from the client so that what is sent can be checked without an engine.
std::string CreateBody(const ContainerSpec& spec);

class DockerClient {
 public:
  static constexpr const char* kNewestApiVersion = "1.43";
  static constexpr size_t kMaxAnswerBytes = 16 << 20;

  explicit DockerClient(std::string socket_path = "/var/run/docker.sock");
  ~DockerClient();
  DockerClient(const DockerClient&) = delete;
  DockerClient& operator=(const DockerClient&) = delete;

  // The version agreed on ("1.41"); the engine's own version string in `engine_version`.
  std::string Negotiate(std::string* engine_version = nullptr);
  // The engine's identity (16 hex digits): a digest of its ID, host name and data root (GET
  // /info). Two clients of one engine get the same; two engines differ, also on one host or
  // where a host's disk was cloned with its engine's ID.
  std::string EngineIdentity();

  std::string Create(const ContainerSpec& spec);  // the new container's id
  void Start(const std::string& id);              // already running: no error
  ContainerInfo Inspect(const std::string& id);   // DockerError 404 when gone
  // Containers, stopped ones too, that carry the label ("key" or "key=value"). One still
  // created (never started, or being started) has its id, name, image, labels and status only
  // (inspect it for the rest); the others are inspected whole.
  std::vector<ContainerInfo> List(const std::string& label);
  // SIGTERM, then SIGKILL after `grace_s` seconds (the engine's own stop timeout). Already
  // stopped: no error.
  void Stop(const std::string& id, int grace_s);
  void Remove(const std::string& id, bool force);  // already gone: no error
  // Rebinds a running container's CPU set (POST /containers/{id}/update).
  void UpdateCpuset(const std::string& id, const std::string& cpus, const std::string& mems);
  // Lines written after `since` (a timestamp as LogLine gives, exclusive; "" for all), stdout
  // and stderr demultiplexed from the engine's 8-byte frames (or read raw for a TTY
  // container), at most `max_bytes` of whole lines, oldest first. A last line the container
  // wrote without a newline is a line too. A single line longer than max_bytes comes back cut
  // to max_bytes, so that a caller that passes the last timestamp back always gets further.
  // A read that stops at max_bytes ends before the last timestamp it reached, as the engine
  // gives every 16 KiB piece of a longer line one timestamp and a next read from it would miss
  // the rest; and before a line stamped later than one it leaves in the next MiB, as stdout's
  // and stderr's lines reach the log apart (a line may come after lines stamped tens of
  // milliseconds later). When that would leave nothing, the lines within max_bytes (or the
  // first one cut to it) come back if `cut`, else nothing does. `*more` (when given) says whether
  // the read stopped before the end. A read after `since` with few lines after it costs the engine
  // little however long the log (it reads them from the log's end). std::invalid_argument when
  // `since` is not an RFC 3339 timestamp.
  std::vector<LogLine> Logs(const std::string& id, const std::string& since, size_t max_bytes,
                            bool* more = nullptr, bool cut = true);

  // Waits up to `seconds` (1 to 60) for a container carrying `label` ("key=value") to exit
  // after `*after_ns` (nanoseconds since the epoch; 0: from now; one in the past reads back
  // the events the engine still keeps: its last few hundred, of every kind), through the engine's
  // event stream. True as soon as one does, false when none did. `*after_ns` moves to the last
  // event seen, so that the next call waits for later ones (none is missed between calls, none
  // counted twice). One past this host's clock (stepped back) counts as now: the engine refuses
  // a wait that ends before it begins. `seen` (when given) gets what else the wait saw.
  bool WaitForExit(const std::string& label, int seconds, int64_t* after_ns,
                   EngineEventsSeen* seen = nullptr);

  bool HasImage(const std::string& image);
  ImageInfo InspectImage(const std::string& image);  // DockerError 404 when absent
  // Every image with its layers. An image's id is the digest of its content, so its layers
  // never change: `layers_by_id` (when given) keeps them from call to call, and only images
  // not in it are inspected (it ends holding the images listed now).
  std::vector<ImageInfo> Images(
      std::map<std::string, std::vector<ImageLayer>>* layers_by_id = nullptr);
  // Pulls `image` ("name[:tag]", ":latest" when no tag), calling `progress` with each status
  // line the engine streams ("<layer id>: Downloading [==>  ] 12.3MB/40.1MB"...); progress
  // runs inside libcurl's callback and must not throw. Throws DockerError when the pull fails:
  // the engine's refusal, or its error line (status 500 then, as the HTTP status was 200),
  // e.g. no registry reachable. Once `cancel` (when given) is set, the pull is given up at its
  // next status line: DockerError 0 then.
  void Pull(const std::string& image, const std::function<void(const std::string&)>& progress,
            const std::atomic<bool>* cancel = nullptr);

 private:
  // One request; `path` is absolute ("/version" or Path(...)). Returns the answer's body, or
  // hands it to `sink` piece by piece as it arrives (sink returns false to end the transfer
  // early, which is no error). Throws DockerError for a status >= 400 or no answer.
  // `stall_s` > 0 also ends the call when nothing arrives for that long.
  using Sink = std::function<bool(const char*, size_t)>;
  std::string Call(const std::string& method, const std::string& path, const std::string& body,
                   long timeout_s, const Sink& sink = nullptr, long stall_s = 0);
  std::string Path(const std::string& path);  // "/v<version>" + path, negotiating first

  std::string socket_path_;
  std::string version_;   // "" until negotiated
  void* curl_ = nullptr;  // the easy handle, reused so that the connection is kept alive
};

}  // namespace berth
