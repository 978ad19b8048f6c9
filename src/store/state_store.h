// The control plane's durable state: every job the server accepted and every state change it
// went through, in one SQLite database (WAL mode) under the state directory.
//
// Durability: Wait(Enqueue(writes)) returns once the writes are on disk (synchronous=FULL), so
// a server that acknowledges after it loses nothing it acknowledged to a kill -9. Writes of
// concurrent callers are committed together by one writer thread (group commit): one fsync
// serves every caller waiting at that moment, in the order Enqueue was called.
//
// Schema: versioned by PRAGMA user_version. An older database is migrated on open; a newer one
// (written by a later berth) is refused, since this version cannot know what it would break.
// A write that fails (disk full, I/O error) fails its batch and every later one: the server
// then refuses what it cannot record, rather than acknowledging it.
//
// Thread-safe: Enqueue, Wait and the readers may be called from any thread.
#pragma once

#include <sqlite3.h>

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace berth {

struct StoreError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// One job as the server keeps it. `spec` is the job spec as submitted (JSON), `placements` the
// GPUs it was given (JSON, "" while it holds none).
struct StoredJob {
  int64_t id = 0;
  std::string name;
  std::string queue;
  std::string user;
  std::string spec;
  std::string state;  // the server's job states: pending, scheduled, ..., stopped, lost
  std::string reason;
  int exit_code = 0;
  double submitted = 0;  // seconds since the epoch
  double updated = 0;
  std::string placements;
  bool moved = false;  // the engine moved it once to make room (JobRecord::moved): never again
};

// One entry of the event log: a job's state change (job set, node ""), a node's (job 0), or a
// setting applied (job 0, node "").
// `seq` numbers every event of the state, increasing, never given twice: a watcher resumes
// from the last one it saw.
struct StoredEvent {
  int64_t seq = 0;
  double at = 0;
  int64_t job = 0;
  std::string node;
  std::string state;  // a job state, cordoned / uncordoned / drained / node-removed, or
                      // policy-applied / queues-applied
  std::string reason;
};

// Events in order, and where the next page starts: after the last event returned, or after
// every event looked at when some were not the caller's to see.
struct EventPage {
  std::vector<StoredEvent> events;
  int64_t next = 0;
  int64_t newest = 0;  // the log's newest event as the page was read
};

// An operator's mark on a node, kept across restarts.
struct StoredNode {
  std::string name;
  bool cordoned = false;
};

// A setting an admin applied through the API ("policy", "queues": the file's text), which a
// restart uses rather than the server's flags.
struct StoredSetting {
  std::string key, value;
};

struct StoreWrite {
  enum class Kind {
    kPut,      // insert or replace the job, and log an event of its state and reason
    kDelete,   // remove the job and its events
    kNode,     // set the node's mark, and log an event of `event` and the job's `reason`
    kSetting,  // set the setting, and log an event (job 0, node "") of `event` and `reason`
    kForget,   // remove the node's mark and the setting `setting.key`, and log an event of
               // `event` and `reason` for the node
  };
  Kind kind = Kind::kPut;
  StoredJob job;    // kPut, kDelete; for the others only `updated` and `reason`
  StoredNode node;  // kNode, kForget (its name)
  std::string event;
  StoredSetting setting;  // kSetting

  static StoreWrite Put(StoredJob job) { return {Kind::kPut, std::move(job), {}, "", {}}; }
  static StoreWrite Delete(StoredJob job) { return {Kind::kDelete, std::move(job), {}, "", {}}; }
  static StoreWrite Node(StoredNode node, std::string event, double at, std::string reason) {
    StoreWrite w{Kind::kNode, {}, std::move(node), std::move(event), {}};
    w.job.updated = at;
    w.job.reason = std::move(reason);
    return w;
  }
  static StoreWrite Forget(std::string node, std::string setting_key, std::string event, double at,
                           std::string reason) {
    StoreWrite w{Kind::kForget,
                 {},
                 {std::move(node), false},
                 std::move(event),
                 {std::move(setting_key), ""}};
    w.job.updated = at;
    w.job.reason = std::move(reason);
    return w;
  }
  static StoreWrite Setting(StoredSetting setting, std::string event, double at,
                            std::string reason) {
    StoreWrite w{Kind::kSetting, {}, {}, std::move(event), std::move(setting)};
    w.job.updated = at;
    w.job.reason = std::move(reason);
    return w;
  }
};

class StateStore {
 public:
  // The schema this berth writes.
  static constexpr int kSchemaVersion = 5;

  // Opens DIR/berth.db, creating DIR and the database when missing, and takes DIR/lock: one
  // server per state, since two would overwrite each other's jobs and hand out the same GPUs.
  // Checks that the database is intact and writable. Throws StoreError naming the path and
  // what to do.
  explicit StateStore(const std::string& dir);
  ~StateStore();
  StateStore(const StateStore&) = delete;
  StateStore& operator=(const StateStore&) = delete;

  // Queues writes for the next commit; returns a ticket for Wait.
  uint64_t Enqueue(std::vector<StoreWrite> writes);
  // Returns once the ticket's writes are committed; throws StoreError when they failed.
  void Wait(uint64_t ticket);
  // The newest ticket handed out (0: none yet). A reader that saw memory under the lock its
  // writers enqueue under waits for it, so as to answer only what is committed.
  uint64_t Enqueued() const;

  // Every job, by id (startup: the server rebuilds from these).
  std::vector<StoredJob> LoadJobs() const;
  // Above every id ever stored, removed jobs' included: ids are never given twice.
  int64_t NextJobId() const;
  // Up to `limit` of a job's events after `seq`, oldest first.
  EventPage JobEvents(int64_t job, int64_t seq, size_t limit) const;
  // Up to `limit` events after `seq`, oldest first; only node events and the jobs of `user`
  // unless `user` is "". When there are none yet, waits up to `wait_s` for a commit that
  // brings some (a watch).
  EventPage EventsAfter(int64_t seq, size_t limit, const std::string& user, double wait_s) const;
  // The nodes an operator has marked.
  std::vector<StoredNode> LoadNodes() const;
  // The settings applied through the API, by key.
  std::vector<StoredSetting> LoadSettings() const;
  const std::string& path() const { return path_; }

 private:
  void Migrate();
  void WriterLoop();
  std::string WriteBatch(const std::vector<StoreWrite>& batch);
  int64_t NewestEventSeq() const;  // with read_mu_ held

  std::string path_;
  int lock_fd_ = -1;           // DIR/lock, held while the store is open
  sqlite3* writer_ = nullptr;  // used by the writer thread only (and Migrate, before it starts)
  sqlite3* reader_ = nullptr;  // guarded by read_mu_
  mutable std::mutex read_mu_;

  mutable std::mutex mu_;
  mutable std::condition_variable wake_writer_, committed_cv_;
  std::vector<StoreWrite> queued_;
  uint64_t enqueued_ = 0;   // tickets handed out
  uint64_t committed_ = 0;  // tickets whose writes are done (committed, or failed)
  std::string failure_;     // the first failed commit; every later ticket fails too
  uint64_t first_failed_ = UINT64_MAX;
  bool stopping_ = false;
  std::thread writer_thread_;
};

}  // namespace berth
